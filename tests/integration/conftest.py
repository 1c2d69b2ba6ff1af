"""Integration fixtures beyond the moto server of tests/conftest.py."""

from support.postgres import postgres  # noqa: F401  (a session fixture: PostgreSQL for fencing)
