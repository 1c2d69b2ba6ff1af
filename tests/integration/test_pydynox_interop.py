"""dynalease and pydynox 1.8 compete for the same lock rows on one moto table.

Each library holds against the other through its renewals, takes over the
other's row after a killed holder's lease was observed, writes rows the other
reads as its own protocol-1 rows, and resolves key templates to the same keys.
Fenced rows (protocol 2) are the exception on purpose: pydynox refuses them, live,
abandoned or free, and never takes one over or deletes it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import pydynox
import pytest
from pydynox.exceptions import LockNotAcquired as PydynoxNotAcquired
from pydynox.lock import SyncDistributedLock as PydynoxLock
from pydynox.lock import distributed_lock as pydynox_lock
from support.servers import Emulator
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient
from dynalease._engine import protocol as p
from dynalease.exceptions import LockNotAcquired
from dynalease.keys import KeyTemplate
from dynalease.lock import SyncDistributedLock, distributed_lock

REGION = "us-east-1"
#: Short leases, so a hold spans several renewals (every lease/3) in a few seconds,
#: yet each request still has lease/3 = 0.4 s on a busy machine.
LEASE_S = 1.2


@pytest.fixture
def table(client: DynamoDBClient) -> str:
    return fresh_lock_table(client, "interop")


@pytest.fixture
def pdx(endpoint: str) -> pydynox.DynamoDBClient:
    return pydynox.DynamoDBClient(
        region=REGION, endpoint_url=endpoint, access_key="testing", secret_key="testing"
    )


@pytest.fixture
def moto(endpoint: str) -> Emulator:
    return Emulator("moto", endpoint, returns_row_on_condition_failure=True)


def assert_protocol_row(item: dict[str, Any] | None, key: str, lease_ms: int) -> None:
    """The exact stored shape both libraries write: five attributes, these types (and
    dynalease's ``holder`` map, which pydynox ignores)."""
    assert item is not None
    assert set(item) - {p.HOLDER_ATTR} == p.ROW_ATTRS
    assert item["key"] == {"S": key}
    assert item["lease_ms"] == {"N": str(lease_ms)}
    assert item["protocol"] == {"N": "1"}
    for name in ("owner", "version"):
        (kind, text), *_ = item[name].items()
        assert kind == "S" and uuid.UUID(text).version == 4 and str(uuid.UUID(text)) == text
    row = p.parse_row(item, table="t", key=key)
    assert row.identity == (item["owner"]["S"], item["version"]["S"], lease_ms)


def during(seconds: float, probe: Callable[[], None]) -> None:
    """Run ``probe`` over and over for ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        probe()
        time.sleep(0.05)


#: Each library's lock guard and the error it raises on contention: the same shape.
LIBRARIES: dict[str, tuple[Any, type[Exception]]] = {
    "dynalease": (SyncDistributedLock, LockNotAcquired),
    "pydynox": (PydynoxLock, PydynoxNotAcquired),
}
ONE_AGAINST_THE_OTHER = pytest.mark.parametrize(
    ("first", "second"), [("pydynox", "dynalease"), ("dynalease", "pydynox")]
)


@pytest.fixture
def clients(client: DynamoDBClient, pdx: pydynox.DynamoDBClient) -> dict[str, Any]:
    return {"dynalease": client, "pydynox": pdx}


@ONE_AGAINST_THE_OTHER
def test_a_holder_of_one_library_blocks_the_other_through_its_renewals(
    clients: dict[str, Any], moto: Emulator, table: str, first: str, second: str
) -> None:
    (holder_lock, _), (contender_lock, refused) = LIBRARIES[first], LIBRARIES[second]
    holder_client, contender_client = clients[first], clients[second]
    versions: set[str] = set()

    def contend() -> None:
        # The same contender client keeps observing: only renewals keep it out.
        with pytest.raises(refused):
            with contender_lock(contender_client, table=table, key="job", wait_timeout=0):
                pass
        item = moto.row(table, "job")
        assert_protocol_row(item, "job", 1200)
        assert (p.HOLDER_ATTR in item) == (first == "dynalease")  # type: ignore[operator]
        versions.add(item["version"]["S"])  # type: ignore[index]

    with holder_lock(holder_client, table=table, key="job", lease_duration=LEASE_S) as holder:
        during(2 * LEASE_S, contend)
        # Waiting longer than the lease: a holder that stopped renewing would lose here.
        waiting = contender_lock(
            contender_client, table=table, key="job", wait_timeout=1.5 * LEASE_S
        )
        with pytest.raises(refused):
            with waiting:
                pass
        holder.raise_if_lost()
    assert len(versions) >= 3  # contention spanned several renewals
    assert holder.metrics.renewals >= 5
    assert waiting.metrics.wait_ms >= 1.5 * LEASE_S * 1000 * 0.9
    assert moto.row(table, "job") is None
    with contender_lock(contender_client, table=table, key="job", wait_timeout=0):
        pass


# --- a holder killed with SIGKILL, taken over by the other library -----------------

HOLDER = """
import sys, time
library, endpoint, table, key, lease = sys.argv[1:6]
if library == "pydynox":
    from pydynox import DynamoDBClient
    from pydynox.lock import SyncDistributedLock
else:
    from dynalease import DynamoDBClient
    from dynalease.lock import SyncDistributedLock
client = DynamoDBClient(
    region="us-east-1", endpoint_url=endpoint, access_key="testing", secret_key="testing"
)
options = {"fencing": True} if library == "dynalease-fenced" else {}
guard = SyncDistributedLock(client, table=table, key=key, lease_duration=float(lease), **options)
guard.__enter__()  # kept referenced: pydynox releases a guard that is dropped
print("held", flush=True)
time.sleep(120)
"""


def killed_holder(library: str, endpoint: str, table: str, key: str, lease_s: float) -> None:
    """A process of ``library`` acquires ``key``, renews a few times, then is SIGKILLed."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, library, endpoint, table, key, str(lease_s)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "held", f"{library} holder did not start"
        time.sleep(lease_s)  # a few renewals
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    assert process.returncode == -signal.SIGKILL


@ONE_AGAINST_THE_OTHER
def test_a_killed_holders_row_is_taken_over_by_the_other_library_after_observation(
    endpoint: str, clients: dict[str, Any], moto: Emulator, table: str, first: str, second: str
) -> None:
    killed_holder(first, endpoint, table, "orphan", LEASE_S)
    abandoned = moto.row(table, "orphan")
    assert_protocol_row(abandoned, "orphan", 1200)
    # dynalease's holder map on its row neither blocks pydynox's takeover nor survives it
    assert (p.HOLDER_ATTR in abandoned) == (first == "dynalease")  # type: ignore[operator]
    successor_lock, _ = LIBRARIES[second]
    with successor_lock(clients[second], table=table, key="orphan", wait_timeout=5) as lease:
        item = moto.row(table, "orphan")
        assert_protocol_row(item, "orphan", 30_000)
        assert (p.HOLDER_ATTR in item) == (second == "dynalease")  # type: ignore[operator]
        assert item["owner"] != abandoned["owner"]  # type: ignore[index]
    assert lease.metrics.wait_ms >= LEASE_S * 1000  # it watched the row for the stored lease
    assert moto.row(table, "orphan") is None


def test_rows_of_both_libraries_are_identical_in_shape_and_renew_only_the_version(
    client: DynamoDBClient, pdx: pydynox.DynamoDBClient, moto: Emulator, table: str
) -> None:
    rows: dict[str, list[dict[str, Any]]] = {"dynalease": [], "pydynox": []}
    for library, lock in (
        ("dynalease", SyncDistributedLock(client, table=table, key="k", lease_duration=LEASE_S)),
        ("pydynox", PydynoxLock(pdx, table=table, key="k", lease_duration=LEASE_S)),
    ):
        with lock:
            rows[library].append(moto.row(table, "k"))  # type: ignore[arg-type]
            time.sleep(LEASE_S / 2)  # one renewal
            rows[library].append(moto.row(table, "k"))  # type: ignore[arg-type]
    for first, renewed in rows.values():
        assert_protocol_row(first, "k", 1200)
        assert renewed["version"] != first["version"]
        assert {**renewed, "version": first["version"]} == first
    ours, theirs = rows["dynalease"][0], rows["pydynox"][0]
    same = ("key", "lease_ms", "protocol")
    assert {name: ours[name] for name in same} == {name: theirs[name] for name in same}


KEY_CASES = [
    ("customer:{id}", {"id": "123"}, "customer:123"),
    ("{tenant}:{id}", {"tenant": "acme", "id": "123"}, "4:acme:3:123"),
    ("{tenant}:{id}", {"tenant": "zürich", "id": "日本"}, "7:zürich:6:日本"),
    ("{tenant}/{id}", {"tenant": "a:1", "id": "🔒"}, "3:a:1/4:🔒"),
    ("{{literal}}:{tenant}:{id}", {"tenant": "", "id": "x"}, "{literal}:0::1:x"),
]


def work(tenant: str = "", id: str = "") -> None:
    """What both libraries' decorators bind templates to."""


@pytest.mark.parametrize(("template", "values", "expected"), KEY_CASES)
def test_the_same_key_template_resolves_to_the_same_lock_in_both(
    client: DynamoDBClient,
    pdx: pydynox.DynamoDBClient,
    moto: Emulator,
    table: str,
    template: str,
    values: dict[str, str],
    expected: str,
) -> None:
    assert KeyTemplate(template).resolve(values) == expected
    ours = distributed_lock(client, table=table, key=template, wait_timeout=0)
    theirs = pydynox_lock(pdx, table=table, key=template, wait_timeout=0)
    seen: list[str] = []

    def holding(competitor: Callable[..., None], refused: type[Exception]) -> Callable[..., None]:
        def body(tenant: str = "", id: str = "") -> None:
            item = moto.row(table, expected)
            assert item is not None, f"no lock row at {expected!r}"
            seen.append(item["owner"]["S"])
            with pytest.raises(refused):
                competitor(tenant, id)

        return body

    ours(holding(theirs(work), PydynoxNotAcquired))(**values)
    theirs(holding(ours(work), LockNotAcquired))(**values)
    assert len(set(seen)) == 2
    assert moto.row(table, expected) is None


def test_a_pydynox_lock_on_a_permit_row_counts_as_a_held_permit(
    client: DynamoDBClient, pdx: pydynox.DynamoDBClient, moto: Emulator, table: str
) -> None:
    from dynalease import SyncDistributedSemaphore
    from dynalease.keys import permit_keys

    first, second = permit_keys("pool", 2)
    options = {"table": table, "key": "pool", "permits": 2, "lease_duration": LEASE_S}
    with PydynoxLock(pdx, table=table, key=first, lease_duration=LEASE_S):
        with SyncDistributedSemaphore(client, **options) as held:  # type: ignore[arg-type]
            assert held.permit_key == second  # the one permit pydynox does not hold
            assert_protocol_row(moto.row(table, second), second, 1200)
            time.sleep(LEASE_S / 2)  # pydynox renews its permit row meanwhile
            with pytest.raises(LockNotAcquired, match="none of its 2 permits"):
                with SyncDistributedSemaphore(client, wait_timeout=0.3, **options):  # type: ignore[arg-type]
                    pass
    assert moto.row(table, first) is None and moto.row(table, second) is None


# --- fenced rows: pydynox 1.8 refuses them and never takes one over or deletes it ---------

#: What pydynox 1.8 raises for a row whose protocol it does not know.
PYDYNOX_REFUSES = (ValueError, "Invalid or unsupported distributed lock record")


def test_pydynox_refuses_a_live_fenced_row_even_after_waiting_past_its_lease(
    client: DynamoDBClient, pdx: pydynox.DynamoDBClient, moto: Emulator, table: str
) -> None:
    with SyncDistributedLock(
        client, table=table, key="job", lease_duration=LEASE_S, fencing=True
    ) as holder:
        error, message = PYDYNOX_REFUSES
        with pytest.raises(error, match=message):
            with PydynoxLock(pdx, table=table, key="job", wait_timeout=2 * LEASE_S):
                pass
        item = moto.row(table, "job")
        assert item is not None and item["owner"] == {"S": holder.owner}
        assert item["fence"] == {"N": "1"}
        holder.raise_if_lost()


def test_pydynox_never_takes_over_an_abandoned_fenced_row_and_dynalease_fenced_does(
    endpoint: str, client: DynamoDBClient, pdx: pydynox.DynamoDBClient, moto: Emulator, table: str
) -> None:
    killed_holder("dynalease-fenced", endpoint, table, "orphan", LEASE_S)
    abandoned = moto.row(table, "orphan")
    assert abandoned is not None and abandoned["protocol"] == {"N": "2"}
    time.sleep(LEASE_S)  # past its lease: an unfenced row would now be taken over
    error, message = PYDYNOX_REFUSES
    with pytest.raises(error, match=message):
        with PydynoxLock(pdx, table=table, key="orphan", wait_timeout=2 * LEASE_S):
            pass
    assert moto.row(table, "orphan") == abandoned  # untouched
    with SyncDistributedLock(
        client, table=table, key="orphan", wait_timeout=5, fencing=True
    ) as lease:
        assert lease.fencing_token == int(abandoned["fence"]["N"]) + 1


def test_pydynox_refuses_a_free_fenced_row_and_leaves_its_counter(
    client: DynamoDBClient, pdx: pydynox.DynamoDBClient, moto: Emulator, table: str
) -> None:
    for _ in range(2):
        with SyncDistributedLock(client, table=table, key="job", fencing=True):
            pass
    free = {"key": {"S": "job"}, "protocol": {"N": "2"}, "fence": {"N": "2"}}
    assert moto.row(table, "job") == free
    error, message = PYDYNOX_REFUSES
    for wait in (0, LEASE_S):
        with pytest.raises(error, match=message):
            with PydynoxLock(pdx, table=table, key="job", wait_timeout=wait):
                pass
    assert moto.row(table, "job") == free
    with SyncDistributedLock(client, table=table, key="job", fencing=True) as lease:
        assert lease.fencing_token == 3
