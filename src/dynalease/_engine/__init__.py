"""The lease engine. Private: nothing here knows about AWS SDK types, Lambda or the CDK."""
