"""Distributed locks: async and sync guards, and a decorator for functions.

All three are thin faces over one lease engine running on the process
runtime; they differ only in how they wait for it.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Self, cast

from . import _meters, _tracing, shutdown
from ._advice import explain
from ._calls import CALL, Chosen, GuardedCalls, GuardOptions, LockOptions, Template
from ._engine.deadline import suspension_warning
from ._engine.holder import check_metadata
from ._engine.lease import Lease
from ._engine.states import State
from ._keyset import KeysTemplate, key_set
from ._redact import logged_key
from .exceptions import DynamoDBError, FencingUnavailable, GuardReused
from .keys import KeyTemplate
from .metrics import LockMetrics

if TYPE_CHECKING:
    import asyncio

    from ._engine.runtime import Runtime
    from .transaction import SyncTransaction, Transaction

__all__ = [
    "DistributedLock",
    "LockMetrics",
    "SyncDistributedLock",
    "current_guard",
    "distributed_lock",
]


#: Set at interpreter exit: from then on ``_Guard.__del__`` releases nothing, as a
#: ``weakref.finalize`` with ``atexit=False`` would not run then either.
_exiting = False


def _stop_releasing_dropped_guards() -> None:
    global _exiting
    _exiting = True


atexit.register(_stop_releasing_dropped_guards)


class _Guard(LockOptions):
    """What sync and async guards share: construction, checks and metrics."""

    #: While held: the runtime ``__del__`` releases on.
    _dropped: Runtime | None = None

    def _made(self, options: GuardOptions, chosen: Chosen) -> None:
        table, lease_s, wait_s, on_lost = options
        key, keys, fencing, fair, metadata = chosen
        resolved = key_set(key, keys, fencing=fencing)
        self._lease: Lease = self._client._new_lease(
            table, resolved[0], lease_s, wait_s, on_lost, fencing=fencing, keys=resolved, fair=fair
        )
        self.set_metadata(metadata)  # checked here, before any request

    @property
    def table(self) -> str:
        """The lock table."""
        return self._lease.table

    @property
    def key(self) -> str:
        """The resolved lock key (with ``keys``: the first of them)."""
        return self._lease.key

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key this guard holds: ``(key,)``, or the resolved ``keys``."""
        return self._lease.keys

    @property
    def owner(self) -> str:
        """This guard's owner token (a UUID4), as written to the row."""
        return self._lease.owner

    @property
    def fencing(self) -> bool:
        """True when the lock was created with ``fencing=True`` (protocol-2 rows)."""
        return self._lease.fencing

    @property
    def fencing_token(self) -> int:
        """This acquisition's token: larger than every earlier owner's of this key.

        Send it with each protected write to a destination that refuses lower
        tokens (`dynalease.fencing`). Renewals keep it; it stays readable
        after loss or release. `FencingUnavailable`
        without ``fencing=True`` or before acquiring.
        """
        lease = self._lease
        if lease.fencing_token is not None:
            return lease.fencing_token
        why = (
            f"the guard is {lease.state.value}, not acquired: read it inside the lock block"
            if lease.fencing
            else "it was created without fencing=True (docs/fencing.md)"
        )
        raise FencingUnavailable(
            f"lock {logged_key(self.key)} in table {self.table!r} has no token: {why}"
        )

    @property
    def lost(self) -> bool:
        """True once ownership is known to be gone (expired, taken over, rejected)."""
        lease = self._lease
        return lease.counters().lost or (lease.state is State.HELD and lease.time_left() <= 0)

    @property
    def time_left(self) -> float:
        """Seconds of local validity left before the guard counts as lost (0 if not held)."""
        return self._lease.time_left()

    def raise_if_lost(self) -> None:
        """Raise `LockLost` unless this guard holds a valid lease right now.

        A local check: it cannot make a later side effect atomic with ownership. Use `check_in`
        to protect DynamoDB writes.
        """
        self._lease.raise_if_lost()

    def wait_lost(self, timeout: float | None = None) -> bool:
        """Block up to ``timeout`` seconds until the guard is lost; True if it was.

        Long-running sync work can run this in a watcher thread, or poll with ``timeout=0``, to
        stop early instead of finding out at its next write.
        """
        try:
            self._lease.lost_signal.result(timeout)
        except TimeoutError:  # concurrent.futures' is the built-in one
            return self.lost
        return True

    async def until_lost(self) -> None:
        """Return when the guard is lost; await it beside long async work.

        For example:

            async with DistributedLock(client, table="locks", key="job") as lease:
                work = asyncio.ensure_future(long_job())
                lost = asyncio.ensure_future(lease.until_lost())
                await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
        """
        import asyncio

        await asyncio.shield(asyncio.wrap_future(self._lease.lost_signal))

    def check_in(self, transaction: Transaction | SyncTransaction) -> None:
        """Add this guard's ownership condition to a transaction of the same client.

        DynamoDB then rejects the whole transaction if the lock was released or
        taken over before it committed. Commit inside the lock block. Raises
        `LockLost` if the guard is not held now.
        """
        from .transaction import _TransactionBase  # loaded by the transaction passed in

        if not isinstance(transaction, _TransactionBase):
            raise TypeError(
                f"check_in() takes a dynalease Transaction or SyncTransaction, "
                f"got {type(transaction).__name__}"
            )
        if transaction.client is not self._client:
            raise ValueError(
                "the transaction uses a different DynamoDBClient than this lock; "
                "create the transaction with the lock's client"
            )
        transaction._check_in(self._lease, self._lease.condition_items())  # one per key

    @property
    def metrics(self) -> LockMetrics:
        """A snapshot of this guard's requests, renewals, wait and capacity.

        A fair guard's queue requests are included.
        """
        counters, line = self._lease.counters(), self._lease.acquirer.line
        if not line.reads and not line.writes:
            return counters
        return dataclasses.replace(
            counters,
            read_requests=counters.read_requests + line.reads,
            write_requests=counters.write_requests + line.writes,
        )

    def set_metadata(self, metadata: Mapping[str, Any] | None) -> None:
        """Replace the rows' holder ``metadata`` (JSON, <= 512 bytes); the next renewal sends it."""
        self._lease.spec.holder.set_metadata(metadata)

    @contextlib.contextmanager
    def _acquiring(self, task: asyncio.Task[Any] | None) -> Iterator[Runtime]:
        """Around a face's acquisition: the checks, the span, the errors; then it is held."""
        if self._lease.state is not State.NEW:
            raise GuardReused(
                f"this guard for {logged_key(self.key)} was already used; guards are single use "
                "and locks are not reentrant: create a new guard"
            )
        runtime = self._client._runtime()
        try:
            with _tracing.acquiring(self._lease) as link, _meters.acquiring(self._lease):
                self._lease.renewer.trace_link = link
                yield runtime
        except DynamoDBError as error:
            client = self._client
            raise explain(
                error,
                key=self.key,
                table=self.table,
                region=client.region,
                endpoint=client._endpoint_in_use,
            ) from error
        self._dropped = runtime  # held: see __del__
        shutdown.hold(self, task)

    @contextlib.contextmanager
    def _releasing(self, exc: BaseException | None) -> Iterator[None]:
        """Around a face's release: its span; a failure is raised, or noted on ``exc``."""
        self._dropped = None
        if exc is not None and not isinstance(exc, Exception):
            suspension_warning(self._lease, exc)
        try:
            with _tracing.releasing(self._lease), _meters.releasing(self._lease):
                yield
        except Exception as cleanup_error:
            if exc is None:
                raise
            exc.add_note(f"dynalease: lock cleanup also failed: {cleanup_error}")
        finally:
            shutdown.drop(self)

    def __del__(self) -> None:
        """Release in the background a held guard dropped unexited: it would renew forever.

        Not a ``weakref.finalize``: its callback would have to hold the lease, and a lease
        whose ``on_lost`` refers back to its guard (``on_lost=lambda e: log(guard.key)``)
        would then keep the guard alive for ever, its row renewed; ``__del__`` is collected
        with the cycle (tests/unit/test_guard_faces.py).
        """
        runtime = self._dropped
        if runtime is not None and not _exiting:
            runtime.call_soon(self._lease.abandon)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(table={self.table!r}, key={self.key!r}, "
            f"state={self._lease.state.value!r})"
        )


class DistributedLock(_Guard):
    """An async context manager holding one lock, renewed in the background.

    Requires a table with a string partition key named ``key`` and no sort key.
    Guards are single use and locks are not reentrant. Contention raises
    `LockNotAcquired`; loss of ownership raises
    `LockLost`. A lease cannot stop your code: check
    `raise_if_lost` or await `until_lost` in long work.

    For example:

        async with DistributedLock(client, table="locks", key="customer:123") as lease:
            await do_work()
            lease.raise_if_lost()
    """

    async def __aenter__(self) -> Self:
        import asyncio

        with self._acquiring(asyncio.current_task()) as runtime:
            try:
                await runtime.run_async(self._lease.acquire())
            except asyncio.CancelledError:
                runtime.call_soon(self._lease.abandon)
                raise
        return self

    async def __aexit__(
        self, exc_type: object, exc: BaseException | None, traceback: object
    ) -> None:
        with self._releasing(exc):
            await self._client._runtime().run_async(self._lease.release(), shield=True)


class SyncDistributedLock(_Guard):
    """The sync form of `DistributedLock`; waiting releases the GIL.

    For example:

        with SyncDistributedLock(client, table="locks", key="import:daily") as lease:
            run_import()
    """

    def __enter__(self) -> Self:
        return self._enter()

    def _enter(self, attempt_cap: float | None = None) -> Self:
        """Acquire, as ``with`` does.

        ``attempt_cap`` caps the network budget of a ``wait_timeout=0`` attempt (the Lambda
        middleware's, from the invocation's time left).
        """
        with self._acquiring(None) as runtime:
            self._lease.caller.hold(runtime, attempt_cap)
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        with self._releasing(exc):
            self._lease.caller.release(self._client._runtime())


def current_guard() -> SyncDistributedLock | DistributedLock:
    """The guard of the innermost `distributed_lock` call running here.

    For the function's ``fencing_token`` (``fencing=True``). Raises
    ``LookupError`` outside a decorated call.
    """
    guard = CALL.get(None)
    if not isinstance(guard, SyncDistributedLock | DistributedLock):
        raise LookupError("current_guard() works inside a function decorated by distributed_lock")
    return guard


class distributed_lock(LockOptions, GuardedCalls):
    """Run each call of a ``def`` or ``async def`` function under a lock.

    Takes the options of `SyncDistributedLock` (each call's guard is made with them).
    ``key`` (or each entry of ``keys``) is a template over the function's arguments, e.g.
    ``"customer:{customer_id}"``; referenced arguments must be ``str``. Several placeholders are
    length-framed (``"{tenant}:{id}"`` -> ``"4:acme:3:123"``). Template errors are raised here;
    argument errors at call time, before any request. Decorating (or creating an unawaited
    coroutine) makes no request.

    For example:

        @distributed_lock(client, table="locks", key="customer-sync:{customer_id}")
        def synchronize_customer(customer_id: str) -> None:
            ...
    """

    _guards = (DistributedLock, SyncDistributedLock)

    def _made(self, options: GuardOptions, chosen: Chosen) -> None:
        check_metadata(chosen.metadata)
        if chosen.keys is None:
            self._template: Template = KeyTemplate(cast(str, chosen.key))
        else:
            self._template, self._key_name = KeysTemplate(chosen.keys, chosen.key), "keys"
        _, _, fencing, fair, metadata = chosen
        self._keywords = options._asdict() | {
            "fencing": fencing,
            "fair": fair,
            "metadata": metadata,
        }
