"""pydynox code runs on dynalease with only its imports changed.

The lock reference's examples, and a script written the way a pydynox 1.8 user
writes transactions around a lock (positional Region, ``client_request_token``,
pydynox's keyword names, an explicit ``commit()`` called twice, a transaction
used after its commit), run in a fresh interpreter against the moto server the
tests start. The script runs first on pydynox itself, so it is known to be
pydynox code, and both runs must print the same lines.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import uuid

import pytest

#: The reference's two complete examples, as pydynox users have them.
REFERENCE_EXAMPLES = {
    "async workers": '''
        """Async workers coordinate customer work through one lock table."""

        import asyncio

        from pydynox import DynamoDBClient
        from pydynox.lock import distributed_lock

        client = DynamoDBClient()

        # Deployment setup. Normally provision the table outside the application.
        if not client.sync_table_exists("worker_locks"):
            client.sync_create_table("worker_locks", partition_key=("key", "S"), wait=True)


        @distributed_lock(client, table="worker_locks", key="customer:{customer_id}", wait_timeout=2)
        async def synchronize_customer(customer_id: str) -> str:
            await asyncio.sleep(0.01)  # Replace with the customer's import or repair work.
            return f"Updated {customer_id}"


        async def main():
            # Same customer waits; different customers can proceed independently.
            results = await asyncio.gather(
                synchronize_customer("123"),
                synchronize_customer(customer_id="123"),
                synchronize_customer("456"),
            )
            assert results == ["Updated 123", "Updated 123", "Updated 456"]


        asyncio.run(main())
    ''',  # noqa: E501  (the reference's lines, verbatim)
    "sync transaction": '''
        """A sync section with a transaction ownership check."""

        from pydynox import DynamoDBClient
        from pydynox.lock import SyncDistributedLock
        from pydynox.transaction import SyncTransaction

        client = DynamoDBClient()
        for table, partition_key in (("script_locks", "key"), ("import_results", "job_id")):
            if not client.sync_table_exists(table):
                client.sync_create_table(table, partition_key=(partition_key, "S"), wait=True)

        with SyncDistributedLock(client, table="script_locks", key="import:daily") as lease:
            summary = "Imported 100 rows"
            with SyncTransaction(client) as transaction:
                lease.check_in(transaction)
                transaction.put("import_results", {"job_id": "daily", "summary": summary})

        assert lease.metrics.write_requests == 2
        assert client.sync_get_item("import_results", {"job_id": "daily"})["summary"] == summary
    ''',
    # The reference's "Lock a block" snippet; prepare_summary is the reader's own work.
    "lock a block": """
        import asyncio

        from pydynox import DynamoDBClient
        from pydynox.lock import DistributedLock
        from pydynox.transaction import Transaction

        client = DynamoDBClient()
        for table, partition_key in (("locks", "key"), ("summaries", "customer_id")):
            if not client.sync_table_exists(table):
                client.sync_create_table(table, partition_key=(partition_key, "S"), wait=True)


        async def prepare_summary():
            return "3 orders"


        async def main():
            async with DistributedLock(client, table="locks", key="customer-sync:123") as lease:
                result = await prepare_summary()
                lease.raise_if_lost()
                async with Transaction(client) as transaction:
                    lease.check_in(transaction)
                    transaction.put("summaries", {"customer_id": "123", "summary": result})
            print(lease.metrics.write_requests)


        asyncio.run(main())
    """,
}

#: What a pydynox user writes around a lock; it prints what it saw.
PYDYNOX_SCRIPT = """
    import asyncio
    import os

    from pydynox import DynamoDBClient
    from pydynox.exceptions import TransactionCanceledException
    from pydynox.lock import DistributedLock, SyncDistributedLock
    from pydynox.transaction import SyncTransaction, Transaction

    client = DynamoDBClient("us-east-1", endpoint_url=os.environ["ENDPOINT"])
    suffix = os.environ["SUFFIX"]
    locks, accounts = f"locks-{suffix}", f"accounts-{suffix}"
    for table, partition_key in ((locks, "key"), (accounts, "pk")):
        if not client.sync_table_exists(table):
            client.sync_create_table(table, partition_key=(partition_key, "S"), wait=True)


    def balances():
        items = [client.sync_get_item(accounts, {"pk": pk}, consistent_read=True) for pk in "abcd"]
        return [(pk, (item or {}).get("balance")) for pk, item in zip("abcd", items)]


    with SyncDistributedLock(client, table=locks, key="account:a") as lease:
        with SyncTransaction(client, client_request_token="open-accounts-0001") as txn:
            lease.check_in(txn)
            txn.put(accounts, {"pk": "a", "balance": 100})
            txn.put(accounts, {"pk": "b", "balance": 0}, "attribute_not_exists(pk)")
        print("opened", balances())

        transfer = SyncTransaction(client)
        lease.check_in(transfer)
        names, amount = {"#b": "balance"}, {":amt": 30}
        transfer.update(accounts, {"pk": "a"}, "SET #b = #b - :amt", "#b >= :amt", names, amount)
        transfer.update(
            accounts,
            {"pk": "b"},
            update_expression="SET #b = #b + :amt",
            expression_attribute_names={"#b": "balance"},
            expression_attribute_values={":amt": 30},
        )
        transfer.commit()
        transfer.commit()  # nothing new: sends nothing, applies nothing twice
        print("transferred", balances())

        transfer.put(accounts, {"pk": "c", "balance": 5})  # used after its commit
        transfer.commit()
        print("after reuse", balances())

    try:
        with SyncTransaction(client) as txn:
            txn.condition_check(
                accounts,
                {"pk": "a"},
                condition_expression="#b >= :amt",
                expression_attribute_names={"#b": "balance"},
                expression_attribute_values={":amt": 1000},
            )
            txn.delete(accounts, {"pk": "c"})
    except TransactionCanceledException:
        print("cancelled", balances())


    async def main():
        async with DistributedLock(client, table=locks, key="account:d") as lease:
            async with Transaction(client, client_request_token="async-open-0001") as txn:
                lease.check_in(txn)
                txn.put(accounts, {"pk": "d", "balance": 1})
            closing = Transaction(client)
            closing.delete(accounts, {"pk": "c"}, "attribute_exists(pk)")
            await closing.commit()
            await closing.commit()
        print("async", balances(), lease.metrics.write_requests)


    asyncio.run(main())
"""


def as_dynalease(source: str) -> str:
    """``source`` with its pydynox imports pointed at dynalease, and nothing else changed."""
    return re.sub(r"^(\s*)(from|import) pydynox\b", r"\1\2 dynalease", source, flags=re.MULTILINE)


def run_script(source: str, endpoint: str, suffix: str) -> str:
    environment = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_DYNAMODB": endpoint,
        "ENDPOINT": endpoint,
        "SUFFIX": suffix,
    }
    environment.pop("AWS_PROFILE", None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_imports_are_the_only_change() -> None:
    changed = as_dynalease(PYDYNOX_SCRIPT)
    assert "pydynox" not in changed
    assert changed.replace("dynalease", "pydynox") == PYDYNOX_SCRIPT


@pytest.mark.parametrize("name", sorted(REFERENCE_EXAMPLES))
def test_the_reference_examples_run_with_only_the_imports_changed(name: str, endpoint: str) -> None:
    source = as_dynalease(REFERENCE_EXAMPLES[name])
    # Twice: the examples create their tables only when missing.
    for _ in range(2):
        run_script(source, endpoint, uuid.uuid4().hex[:8])


def test_a_pydynox_script_prints_the_same_on_both_libraries(endpoint: str) -> None:
    on_pydynox = run_script(PYDYNOX_SCRIPT, endpoint, uuid.uuid4().hex[:8])
    on_dynalease = run_script(as_dynalease(PYDYNOX_SCRIPT), endpoint, uuid.uuid4().hex[:8])
    assert on_dynalease == on_pydynox
    assert "transferred [('a', 70), ('b', 30), ('c', None), ('d', None)]" in on_dynalease
    assert "cancelled [('a', 70), ('b', 30), ('c', 5), ('d', None)]" in on_dynalease
