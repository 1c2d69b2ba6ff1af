"""Leader election on a moto server: campaign, resign, leader(), publish, observe, lead().

The history under crashes (5 candidate processes, 20 kills) is
test_election_processes.py; here one process plays every candidate, each with a
client of its own (one client per candidate, as separate machines would have).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pydynox
import pytest
from pydynox.lock import SyncDistributedLock as PydynoxLock
from support.counting_proxy import CountingProxy
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease.election import Election, Leader, SyncElection, SyncLeadership
from dynalease.exceptions import FencingMismatch, LockLost, LockNotAcquired
from dynalease.lock import SyncDistributedLock

REGION = "us-east-1"
#: Leases of several seconds: renewals (every lease/3) keep time on a loaded machine.
LEASE_S = 3.0
#: Room for two shared cores on top of the protocol's own timing.
SLACK_S = 3.0


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "election")


def another(endpoint: str) -> DynamoDBClient:
    """A second candidate's client (its own observation cache, as another machine's)."""
    return DynamoDBClient(
        region=REGION, endpoint_url=endpoint, access_key="testing", secret_key="testing"
    )


def election(client: DynamoDBClient, table: str, **options: float) -> SyncElection:
    return SyncElection(client, table=table, name="scheduler", lease_duration=LEASE_S, **options)


def test_a_campaign_wins_term_1_and_leader_shows_who_since_when_and_the_value(
    client: DynamoDBClient, table: str
) -> None:
    candidates = election(client, table)
    assert candidates.leader() is None
    before = time.time()
    with candidates.campaign(value="10.0.0.7:8080", wait_timeout=0) as leadership:
        leader = candidates.leader()
        assert leader == Leader(
            leadership.owner, 1, leader.since if leader else None, "10.0.0.7:8080", LEASE_S
        )
        assert leader is not None and leader.since is not None
        assert before - 1 <= leader.since <= time.time() + 1
        leadership.publish("10.0.0.8:8080")
        assert candidates.leader() == Leader(
            leadership.owner, 1, leader.since, "10.0.0.8:8080", LEASE_S
        )
    assert candidates.leader() is None  # resigned: the row is free
    with candidates.campaign(wait_timeout=0) as second:
        assert second.term == 2
        shown = candidates.leader()
        assert shown is not None and shown.value is None  # term 1's value is not shown


def test_while_one_leads_a_campaign_with_wait_timeout_0_returns_at_once(
    client: DynamoDBClient, endpoint: str, table: str
) -> None:
    with election(client, table).campaign():
        started = time.monotonic()
        with pytest.raises(LockNotAcquired):
            election(another(endpoint), table).campaign(wait_timeout=0)
        assert time.monotonic() - started < LEASE_S  # one attempt, no wait


def test_a_deposed_leader_cannot_publish(client: DynamoDBClient, table: str) -> None:
    leadership = election(client, table).campaign()
    leadership.resign()
    with pytest.raises(LockLost, match="no longer leads"):
        leadership.publish("late")
    leadership.resign()  # idempotent


def test_a_leader_whose_work_raises_resigns_and_a_standby_leads_within_one_poll(
    client: DynamoDBClient, endpoint: str, table: str
) -> None:
    first = election(client, table)
    standby = election(another(endpoint), table)
    crashed_at: list[float] = []
    leading = threading.Event()

    def crash(leadership: SyncLeadership) -> None:
        leading.set()
        time.sleep(LEASE_S)  # the standby is polling by now
        crashed_at.append(time.monotonic())
        raise RuntimeError("the leader's own work crashed")

    def lead_then_crash() -> None:
        with pytest.raises(RuntimeError, match="crashed"):
            first.lead(crash)

    thread = threading.Thread(target=lead_then_crash)
    thread.start()
    assert leading.wait(30)
    with standby.campaign(wait_timeout=30) as leadership:
        took = time.monotonic() - crashed_at[0]
        assert leadership.term == 2
    thread.join(30)
    poll = standby.poll_interval
    print(f"\nstandby led {took:.3f} s after the leader's work raised (poll {poll:g} s)")
    assert took <= poll + SLACK_S  # a resign frees the row: no wait for the lease


def test_the_async_form_cancels_the_leaders_task_when_leadership_is_lost(
    client: DynamoDBClient, table: str
) -> None:
    cancelled = threading.Event()

    async def work(leadership: object) -> None:
        # Someone else's row replaces ours: the next renewal is refused.
        client.sync_put_item(
            table,
            {"key": "scheduler", "owner": "x", "version": "y", "lease_ms": 9000, "protocol": 2}
            | {"fence": 99},
        )
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    losses: list[LockLost] = []

    async def main() -> None:
        elect = Election(
            client, table=table, name="scheduler", lease_duration=LEASE_S, on_lost=losses.append
        )
        with pytest.raises(LockLost):
            await elect.lead(work)

    asyncio.run(asyncio.wait_for(main(), 30))
    assert cancelled.is_set()
    assert len(losses) == 1  # on_lost was told, once


def test_in_the_async_form_a_crash_of_the_leaders_task_resigns_at_once(
    client: DynamoDBClient, table: str
) -> None:
    async def work(leadership: object) -> None:
        raise RuntimeError("the leader's task crashed")

    async def main() -> None:
        elect = Election(client, table=table, name="scheduler", lease_duration=LEASE_S)
        with pytest.raises(RuntimeError, match="crashed"):
            await elect.lead(work)
        assert await elect.leader() is None  # the row is free: a standby leads at its next poll

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_term_costs_one_write_more_than_a_fenced_lock_cycle(endpoint: str, table: str) -> None:
    with CountingProxy(endpoint) as proxy:
        counted = another(proxy.url)
        with SyncDistributedLock(counted, table=table, key="job", fencing=True):
            pass
        lock_cycle = dict(proxy.counts)
        proxy.counts.clear()
        with election(counted, table).campaign(value="10.0.0.7"):
            pass
        assert lock_cycle == {"UpdateItem": 2}  # the fenced acquire and release
        assert dict(proxy.counts) == {"UpdateItem": 3}  # and the term's value


def test_observers_see_each_leader_in_order_and_no_leader_between(
    client: DynamoDBClient, endpoint: str, table: str
) -> None:
    seen: list[Leader | None] = []

    async def observe(done: asyncio.Event) -> None:
        elect = Election(another(endpoint), table=table, name="scheduler", lease_duration=LEASE_S)
        async for leader in elect.observe():
            seen.append(leader)
            if leader is not None and leader.term == 3:
                done.set()
                return

    async def main() -> None:
        done = asyncio.Event()
        watcher = asyncio.ensure_future(observe(done))
        candidates = Election(client, table=table, name="scheduler", lease_duration=LEASE_S)
        for term in (1, 2, 3):
            await asyncio.sleep(1.0)  # several polls: the observer sees each state
            leadership = await candidates.campaign(value=f"v{term}")
            await asyncio.sleep(1.0)
            if term < 3:
                await leadership.resign()
        await asyncio.wait_for(done.wait(), 30)
        await watcher
        await leadership.resign()

    asyncio.run(asyncio.wait_for(main(), 60))
    terms = [None if leader is None else (leader.term, leader.value) for leader in seen]
    # A win shows without its value until the new leader has written it (docs/election.md):
    # a poll between the two writes sees the term with no value, then the value.
    published = [
        state
        for state, after in zip(terms, [*terms[1:], None], strict=True)
        if not (
            state is not None and state[1] is None and after is not None and after[0] == state[0]
        )
    ]
    assert published == [None, (1, "v1"), None, (2, "v2"), None, (3, "v3")]


def test_the_sync_observer_calls_back_with_the_last_state(
    client: DynamoDBClient, table: str
) -> None:
    seen: list[Leader | None] = []
    stop = threading.Event()
    watcher = election(client, table, poll_interval=0.1)
    thread = threading.Thread(target=watcher.observe, args=(seen.append,), kwargs={"stop": stop})
    thread.start()
    with election(client, table).campaign(value="a") as leadership:
        leadership.publish("b")
        deadline = time.monotonic() + 30
        while (not seen or seen[-1] is None or seen[-1].value != "b") and (
            time.monotonic() < deadline
        ):
            time.sleep(0.05)
    stop.set()
    thread.join(30)
    last = seen[-1] if seen else None
    assert last is not None and last.value == "b"  # the last state, whatever it skipped


def test_pydynox_holding_the_key_blocks_every_candidate_and_the_reverse(
    client: DynamoDBClient, endpoint: str, table: str
) -> None:
    pdx = pydynox.DynamoDBClient(
        region=REGION, endpoint_url=endpoint, access_key="testing", secret_key="testing"
    )
    with PydynoxLock(pdx, table=table, key="scheduler", lease_duration=LEASE_S):
        with pytest.raises(FencingMismatch):  # never taken over, however long it waits
            election(client, table).campaign(wait_timeout=0)
    with election(client, table).campaign():
        with pytest.raises(ValueError, match="Invalid or unsupported distributed lock record"):
            with PydynoxLock(pdx, table=table, key="scheduler", wait_timeout=0):
                pass
        with pytest.raises(LockNotAcquired):  # a dynalease fenced lock waits, as a candidate
            with SyncDistributedLock(
                client, table=table, key="scheduler", wait_timeout=0, fencing=True
            ):
                pass


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"name": ""}, ValueError, "name is empty"),
        ({"poll_interval": 0.01}, ValueError, "poll_interval must be from 0.05 s"),
        ({"poll_interval": "1"}, TypeError, "poll_interval must be seconds"),
        ({"lease_duration": 0}, ValueError, "lease_duration must be at least"),
    ],
)
def test_bad_settings_are_refused_before_any_request(
    options: dict[str, object], error: type[Exception], words: str
) -> None:
    client = DynamoDBClient(region=REGION, endpoint_url="http://127.0.0.1:9")
    settings: dict[str, object] = {"table": "locks", "name": "scheduler", **options}
    with pytest.raises(error, match=words):
        SyncElection(client, **settings)  # type: ignore[arg-type]


def test_a_bad_value_is_refused_before_any_request() -> None:
    client = DynamoDBClient(region=REGION, endpoint_url="http://127.0.0.1:9")
    candidates = SyncElection(client, table="locks", name="scheduler")
    with pytest.raises(TypeError, match="value must be a str"):
        candidates.campaign(value=7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="over the limit of 512"):
        candidates.campaign(value="x" * 513)
