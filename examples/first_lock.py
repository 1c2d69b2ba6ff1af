from dynalease import DynamoDBClient
from dynalease.lock import SyncDistributedLock

client = DynamoDBClient()  # Region, credentials, endpoint: as boto3 finds them
if not client.sync_table_exists("locks"):  # usually made at deploy time
    client.sync_create_table("locks", partition_key=("key", "S"), wait=True)

with SyncDistributedLock(client, table="locks", key="report:daily") as lease:
    # One holder of report:daily at a time, renewed in the background.
    print("holding", lease.key, "as", lease.owner)
