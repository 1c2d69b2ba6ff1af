"""The runtime: its loop started on first need, and Runtime.run_async, an awaitable
bridge from any event loop to the runtime's loop."""

from __future__ import annotations

import asyncio
import gc
import math
import threading
import time

import pytest

from dynalease._engine.runtime import Runtime, get_runtime


def _needed() -> float:
    return -math.inf  # now


def test_the_loop_starts_by_the_earliest_time_asked_and_runs_every_waiting_callback() -> None:
    runtime = Runtime()  # a runtime of its own: the process's may have started already
    ran: list[tuple[str, str]] = []
    done = threading.Event()

    def note(name: str) -> None:
        ran.append((name, threading.current_thread().name))
        if len(ran) == 2:
            done.set()

    start = time.monotonic()
    runtime.call_by(start + 30.0, lambda: note("late"), _needed)
    runtime.call_by(start + 0.2, lambda: note("soon"), _needed)
    assert not runtime.started
    assert done.wait(10)
    assert time.monotonic() - start >= 0.2
    assert runtime.started
    assert ran == [("late", runtime.thread.name), ("soon", runtime.thread.name)]


def test_the_loop_does_not_start_for_callbacks_nothing_needs_any_more() -> None:
    # A lease released before its first wake-up: at that time the loop is not started
    # (no asyncio import behind the caller's back); a later need still starts it.
    runtime = Runtime()
    asked = threading.Event()
    ran = threading.Event()

    def ended() -> float:
        asked.set()
        return math.inf  # never: what it was for has ended

    runtime.call_by(time.monotonic() + 0.1, ran.set, ended)
    assert asked.wait(10)
    time.sleep(0.2)
    assert not runtime.started and not ran.is_set()
    runtime.call_by(time.monotonic() + 0.1, ran.set, _needed)
    assert ran.wait(10)
    assert runtime.started


def test_the_loop_starts_when_a_callback_says_it_is_needed_later() -> None:
    runtime = Runtime()
    asked: list[float] = []
    ran = threading.Event()
    start = time.monotonic()

    def later() -> float:
        asked.append(time.monotonic())
        return start + 0.3  # asked at 0.1 s: needed at 0.3 s, not now

    runtime.call_by(start + 0.1, ran.set, later)
    assert ran.wait(10)
    assert len(asked) == 2 and asked[0] - start >= 0.1 and asked[1] - start >= 0.3


def _ask_at_once(runtime: Runtime) -> tuple[list[object], int]:
    """Eight threads at once: half want the loop itself, half a callback of their own
    by a time. Returns the loops they got and how many callbacks ran."""
    loops: list[object] = []
    ran = threading.Semaphore(0)

    def want_loop() -> None:
        loops.append(runtime.loop)

    def want_callback() -> None:
        runtime.call_by(time.monotonic() + 0.01, lambda: ran.release(), _needed)

    threads = [threading.Thread(target=want_loop if n % 2 else want_callback) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads)
    return loops, sum(ran.acquire(timeout=10) for _ in range(4))


def test_many_threads_asking_for_the_loop_at_once_all_get_it() -> None:
    for _ in range(10):  # each leaves a runtime thread behind: enough to catch a lost wake-up
        runtime = Runtime()
        loops, callbacks = _ask_at_once(runtime)
        assert callbacks == 4
        assert len(loops) == 4 and all(loop is runtime.loop for loop in loops)


def test_asking_for_the_loop_starts_it_at_once() -> None:
    runtime = Runtime()
    assert not runtime.started
    loop = runtime.loop
    assert runtime.started
    ran = threading.Event()
    runtime.call_by(time.monotonic() + 30.0, ran.set, _needed)  # running: scheduled, not kept
    assert ran.wait(10)
    assert runtime.submit(asyncio.sleep(0, "answer")).result(10) == "answer"
    assert loop.is_running()


def test_the_result_comes_back_and_the_coroutine_ran_on_the_runtime_thread() -> None:
    runtime = get_runtime()

    async def where() -> str:
        return threading.current_thread().name

    assert asyncio.run(runtime.run_async(where())) == runtime.thread.name


def test_an_exception_is_raised_in_the_caller() -> None:
    async def fail() -> None:
        raise KeyError("from the runtime")

    with pytest.raises(KeyError, match="from the runtime"):
        asyncio.run(get_runtime().run_async(fail()))


def test_cancelling_the_caller_cancels_the_runtime_coroutine() -> None:
    runtime = get_runtime()
    started, stopped = threading.Event(), threading.Event()

    async def long() -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            stopped.set()

    async def main() -> None:
        waiting = asyncio.ensure_future(runtime.run_async(long()))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(main())
    assert stopped.wait(5)


def test_a_caller_cancelled_before_the_runtime_started_the_coroutine_never_runs_it() -> None:
    runtime = get_runtime()
    ran = threading.Event()
    hold, go = threading.Event(), threading.Event()

    def busy() -> None:  # keeps the runtime loop from running anything else meanwhile
        hold.set()
        go.wait(5)

    runtime.call_soon(busy)
    assert hold.wait(5)

    async def body() -> None:
        ran.set()

    async def main() -> None:
        waiting = asyncio.ensure_future(runtime.run_async(body()))
        await asyncio.sleep(0)  # run_async has scheduled its start, which waits behind the hold
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(main())
    go.set()
    done = threading.Event()
    runtime.call_soon(done.set)  # runs after the start and the cancel
    assert done.wait(5)
    assert not ran.is_set()


def test_a_shielded_coroutine_finishes_although_the_caller_was_cancelled() -> None:
    runtime = get_runtime()
    started, finished = threading.Event(), threading.Event()

    async def release() -> None:
        started.set()
        await asyncio.sleep(0.05)
        finished.set()

    async def main() -> None:
        waiting = asyncio.ensure_future(runtime.run_async(release(), shield=True))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 5)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert not finished.is_set()  # the caller did not wait for it

    asyncio.run(main())
    assert finished.wait(5)


def test_a_runtime_coroutine_that_is_cancelled_raises_cancelled_error_in_the_caller() -> None:
    async def cancelled_itself() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(get_runtime().run_async(cancelled_itself()))


def test_an_outcome_nobody_waits_for_any_more_is_dropped_quietly() -> None:
    runtime = get_runtime()
    errors: list[dict[str, object]] = []
    go, done = threading.Event(), threading.Event()

    async def fail_later() -> None:
        await asyncio.get_running_loop().run_in_executor(None, go.wait, 5)
        done.set()
        raise KeyError("nobody is listening")

    async def main() -> None:
        waiting = asyncio.ensure_future(runtime.run_async(fail_later(), shield=True))
        await asyncio.sleep(0.01)
        waiting.cancel()

    runtime.loop.set_exception_handler(lambda loop, context: errors.append(context))
    try:
        asyncio.run(main())  # the caller's loop is closed when the outcome arrives
        go.set()
        assert done.wait(5)
        flushed = threading.Event()
        runtime.call_soon(flushed.set)
        assert flushed.wait(5)
        gc.collect()
    finally:
        runtime.loop.set_exception_handler(None)
    assert errors == []
