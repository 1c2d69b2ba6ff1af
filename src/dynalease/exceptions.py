"""Exceptions raised by dynalease.

Everything derives from `DynaleaseError`. The three lock outcomes a caller
must handle are `LockNotAcquired` (contention or an exhausted budget; its
subclass `LockUnavailable` when DynamoDB answered none of the attempt's
requests), `LockLost` (ownership is gone) and `LockReleaseError`
(release not confirmed). DynamoDB failures are mapped to `DynamoDBError` subclasses so
a missing table or a permission problem is never mistaken for contention.

The tree::

    DynaleaseError
    ├── LockError                  (table, key, owner)
    │   ├── LockNotAcquired
    │   │   └── LockUnavailable    (an outage, not contention)
    │   ├── LockLost
    │   ├── LockReleaseError
    │   ├── LockNotBroken          (reason: break_lock changed nothing)
    │   ├── MalformedLockRow       (problem)
    │   │   └── FencingMismatch
    │   ├── SharedCallFailed       (error_type, error_message: the single-flight holder's)
    │   └── SharedResultTooLarge   (result, size; also a ValueError)
    ├── DynamoDBError              (code, operation)
    │   ├── TableNotFoundError
    │   ├── AccessDeniedError
    │   ├── ThrottledError         (reasons, advice)
    │   ├── ValidationError
    │   ├── RequestFailedError     (may_have_committed)
    │   └── TransactionCanceledError  (reasons; alias TransactionCanceledException)
    │       └── LockOwnershipLost  (table, key, owner)
    ├── FencingUnavailable
    ├── ForkedProcessError         (also a RuntimeError)
    ├── GuardReused                (also a RuntimeError)
    └── LockHeldAtSnapshot         (also a RuntimeError)

Every error carries ``request_id`` (None where no answer came).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._redact import shown_in_message

__all__ = [
    "AccessDeniedError",
    "DynaleaseError",
    "DynamoDBError",
    "FencingMismatch",
    "FencingUnavailable",
    "ForkedProcessError",
    "GuardReused",
    "LockError",
    "LockHeldAtSnapshot",
    "LockLost",
    "LockNotAcquired",
    "LockNotBroken",
    "LockOwnershipLost",
    "LockReleaseError",
    "LockUnavailable",
    "MalformedLockRow",
    "RequestFailedError",
    "SharedCallFailed",
    "SharedResultTooLarge",
    "TableNotFoundError",
    "ThrottledError",
    "TransactionCanceledError",
    "TransactionCanceledException",
    "ValidationError",
]


class DynaleaseError(Exception):
    """Base class of every error raised by dynalease.

    ``request_id`` is the AWS request id of the DynamoDB answer the error was made
    from (``x-amzn-RequestId``), or of a lock's last answer, where one exists:
    quote it to AWS support or look it up in CloudTrail. ``str(error)`` shows it.
    """

    #: The AWS request id of the answer behind the error, or None.
    request_id: str | None = None

    def __str__(self) -> str:
        text = super().__str__()
        if self.request_id and self.request_id not in text:  # a re-worded error has it already
            return f"{text} (AWS request id {self.request_id})"
        return text


class LockError(DynaleaseError):
    """A lock operation failed; carries the lock's table, key and owner where known.

    The message names the key as log lines do: by its hash unless
    ``DYNALEASE_LOG_KEYS=key`` (errors end up in logs, traces and responses);
    the ``key`` attribute keeps the key itself.

    ``request_id`` is the AWS request id of the lock's last DynamoDB answer, if any.
    """

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        key: str | None = None,
        owner: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(shown_in_message(message, key))
        self.table = table
        self.key = key
        self.owner = owner
        self.request_id = request_id


class LockNotAcquired(LockError):
    """The lock was not acquired: another owner holds it, or the wait budget ran out.

    Decide how to retry; a queue worker should leave the message unacknowledged.
    """


class LockUnavailable(LockNotAcquired):
    """The budget ran out and DynamoDB gave no definite answer to any request of the attempt.

    Every request failed: connection errors, timeouts, 5xx answers or throttling. Or
    the acquisition won, but its answer came so late that less than the hand-over
    margin of validity was left (docs/locks.md): its row is deleted. Either way this
    is an outage (or a wrong endpoint, an endpoint certificate that failed TLS
    verification, or too slow a network path), not a busy key: an API should answer
    ``503``, not ``409``. Whenever an answer showed the lock held
    by another owner, the error is a plain `LockNotAcquired` instead. A
    subclass, so ``except LockNotAcquired`` still catches it:

        try:
            with SyncDistributedLock(client, table="locks", key="job"):
                run_job()
        except LockUnavailable:
            ...  # DynamoDB unreachable: alert, retry later
        except LockNotAcquired:
            ...  # someone else holds the lock
    """


class LockLost(LockError):
    """This guard no longer owns the lock (taken over, expired, released or cancelled)."""


class LockReleaseError(LockError):
    """Release was not confirmed within the cleanup budget.

    The row is still bounded by its lease: another owner can take it over after
    observing it unchanged for the stored lease.
    """


class LockNotBroken(LockError):
    """`dynalease.admin.break_lock` deleted nothing: no holder, or the row changed since read."""


class MalformedLockRow(LockError):
    """The lock row is not a protocol-1 row; it is never taken over.

    Someone wrote the row by hand or another program shares the table. Remove the row after
    checking that no holder depends on it, or use a dedicated table. ``problem`` says what is
    wrong with the row, e.g. ``"lease_ms is missing, expected an integer in 100..86400000"``.
    """

    def __init__(self, message: str, *, problem: str, **context: str | None) -> None:
        super().__init__(message, **context)  # table, key, owner, request_id
        #: What is wrong with the row, without the advice around it.
        self.problem = problem


class FencingMismatch(MalformedLockRow):
    """The row's protocol and the lock's ``fencing`` option disagree; it is never taken over.

    A fenced lock (``fencing=True``) writes protocol-2 rows, an unfenced one
    protocol-1 rows (as pydynox does). Every user of a key must agree: open the
    lock with the ``fencing`` value the message names.
    """


class SharedCallFailed(LockError):
    """The single-flight holder this caller waited for raised; its error, by name.

    ``error_type`` is the holder's exception class name (``"TimeoutError"``) and
    ``error_message`` its ``str()``: the exception itself ran in another process.
    Retry the call, or decorate with ``on_failure="run"`` so that the next
    waiter runs the function itself instead (docs/single-flight.md).
    """

    def __init__(
        self,
        message: str,
        *,
        error_type: str,
        error_message: str,
        table: str | None = None,
        key: str | None = None,
    ) -> None:
        super().__init__(message, table=table, key=key)
        self.error_type = error_type
        self.error_message = error_message


class SharedResultTooLarge(LockError, ValueError):
    """A single-flight result is too large to store in the lock table (400 KB items).

    Raised to the caller that ran the function, at store time: ``result`` is what the function
    returned, so it is not lost. Return a reference (an S3 key) instead of the data, or pass a
    ``serializer`` that compresses it. The waiters get `SharedCallFailed` naming this error.
    """

    def __init__(self, message: str, *, result: object, size: int, table: str, key: str) -> None:
        super().__init__(message, table=table, key=key)
        self.result = result
        self.size = size


class FencingUnavailable(DynaleaseError):
    """A guard was asked for ``fencing_token`` that has none.

    Either the lock was created without ``fencing=True``, or the guard has not acquired the lock
    (yet). Create the lock with ``fencing=True`` and read the token inside its ``with`` block.
    """


class ForkedProcessError(DynaleaseError, RuntimeError):
    """A client or guard created before ``fork()`` was used in the child process."""


class GuardReused(DynaleaseError, RuntimeError):
    """A guard was entered a second time; guards are single use and not reentrant.

    Also a ``RuntimeError``, as it was before it had its own class. Create a new
    guard for each acquisition:

        for job in jobs:
            with SyncDistributedLock(client, table="locks", key=job):  # a new guard each time
                run(job)
    """


class LockHeldAtSnapshot(DynaleaseError, RuntimeError):
    """A lock was held (or being acquired) when SnapStart was about to take its snapshot.

    Every environment restored from the snapshot would hold it at once: take locks in
    the handler, not at import time (docs/lambda.md, "SnapStart").
    """


class DynamoDBError(DynaleaseError):
    """DynamoDB rejected a request; ``code`` is DynamoDB's error code."""

    def __init__(
        self, message: str, *, code: str = "", operation: str = "", request_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.operation = operation
        self.request_id = request_id


class TableNotFoundError(DynamoDBError):
    """The table does not exist (or is not visible in this account and Region).

    Raised by a lock, it names the ``table`` it asked for and where the request went:
    ``region`` and ``endpoint`` (the endpoint given or configured; None: AWS's for the
    Region). All three are None on an item helper's error.
    """

    table: str | None = None
    region: str | None = None
    endpoint: str | None = None


class AccessDeniedError(DynamoDBError):
    """The credentials are missing, invalid or not allowed to make this request."""


#: What a throttling reason (by how its name ends) means and what to do, a hot key first.
_THROTTLING_LIMITS = (
    (
        "KeyRangeThroughputExceeded",
        "one key (a hot lock key: many contenders, or polling, on the same key) exceeded "
        "its partition's throughput; use fewer contenders per key, a longer wait between "
        "attempts, or spread the work over more keys. Capacity does not help",
    ),
    (
        "ProvisionedThroughputExceeded",
        "the table's provisioned capacity was exceeded; raise it, enable auto scaling "
        "or switch the lock table to on-demand",
    ),
    (
        "AccountLimitExceeded",
        "the account's per-table throughput quota in this Region was reached; ask for a "
        "quota increase",
    ),
    (
        "MaxOnDemandThroughputExceeded",
        "the table's configured on-demand maximum throughput was reached; raise it",
    ),
)


class ThrottledError(DynamoDBError):
    """DynamoDB throttled the request; it was not applied.

    ``reasons`` is DynamoDB's ``ThrottlingReasons`` when it sent them: dicts with
    a ``reason`` (such as ``TableWriteKeyRangeThroughputExceeded``: one key is
    hot) and the ``resource`` (the table's or index's ARN). ``advice`` says what
    they mean and what to do (it ends the message too).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "",
        operation: str = "",
        request_id: str | None = None,
        reasons: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(message, code=code, operation=operation, request_id=request_id)
        self.reasons: list[dict[str, str]] = list(reasons or [])

    @property
    def advice(self) -> str:
        """What `reasons` mean and what to do, a hot key first."""
        return self.advice_for(self.reasons)

    @staticmethod
    def advice_for(reasons: Sequence[Mapping[str, str]]) -> str:
        """The advice for DynamoDB's ``ThrottlingReasons`` ``reasons`` (see `advice`)."""
        said = [
            advice
            for limit, advice in _THROTTLING_LIMITS
            if any(reason["reason"].endswith(limit) for reason in reasons)
        ]
        if not said:
            return "Retry later or raise the table's capacity"
        return "DynamoDB says " + "; and ".join(said)


class ValidationError(DynamoDBError):
    """DynamoDB rejected the request as invalid (for example a key schema mismatch)."""


class RequestFailedError(DynamoDBError):
    """The request failed in transit or on the server.

    ``may_have_committed`` is true when the request may have been applied anyway
    (a timeout, a reset connection or a 5xx answer); false when it never reached
    DynamoDB (for example the endpoint was unreachable).
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "",
        operation: str = "",
        may_have_committed: bool = True,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, code=code, operation=operation, request_id=request_id)
        self.may_have_committed = may_have_committed


class TransactionCanceledError(DynamoDBError):
    """DynamoDB cancelled a transaction; ``reasons`` holds one entry per item, in order.

    Nothing in the transaction was written. Also importable as
    ``TransactionCanceledException``, pydynox's name for it.
    """

    def __init__(
        self,
        message: str,
        *,
        reasons: Sequence[Mapping[str, Any]] = (),
        code: str = "TransactionCanceledException",
        operation: str = "TransactWriteItems",
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, code=code, operation=operation, request_id=request_id)
        self.reasons: list[dict[str, Any]] = [dict(reason) for reason in reasons]


#: pydynox's name for `TransactionCanceledError`: the same class.
TransactionCanceledException = TransactionCanceledError


class LockOwnershipLost(TransactionCanceledError):
    """A transaction was rejected because the lock it checked in is no longer ours.

    Nothing in the transaction was written and the guard is marked lost (its ``lost`` is true,
    ``raise_if_lost()`` raises `LockLost`). Raised by the commit, so ``except
    TransactionCanceledError`` (pydynox's ``TransactionCanceledException``) catches it; it names
    the lock's ``table``, ``key`` and ``owner``.
    """

    def __init__(
        self,
        message: str,
        *,
        reasons: Sequence[Mapping[str, Any]] = (),
        table: str | None = None,
        key: str | None = None,
        owner: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(shown_in_message(message, key), reasons=reasons, request_id=request_id)
        self.table = table
        self.key = key
        self.owner = owner
