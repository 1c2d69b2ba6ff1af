"""Transports: how lock requests reach DynamoDB (botocore, or the lean HTTP path)."""
