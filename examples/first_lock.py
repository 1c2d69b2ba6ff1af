from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock

client = DynamoDBClient()  # the standard AWS configuration chain: Region, credentials, endpoint
if not client.sync_table_exists("locks"):  # a lock table is usually made at deploy time
    client.sync_create_table("locks", partition_key=("key", "S"), wait=True)

with SyncDistributedLock(client, table="locks", key="report:daily") as lease:
    # Whoever holds report:daily runs; the lease is renewed in the background meanwhile.
    print("holding", lease.key, "as", lease.owner)
