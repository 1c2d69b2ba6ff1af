import json

from dynalease.cdk.table import INSPECT_ACTIONS, LOCK_ACTIONS

# Your lock table's ARN:
table_arn = "arn:aws:dynamodb:us-east-1:123456789012:table/locks"
for who, actions in (
    ("code that takes locks", LOCK_ACTIONS),
    ("dynalease inspect and doctor", INSPECT_ACTIONS),
):
    allow = {"Effect": "Allow", "Action": list(actions), "Resource": table_arn}
    policy = {"Version": "2012-10-17", "Statement": [allow]}
    print(f"# {who}:", json.dumps(policy, indent=2))
