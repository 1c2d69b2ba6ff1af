"""The holder map on every row a guard writes: who, where, since when, the user's metadata.

On the manual clock and the in-memory table: the map rides on the acquisition's own
write, renewals keep it (and carry it only after ``set_metadata``), so a cycle costs the
same requests with or without it.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from support.lease_harness import TABLE, Harness, run

from dynalease._engine import holder as h_module
from dynalease._engine.holder import MAX_METADATA_BYTES, check_metadata
from dynalease._engine.invocation_id import INVOCATION
from dynalease._engine.lease import Lease
from dynalease._engine.spec import LeaseSpec
from dynalease._engine.store import LockStore
from dynalease._engine.targets import KeysTarget
from dynalease._values import from_attribute


def holder_of(item: dict[str, Any] | None) -> dict[str, Any]:
    assert item is not None
    return dict(from_attribute(item["holder"]))


async def cycle(h: Harness, *, metadata: dict[str, Any] | None, update: bool) -> list[str]:
    """Acquire, hold over three renewals (updating the metadata if asked), release."""
    start = len(h.transport.sent)
    lease = h.lease(lease=9, metadata=metadata)
    await lease.acquire()
    if update:
        lease.spec.holder.set_metadata({"step": 2})
    await h.clock.advance(10.0)  # renewals at 3, 6 and 9
    assert lease.counters().renewals == 3
    await lease.release()
    return h.transport.operations()[start:]


def test_the_acquire_writes_host_pid_and_when_and_renewals_keep_it() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=9, metadata={"job": "nightly", "n": 3})
        await lease.acquire()
        first = holder_of(h.row())
        assert first["host"] == os.uname().nodename and first["pid"] == os.getpid()
        assert first["acquired_at"].endswith("Z") and first["metadata"] == {
            "job": "nightly",
            "n": 3,
        }
        await h.clock.advance(4.0)
        assert lease.counters().renewals == 1
        assert holder_of(h.row()) == first  # kept, not resent
        renewal = h.transport.sent[-1].params
        assert renewal["UpdateExpression"] == "SET #v = :new" and ":h" not in str(renewal)

    run(scenario)


def test_set_metadata_rides_on_the_next_renewal_at_no_extra_request_per_cycle() -> None:
    async def scenario(h: Harness) -> None:
        plain = await cycle(h, metadata=None, update=False)
        updated = await cycle(h, metadata={"step": 1}, update=True)
        # requests per cycle: the same, with metadata set and updated while held
        assert (
            plain == updated == ["PutItem", "UpdateItem", "UpdateItem", "UpdateItem", "DeleteItem"]
        )
        carried = [
            r.params["ExpressionAttributeValues"].get(":h")
            for r in h.transport.sent[len(plain) :]
            if r.operation == "UpdateItem"
        ]
        assert carried[0] is not None and carried[1:] == [None, None]  # sent once, then kept

    run(scenario)


def test_the_updated_metadata_is_on_the_row_and_the_rest_of_the_holder_is_kept() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(lease=9, metadata={"step": 1})
        await lease.acquire()
        before = holder_of(h.row())
        lease.spec.holder.set_metadata({"step": 2, "of": 5})
        await h.clock.advance(4.0)
        after = holder_of(h.row())
        assert after == {**before, "metadata": {"step": 2, "of": 5}}

    run(scenario)


def test_fenced_rows_carry_the_holder_and_a_release_leaves_none_behind() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease(fencing=True, metadata={"a": True})
        await lease.acquire()
        assert holder_of(h.row())["metadata"] == {"a": True}
        await lease.release()
        assert "holder" not in (h.row() or {})

    run(scenario)


def test_permit_and_multi_key_rows_carry_the_holder() -> None:
    async def scenario(h: Harness) -> None:
        permit = h.permit_lease(key="sem")
        await permit.acquire()
        assert holder_of(h.row(permit.key))["pid"] == os.getpid()
        keys = Lease(
            store=LockStore(h.transport),
            clock=h.clock,
            observations=h.observations,
            target=KeysTarget(("a", "b")),
            spec=LeaseSpec(TABLE, 9.0, 10.0, holder=h_module.Holder({"m": 1})),
        )
        await keys.acquire()
        assert [holder_of(h.row(k))["metadata"] for k in ("a", "b")] == [{"m": 1}, {"m": 1}]
        keys.spec.holder.set_metadata({"m": 2})
        await h.clock.advance(4.0)  # the renewal transaction carries it to both rows
        assert [holder_of(h.row(k))["metadata"] for k in ("a", "b")] == [{"m": 2}, {"m": 2}]

    run(scenario)


def test_in_lambda_the_holder_names_the_function_version_and_invocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-sync")
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_VERSION", "7")
    token = INVOCATION.set("c6af9ac6-7b61-11e6-9a41-93e812345678")
    try:
        made = h_module.Holder()
    finally:
        INVOCATION.reset(token)
    assert from_attribute(made.for_write())["lambda"] == {
        "function": "orders-sync",
        "version": "7",
        "request_id": "c6af9ac6-7b61-11e6-9a41-93e812345678",
    }


def test_a_run_command_is_named_by_its_program_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(h_module, "_PROCESS", {})
    h_module.set_command("reindex.sh")
    assert from_attribute(h_module.Holder().for_write())["command"] == "reindex.sh"


@pytest.mark.parametrize(
    ("metadata", "error", "words"),
    [
        ({"x": "y" * MAX_METADATA_BYTES}, ValueError, "over the limit of 512"),
        ({"when": object()}, TypeError, "only JSON values"),
        ({"nan": float("nan")}, TypeError, "only JSON values"),
        (["a"], TypeError, "must be a dict"),
    ],
)
def test_bad_metadata_is_refused_with_what_to_do(
    metadata: object, error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words):
        check_metadata(metadata)


def test_metadata_values_keep_their_json_types() -> None:
    checked = check_metadata(
        {"s": "x", "i": 3, "f": 0.5, "b": False, "n": None, "l": [1, {"k": "v"}]}
    )
    assert checked is not None
    assert from_attribute({"M": checked}) == {
        "s": "x",
        "i": 3,
        "f": 0.5,
        "b": False,
        "n": None,
        "l": [1, {"k": "v"}],
    }


def test_on_ecs_the_holder_says_ecs_and_sends_no_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    monkeypatch.setenv("ECS_CONTAINER_METADATA_URI_V4", "http://169.254.170.2/v4/unreachable")
    assert from_attribute(h_module.Holder().for_write())["platform"] == "ecs"


def test_on_ecs_the_task_arn_is_read_once_in_the_background_and_named_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import http.server
    import json
    import threading
    import time

    reads: list[str] = []

    class Metadata(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            reads.append(self.path)
            body = json.dumps({"TaskARN": "arn:aws:ecs:us-east-1:1:task/c/abc"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Metadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
        monkeypatch.setenv(
            "ECS_CONTAINER_METADATA_URI_V4", f"http://127.0.0.1:{server.server_port}/v4"
        )
        monkeypatch.setattr(h_module, "_PROCESS", {})
        first = from_attribute(h_module.Holder().for_write())
        assert first["platform"] == "ecs"  # never waits for the read
        deadline = time.monotonic() + 30  # generous: a thread on a loaded 2-core machine
        while "ecs_task" not in h_module._PROCESS:
            assert time.monotonic() < deadline, "the task metadata was not read"
            time.sleep(0.01)
        later = from_attribute(h_module.Holder().for_write())
        assert later["ecs_task"] == "arn:aws:ecs:us-east-1:1:task/c/abc"
        from_attribute(h_module.Holder().for_write())
        assert reads == ["/v4/task"]  # once per process
    finally:
        server.shutdown()
