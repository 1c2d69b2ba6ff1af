"""The lease: one guard's life, put together from the engine's parts.

One :class:`Lease` is one guard's life. All of its coroutines run on one event
loop (the process runtime's in production, the test's own with a manual clock
in unit tests). Other threads only read its state and its lost signal.

Every write is stamped with the time it was *sent*; validity runs from that
stamp for 90% of the lease and is only ever extended by a confirmed write. A
write whose outcome is unknown is reconciled with a strong read: it counts only
if the row shows exactly the owner and version we attempted.

Where each part lives:

- ``states``: the states, the events and the transition table;
- ``base``: identity, state changes, loss, validity, what other threads ask;
- ``counters``: the request counts and their snapshot;
- ``requests``: bounded requests, unknown outcomes, late answers;
- ``acquire``, ``renew``, ``release``: the three phases;
- ``fenced``: protocol 2's requests (``fencing=True``) and reading the token;
- ``caller``: the sync caller's own-thread path;
- ``scheduling``: the validity watch and deferred renewal starts.
"""

from __future__ import annotations

from .caller import CallerPath

__all__ = ["Lease"]


class Lease(CallerPath):
    """One guard: a single acquisition of one key, its renewals and its release.

    The parts, from the bottom: ``LeaseBase`` (state and loss), ``Requests``,
    ``Renewing`` and ``Releasing``, ``Acquiring``, and ``CallerPath``.
    """
