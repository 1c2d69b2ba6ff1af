"""The release as a state value and the pure decision of what it does next.

A release deletes the rows still ours; an unknown outcome is followed by a read of
them; a refused delete is followed by finding out who holds them (the loss); every
retry pauses first. :func:`decide` does no I/O and reads no clock: the releaser
(``release.py``) performs what it chooses, as the acquire driver performs
``attempts.decide``. One row or several (deleted in one transaction) go the same way.
"""

from typing import Any, Literal, NamedTuple

from .protocol import OWNER_ATTR

Item = dict[str, Any]

TAKEN_OVER = "another owner took the lock over before release"
DELETED = "the row was deleted by someone else before release"

# --- actions: what the releaser does next -----------------------------------------


class Delete(NamedTuple):
    """Delete ``keys`` if still ours (several: all or nothing, in one transaction)."""

    keys: tuple[str, ...]


class Check(NamedTuple):
    """Read ``keys`` back: after an ``"unknown"`` outcome, or a ``"refused"`` delete."""

    keys: tuple[str, ...]
    after: Literal["unknown", "refused"]


class Pause(NamedTuple):
    """Pause (a renewal's retry interval, never past the deadline), then ``then``."""

    then: Delete


class Done(NamedTuple):
    """Every row is gone or not ours: the release is confirmed."""


class Lose(NamedTuple):
    """Record that ownership was lost (``why``), then ``then``."""

    why: str
    then: Delete | Done


class GiveUp(NamedTuple):
    """The cleanup budget ran out before the release was confirmed."""


Action = Delete | Check | Pause | Lose | Done | GiveUp

# --- outcomes: how the last action ended -------------------------------------------


class Deleted(NamedTuple):
    """The delete was applied."""


class Refused(NamedTuple):
    """The delete's condition failed; ``shown`` is the row its answer showed, if any."""

    shown: Item | None


class Unknown(NamedTuple):
    """The delete may have been applied (no answer, or a failure that may have committed)."""


class Failed(NamedTuple):
    """The request surely failed; ``time_left``: whether the deadline allows another."""

    time_left: bool


class Rows(NamedTuple):
    """What a :class:`Check` read (None where there is no row)."""

    items: dict[str, Item | None]


class Unread(NamedTuple):
    """A :class:`Check`'s read failed."""


class Spent(NamedTuple):
    """No time was left for the request within the cleanup budget."""


class Noted(NamedTuple):
    """A pause or a loss is over."""


Outcome = Deleted | Refused | Unknown | Failed | Rows | Unread | Spent | Noted


class Deletion:
    """One release's state: what :func:`decide` reads, kept up by the releaser."""

    __slots__ = ("keys", "last_error", "outcome", "owner", "releasing", "step", "uncertain")

    def __init__(
        self,
        keys: tuple[str, ...],
        owner: str,
        *,
        releasing: bool = True,
        uncertain: bool = False,
    ) -> None:
        self.keys = keys
        self.owner = owner
        #: Whether the guard is releasing (a loss counts), not cleaning up after giving up.
        self.releasing = releasing
        #: Whether a delete's outcome was unknown: a refusal afterwards may be our own delete.
        self.uncertain = uncertain
        #: The last failure, named in the error if the release is not confirmed.
        self.last_error: BaseException | None = None
        #: The last action and how it ended: :meth:`end` sets them before :func:`decide` reads.
        self.step: Action = Done()
        self.outcome: Outcome = Noted()

    def end(self, step: Action, outcome: Outcome) -> None:
        """``step`` ended with ``outcome``."""
        self.step, self.outcome = step, outcome
        if isinstance(outcome, Unknown):
            self.uncertain = True


def decide(deletion: Deletion) -> Action:
    """The next action, from the last one and how it ended."""
    step, outcome = deletion.step, deletion.outcome
    if isinstance(outcome, Spent):
        return GiveUp()
    if isinstance(step, Pause | Lose):
        return step.then
    if isinstance(step, Delete):
        return _after_delete(deletion, step.keys, outcome)
    assert isinstance(step, Check)
    if not isinstance(outcome, Rows):
        return Pause(Delete(step.keys))  # the read failed: try the delete again
    if step.after == "refused":
        return _refused(deletion, step.keys, outcome.items)
    ours = _ours(deletion, step.keys, outcome.items)
    if not ours:
        return Done()  # our delete was applied (or the rows went otherwise)
    # Not applied: pause like any failed delete, never retry in a tight loop.
    return Pause(Delete(ours)) if ours == step.keys else Delete(ours)


def _after_delete(deletion: Deletion, keys: tuple[str, ...], outcome: Outcome) -> Action:
    if isinstance(outcome, Deleted):
        return Done()
    if isinstance(outcome, Unknown):
        return Check(keys, "unknown")
    if isinstance(outcome, Failed):
        return Pause(Delete(keys)) if outcome.time_left else GiveUp()
    assert isinstance(outcome, Refused)
    if deletion.uncertain:
        return Done()  # most likely our own earlier delete, applied unanswered
    if outcome.shown is not None:
        return _refused(deletion, keys, {keys[0]: outcome.shown})
    return Check(keys, "refused")


def _refused(deletion: Deletion, keys: tuple[str, ...], items: dict[str, Item | None]) -> Action:
    """A refused delete: a row not ours means the guard was lost; the rest are deleted."""
    ours = _ours(deletion, keys, items)
    if ours == keys:
        return Pause(Delete(keys))  # refused, yet every row is ours: try again
    then: Delete | Done = Delete(ours) if ours else Done()
    if not deletion.releasing:
        return then
    gone = next(items.get(key) for key in keys if key not in ours)
    return Lose(DELETED if gone is None else TAKEN_OVER, then)


def _ours(
    deletion: Deletion, keys: tuple[str, ...], items: dict[str, Item | None]
) -> tuple[str, ...]:
    owner = {"S": deletion.owner}
    return tuple(key for key in keys if (items.get(key) or {}).get(OWNER_ATTR) == owner)
