"""The Lambda handlers ``lambda_cold`` imports in a fresh process: the same work, each library."""
