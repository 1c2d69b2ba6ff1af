"""A lease on the test's own event loop: manual clock, in-memory table, scripted faults.

The table is the rows-only lock store of :mod:`support.memory`, which
recognizes exactly the conditions the engine's store sends. Between the
engine and the table sits :class:`FaultyTransport`, which records each request
with the manual-clock time it was sent and can delay it, drop its answer after
committing, or fail it, one scripted :class:`Fault` at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from dynalease import DynamoDBClient
from dynalease._engine.holder import Holder
from dynalease._engine.journal import Journal
from dynalease._engine.lease import Lease, LeaseSpec
from dynalease._engine.observations import Observations
from dynalease._engine.permits import PermitTarget
from dynalease._engine.store import LockStore, Request, TimedOut
from dynalease.exceptions import LockLost, RequestFailedError
from dynalease.keys import permit_keys
from support.manual_clock import ManualClock
from support.memory import MemoryDynamoDB, ScriptedTransport
from support.memory import MemoryTransport as _MemoryTransport

TABLE = "locks"
FOREVER = 1e9


@dataclass
class Fault:
    """What happens to the next request of ``operation``.

    ``before``: clock seconds until the request reaches the table; ``commit``:
    whether the table applies it; ``after``: clock seconds until the answer
    comes back; ``error``: raised instead of the answer (after ``after``).
    """

    operation: str
    before: float = 0.0
    commit: bool = True
    after: float = 0.0
    error: BaseException | None = None
    #: From a caller's thread only: clock seconds the exchange took, its answer whole (a
    #: transport that overran its timeout).
    took: float = 0.0


def lost_answer(operation: str) -> Fault:
    """The request is applied but the connection drops before the answer."""
    return Fault(operation, error=RequestFailedError("connection reset", operation=operation))


def hang(operation: str, *, commit: bool = True) -> Fault:
    """The answer never comes back (the request may or may not be applied)."""
    return Fault(operation, commit=commit, after=FOREVER)


@dataclass(frozen=True)
class Sent:
    """One request as the table saw it, with the manual-clock time it was sent."""

    operation: str
    params: dict[str, Any]
    at: float


async def bounded_on(
    clock: ManualClock,
    request: Awaitable[dict[str, Any]],
    timeout: float | None,
    on_late: Callable[[Any], object] | None,
) -> dict[str, Any]:
    """Await ``request`` for at most ``timeout`` seconds of ``clock``, as a transport
    bounds a request: an answer still to come is handed to ``on_late``."""
    if timeout is None or on_late is None:
        return await request
    exchange = asyncio.ensure_future(request)
    timer = asyncio.ensure_future(clock.sleep(timeout))
    try:
        await asyncio.wait((exchange, timer), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        on_late(exchange)
        raise
    finally:
        timer.cancel()
    if not exchange.done():
        on_late(exchange)
        raise TimedOut
    return exchange.result()


class FaultyTransport(ScriptedTransport):
    """Records requests and plays scripted faults in front of the in-memory table."""

    def __init__(
        self, clock: ManualClock, db: MemoryDynamoDB, *, lock_requests: bool = True
    ) -> None:
        self.clock = clock
        self.inner = _MemoryTransport(db, lock_requests=lock_requests)
        self.sent: list[Sent] = []
        self.faults: list[Fault] = []
        #: Faults applied to every request of an operation, after the scripted ones.
        self.always: dict[str, Fault] = {}

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(Sent(operation, params, self.clock.monotonic()))
        return self.inner.call(operation, params)

    async def handle_async(self, request: Request) -> dict[str, Any]:
        """:meth:`send`, bounded by the request's ``timeout`` in seconds of the manual clock,
        as the lean transport bounds it: an answer still to come is handed to ``on_late``."""
        answer = self.send(request.operation, request.params)
        return await bounded_on(self.clock, answer, request.timeout, request.on_late)

    def operations(self) -> list[str]:
        return [request.operation for request in self.sent]

    def times(self, operation: str) -> list[float]:
        return [request.at for request in self.sent if request.operation == operation]

    def _fault(self, operation: str) -> Fault | None:
        for index, fault in enumerate(self.faults):
            if fault.operation == operation:
                return self.faults.pop(index)
        return self.always.get(operation)

    async def send(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        self.sent.append(Sent(operation, params, self.clock.monotonic()))
        fault = self._fault(operation) or Fault(operation)
        if fault.before:
            await self.clock.sleep(fault.before)
        answer: dict[str, Any] | None = None
        failure: BaseException | None = None
        if fault.commit:
            try:
                answer = self.inner.call(operation, params)
            except Exception as error:
                failure = error
        if fault.after:
            await self.clock.sleep(fault.after)
        if fault.error is not None:
            raise fault.error
        if failure is not None:
            raise failure
        return answer or {}


class LateAnswer:
    """A blocking request whose caller stopped waiting; awaited, ``finish_late`` plays its end."""

    def __init__(
        self, transport: BlockingFaultyTransport, operation: str, params: Any, fault: Fault
    ):
        self.transport = transport
        self.operation = operation
        self.params = params
        self.fault = fault

    def __await__(self) -> Any:
        return self.transport.finish_late(self).__await__()


class BlockingFaultyTransport(FaultyTransport):
    """:class:`FaultyTransport` that also sends from a sync caller's thread.

    ``handle`` with a ``timeout`` plays the same scripted faults without waiting: a fault
    with ``before`` or ``after`` means the answer was not back within the
    caller's timeout, so the request is handed to ``on_late`` and
    awaiting it (``finish_late``) later plays it out on the manual clock (applying the write
    only then, when ``before`` is set). ``interrupt`` raises KeyboardInterrupt
    from the next blocking request after it was applied.
    """

    def __init__(self, clock: ManualClock, db: MemoryDynamoDB) -> None:
        super().__init__(clock, db)
        self.interrupt = False

    @property
    def blocking(self) -> bool:
        return True

    def handle(self, request: Request) -> dict[str, Any]:
        operation, params, timeout, on_late = request
        if timeout is None or on_late is None:
            return self.call(operation, params)
        self.sent.append(Sent(operation, params, self.clock.monotonic()))
        fault = self._fault(operation) or Fault(operation)
        if fault.before or fault.after:
            if not fault.before and fault.commit:
                self._apply(operation, params)  # applied, answer slow
            on_late(LateAnswer(self, operation, params, fault))
            raise RequestFailedError("read timed out", operation=operation, may_have_committed=True)
        answer = self._apply(operation, params) if fault.commit else {}
        self.clock.spend(fault.took)
        if self.interrupt:
            self.interrupt = False
            on_late(LateAnswer(self, operation, params, Fault(operation, commit=False)))
            raise KeyboardInterrupt
        if fault.error is not None:
            raise fault.error
        return answer

    def _apply(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.inner.call(operation, params) or {}

    async def finish_late(self, late: LateAnswer) -> dict[str, Any]:
        fault = late.fault
        if fault.before:
            await self.clock.sleep(fault.before)
            answer = self._apply(late.operation, late.params) if fault.commit else {}
        else:
            answer = {}
        if fault.after:
            await self.clock.sleep(fault.after)
        if fault.error is not None:
            raise fault.error
        return answer


class Harness:
    """One manual clock, one in-memory lock table, one client's observation cache."""

    def __init__(self, *, start: float = 1_000.0, blocking: bool = False) -> None:
        self.clock = ManualClock(start=start)
        self.db = MemoryDynamoDB()
        self.db.call(
            "CreateTable",
            {
                "TableName": TABLE,
                "KeySchema": [{"AttributeName": "key", "KeyType": "HASH"}],
                "AttributeDefinitions": [{"AttributeName": "key", "AttributeType": "S"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        )
        self.transport: FaultyTransport = (
            BlockingFaultyTransport(self.clock, self.db)
            if blocking
            else FaultyTransport(self.clock, self.db)
        )
        self.observations = Observations()

    def lease(
        self,
        *,
        key: str = "k",
        lease: float = 30.0,
        wait: float = 35.0,
        observations: Observations | None = None,
        on_lost: Callable[[LockLost], object] | None = None,
        fencing: bool = False,
        journal: Journal | None = None,
        metadata: object = None,
    ) -> Lease:
        spec = LeaseSpec(
            TABLE,
            lease,
            wait,
            fencing=fencing,
            journal=journal,
            on_lost=on_lost,
            holder=Holder(metadata),
        )
        return Lease(
            store=LockStore(self.transport),
            clock=self.clock,
            observations=self.observations if observations is None else observations,
            key=key,
            spec=spec,
        )

    def permit_lease(
        self,
        *,
        key: str = "k",
        permits: int = 3,
        lease: float = 30.0,
        wait: float = 35.0,
        journal: Journal | None = None,
    ) -> Lease:
        """A semaphore guard's lease on ``permits`` permits of ``key``."""
        return Lease(
            target=PermitTarget(key, permit_keys(key, permits)),
            store=LockStore(self.transport),
            clock=self.clock,
            observations=self.observations,
            spec=LeaseSpec(TABLE, lease, wait, journal=journal),
        )

    def row(self, key: str = "k") -> dict[str, Any] | None:
        """The stored lock row (AttributeValue form), read without being recorded."""
        item: dict[str, Any] | None = self.db.call(
            "GetItem", {"TableName": TABLE, "Key": {"key": {"S": key}}, "ConsistentRead": True}
        ).get("Item")
        return item

    def write_row(self, item: dict[str, Any]) -> None:
        """Store a row as another client (or a person) would, unconditionally."""
        self.db.call("PutItem", {"TableName": TABLE, "Item": item})

    def write_lock(
        self, owner: str, version: str, lease_ms: int, *, key: str = "k", protocol: int = 1
    ) -> None:
        """Store a well-formed row held by someone else."""
        self.write_row(
            {
                "key": {"S": key},
                "owner": {"S": owner},
                "version": {"S": version},
                "lease_ms": {"N": str(lease_ms)},
                "protocol": {"N": str(protocol)},
            }
        )

    def delete_row(self, key: str = "k") -> None:
        self.db.call("DeleteItem", {"TableName": TABLE, "Key": {"key": {"S": key}}})

    def owner_of(self, key: str = "k") -> str | None:
        row = self.row(key)
        return None if row is None else str(row["owner"]["S"])


def run(scenario: Callable[[Harness], Any], *, blocking: bool = False) -> Any:
    """Run ``scenario(harness)`` (a coroutine function) on a fresh event loop."""

    async def main() -> Any:
        return await scenario(Harness(blocking=blocking))

    return asyncio.run(main())


def recording_client() -> tuple[DynamoDBClient, FaultyTransport]:
    """A real DynamoDBClient over an in-memory table whose lock requests are recorded.

    Its leases run on the process runtime with the system clock; the transport's
    manual clock only stamps the records. The client's own requests (item helpers,
    transactions) are recorded by ``items_of(client)``.
    """
    harness = Harness()
    client = DynamoDBClient.__new__(DynamoDBClient)
    client._setup(
        FaultyTransport(harness.clock, harness.db, lock_requests=False),
        harness.transport,
        region="memory",
        endpoint_url=None,
    )
    return client, harness.transport


def items_of(client: DynamoDBClient) -> FaultyTransport:
    """The recorder of a :func:`recording_client`'s own (non-lock) requests."""
    items = client._items
    assert isinstance(items, FaultyTransport)
    return items
