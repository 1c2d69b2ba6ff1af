"""A kind that is not built in, added the way docs/architecture.md ("Adding a kind") says:
a target, its rules, a face. The toy: one holder per odd/even bucket of job numbers."""

from __future__ import annotations

import asyncio

import pytest
from support.lease_harness import TABLE, Harness, run

from dynalease._engine.attempts import LOCK_RETRIES, Rules
from dynalease._engine.lease import Lease, LeaseSpec
from dynalease._engine.pacing import contention_pause
from dynalease._engine.store import LockStore
from dynalease.exceptions import LockNotAcquired

BUCKET_RULES = Rules(LOCK_RETRIES, contention_pause, look_after_takeover=True)


class BucketTarget:
    """The target: job ``n`` aims at the row of its bucket, ``bucket-0`` or ``bucket-1``."""

    advice = "Retry later"
    rules = BUCKET_RULES

    def __init__(self, job: int) -> None:
        self.name = self.first_key = f"bucket-{job % 2}"
        self.wake_keys: tuple[str, ...] = (self.first_key,)

    def rows(self, key: str) -> tuple[str, ...]:
        return (key,)

    def held(self, owners: tuple[str, ...]) -> str:
        return "another job of its bucket runs"

    def subject(self, table: str) -> str:
        return f"bucket {self.name!r} was not acquired"


def bucket_lease(h: Harness, job: int, *, wait: float = 0.0) -> Lease:
    """The face: a lease aimed at the job's bucket."""
    spec = LeaseSpec(TABLE, 30.0, wait)
    store = LockStore(h.transport)
    return Lease(
        store=store, clock=h.clock, observations=h.observations, spec=spec, target=BucketTarget(job)
    )


def test_one_job_per_bucket_runs_and_the_other_bucket_is_free() -> None:
    async def scenario(h: Harness) -> None:
        three = bucket_lease(h, 3)
        await three.acquire()
        assert h.owner_of("bucket-1") == three.owner
        with pytest.raises(LockNotAcquired, match="another job of its bucket runs"):
            await bucket_lease(h, 5).acquire()
        four = bucket_lease(h, 4)
        await four.acquire()  # the even bucket is its own row
        assert h.owner_of("bucket-0") == four.owner
        await three.release()
        await four.release()
        assert (h.row("bucket-0"), h.row("bucket-1")) == (None, None)

    run(scenario)


def test_a_waiting_job_gets_the_bucket_when_its_holder_releases() -> None:
    async def scenario(h: Harness) -> None:
        three = bucket_lease(h, 3)
        await three.acquire()
        five = bucket_lease(h, 5, wait=20.0)
        waiting = asyncio.ensure_future(five.acquire())
        await h.clock.advance(2.0)
        assert not waiting.done()
        await three.release()
        await h.clock.run(waiting)
        assert h.owner_of("bucket-1") == five.owner
        await five.release()

    run(scenario)
