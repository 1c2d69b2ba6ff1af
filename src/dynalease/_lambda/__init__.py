"""What the Lambda middleware needs: the lock plan, the time budget, event fields and reporting.

Also :mod:`.invoke`, the local invocation of a handler with a counting-down
context, which ``dynalease invoke``, the demo and the tests use. It ships in the
layer (the end-to-end layer test runs handlers through it), but the middleware
never imports it.
"""
