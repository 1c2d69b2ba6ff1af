import json

from dynalease.cdk.table import INSPECT_ACTIONS, LOCK_ACTIONS

table_arn = "arn:aws:dynamodb:us-east-1:123456789012:table/locks"  # your lock table's ARN
for who, actions in (("code that takes locks", LOCK_ACTIONS), ("inspect, doctor", INSPECT_ACTIONS)):
    statement = {"Effect": "Allow", "Action": list(actions), "Resource": table_arn}
    print(f"# {who}:", json.dumps({"Version": "2012-10-17", "Statement": [statement]}, indent=2))
