"""The lock grant against the requests the engine really sends, kind by kind.

Real parts: every lock kind (a lock, a fenced lock, a multi-key lock, a semaphore)
runs against the moto server through a proxy that records what each request needs
from IAM (a transaction's items each by their own action); the recovery extension
releases rows a dead writer left; the policy is the one ``configure_function``
synthesizes. moto enforces no IAM, so an action missing from the grant shows here,
not as an AccessDenied on AWS: a contended ``keys=[...]`` lock's ``BatchGetItem`` did.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_lambda as lambda_
from support.counting_proxy import CountingProxy
from support.tables import fresh_lock_table

from dynalease import DynamoDBClient, SyncDistributedLock, SyncDistributedSemaphore, SyncTransaction
from dynalease._engine import journal
from dynalease._extension import recovery
from dynalease.cdk import LockTable
from dynalease.cdk.layer import synth_runtime

#: Long enough for any loaded machine: the tests wait for events (a renewal, a
#: contender's first look), never assert how soon they come.
EVENT_TIMEOUT_S = 60.0

Guard = SyncDistributedLock  # a semaphore guard is one too


def granted_actions() -> set[str]:
    """The actions ``configure_function`` grants a function, from the synthesized policy."""
    stack = cdk.Stack(cdk.App(), "Grants")
    function = lambda_.Function(
        stack,
        "Handler",
        runtime=synth_runtime(),
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
    )
    LockTable(stack, "Locks").configure_function(function)
    template = assertions.Template.from_stack(stack).to_json()
    (policy,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    (table_id,) = [
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::DynamoDB::Table"
    ]
    assert statement["Resource"] == {"Fn::GetAtt": [table_id, "Arn"]}  # this table only
    actions = statement["Action"]
    return set([actions] if isinstance(actions, str) else actions)


@pytest.fixture(scope="module")
def proxy(endpoint: str) -> Iterator[CountingProxy]:
    with CountingProxy(endpoint) as counting:
        yield counting


@pytest.fixture
def aws(endpoint: str, monkeypatch: pytest.MonkeyPatch, proxy: CountingProxy) -> None:
    """The recovery extension's environment: its requests go through the proxy too."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", proxy.url)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def _until(done: Callable[[], bool], what: str) -> None:
    end = time.monotonic() + EVENT_TIMEOUT_S
    while not done():
        assert time.monotonic() < end, f"no {what} within {EVENT_TIMEOUT_S} s"
        time.sleep(0.02)


def _cycle(make: Callable[..., Guard], client: DynamoDBClient) -> None:
    """Uncontended: acquire, check in, renew once, release."""
    # A renewal is due at a third of the lease: 2 s, and the lease holds for 5.4 s.
    with make(lease_duration=6) as guard:
        transaction = SyncTransaction(client)
        guard.check_in(transaction)
        transaction.commit()
        _until(lambda: guard.metrics.renewals >= 1, "renewal")


def _contended(make: Callable[..., Guard]) -> None:
    """A contender looks at a live holder's rows, then takes them once they are released."""
    holder = make(lease_duration=30)
    contender = make(wait_timeout=EVENT_TIMEOUT_S)
    with ThreadPoolExecutor(1) as pool:
        with holder:
            entered = pool.submit(contender.__enter__)
            _until(lambda: contender.metrics.read_requests >= 1, "look at the holder's rows")
        entered.result(EVENT_TIMEOUT_S)  # the contender's own error, if it had one
    contender.__exit__(None, None, None)


def _recovered(direct: DynamoDBClient, table: str, directory: Path) -> None:
    """The extension releases the rows a dead writer left: a lock's, a fenced lock's and a
    multi-key lock's (written here as that writer left them)."""
    records = journal.Journal(str(directory))
    for keys, fencing in (
        ([f"r-{uuid.uuid4()}"], False),
        ([f"r-{uuid.uuid4()}"], True),
        ([f"r-{uuid.uuid4()}", f"r-{uuid.uuid4()}"], False),
    ):
        owner = str(uuid.uuid4())
        for key in keys:
            row = {"key": key, "owner": owner, "version": "v1", "lease_ms": 30_000}
            direct.sync_put_item(
                table, row | ({"protocol": 2, "fence": 1} if fencing else {"protocol": 1})
            )
        records.record(table, keys[0], owner, fencing=fencing, keys=tuple(keys))
    outcome = recovery.recover(str(directory), time.time() + recovery.MAX_WINDOW_S, tables={table})
    assert len(outcome.released) == 3, outcome


def test_configure_function_grants_exactly_what_every_lock_kind_sends(
    proxy: CountingProxy, aws: None, endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    direct = DynamoDBClient(region="us-east-1", endpoint_url=endpoint)
    table = fresh_lock_table(direct, "grants")
    client = DynamoDBClient(region="us-east-1", endpoint_url=proxy.url)
    kinds: dict[str, Callable[..., Guard]] = {
        "a lock": lambda **options: SyncDistributedLock(client, table=table, key="job", **options),
        "a fenced lock": lambda **options: SyncDistributedLock(
            client, table=table, key="fenced-job", fencing=True, **options
        ),
        "a multi-key lock": lambda **options: SyncDistributedLock(
            client, table=table, keys=["account:1", "account:2", "account:3"], **options
        ),
        "a semaphore": lambda **options: SyncDistributedSemaphore(
            client, table=table, key="pool", permits=1, **options
        ),
    }
    sent: dict[str, set[tuple[str, str]]] = {}
    for kind, make in kinds.items():
        proxy.reset()
        _cycle(make, client)
        _contended(make)
        sent[kind] = set(proxy.actions)
    proxy.reset()
    monkeypatch.setattr(journal, "writer_alive", lambda pid, started: False)  # it died
    _recovered(direct, table, tmp_path)
    sent["the recovery extension"] = set(proxy.actions)

    granted = granted_actions()
    for kind, needs in sent.items():
        assert {name for _, name in needs} == {table}, kind  # the lock table only
        missing = sorted({action for action, _ in needs} - granted)
        assert not missing, f"{kind} sends {missing}, which configure_function does not grant"
    every = {action for needs in sent.values() for action, _ in needs}
    assert every == granted  # and nothing that no request needs
