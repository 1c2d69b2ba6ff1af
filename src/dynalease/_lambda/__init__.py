"""What the Lambda middleware needs: the lock plan, the time budget, event fields and reporting."""
