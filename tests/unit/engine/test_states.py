"""The lease state table itself: its shape, its refusals, and that the lease keeps to it."""

from __future__ import annotations

import ast
import itertools
import pathlib

import pytest
from support.lease_harness import Harness, run

import dynalease._engine
from dynalease._engine.lease import Lease
from dynalease._engine.states import TRANSITIONS, Event, IllegalTransition, State
from dynalease.exceptions import LockLost

#: The states a guard's life ends in. Two rows leave them, on purpose: a LOST guard
#: is still released (its row may still be there), and a RELEASED one may still
#: learn that it had been lost.
FINISHED = frozenset({State.RELEASED, State.LOST, State.NOT_ACQUIRED, State.CANCELLED})

#: The only rows leaving a finished state, each on purpose (see ``FINISHED``).
INTENDED_EXITS = {
    (State.LOST, Event.RELEASE): State.RELEASING,
    (State.RELEASED, Event.LOSE): State.RELEASED,
}


def reachable_from(start: State) -> set[State]:
    seen, frontier = {start}, [start]
    while frontier:
        state = frontier.pop()
        for (source, _event), target in TRANSITIONS.items():
            if source is state and target not in seen:
                seen.add(target)
                frontier.append(target)
    return seen


def test_every_state_is_reachable_from_new() -> None:
    assert reachable_from(State.NEW) == set(State)


def test_every_state_can_still_end_in_a_finished_one() -> None:
    for state in State:
        assert reachable_from(state) & FINISHED, state


def test_finished_states_are_left_only_by_the_intended_rows() -> None:
    exits = {pair: target for pair, target in TRANSITIONS.items() if pair[0] in FINISHED}
    assert exits == INTENDED_EXITS


def test_every_event_moves_some_state() -> None:
    assert {event for _state, event in TRANSITIONS} == set(Event)


def test_a_lease_moves_exactly_as_the_table_says() -> None:
    lease = Harness().lease()  # never run: only its state is looked at
    for (state, event), target in TRANSITIONS.items():
        lease.state = state
        lease.move(event)
        assert lease.state is target


def test_a_pair_missing_from_the_table_raises_an_internal_error() -> None:
    missing = [pair for pair in itertools.product(State, Event) if pair not in TRANSITIONS]
    assert missing  # the table is not total: most events make no sense in most states
    lease = Harness().lease()  # never run: only its state is looked at
    for state, event in missing:
        lease.state = state
        with pytest.raises(IllegalTransition, match="internal error") as raised:
            lease.move(event)
        assert (raised.value.state, raised.value.event) == (state, event)


def test_an_illegal_move_leaves_the_lease_where_it_was() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease()
        with pytest.raises(IllegalTransition):
            lease.move(Event.WON)  # not acquiring: nothing was confirmed
        assert lease.state is State.NEW
        await lease.acquire()
        with pytest.raises(IllegalTransition):
            lease.move(Event.START)
        assert lease.state is State.HELD
        await lease.release()

    run(scenario)


def test_an_uncontended_life_takes_the_table_from_new_to_released() -> None:
    async def scenario(h: Harness) -> list[State]:
        lease = h.lease()
        seen = [lease.state]
        await lease.acquire()
        seen.append(lease.state)
        await lease.release()
        seen.append(lease.state)
        return seen

    assert run(scenario) == [State.NEW, State.HELD, State.RELEASED]


def test_a_loss_is_recorded_once_and_is_what_release_reports() -> None:
    async def scenario(h: Harness) -> None:
        lease = h.lease()
        await lease.acquire()
        assert lease.loss is None and not lease.counters().lost
        lease.lose("first reason")
        lease.lose("second reason")
        assert lease.state is State.LOST and lease.loss == "first reason"
        assert lease.counters().lost
        with pytest.raises(LockLost, match="first reason"):
            lease.raise_if_lost()
        with pytest.raises(LockLost, match="first reason"):
            await lease.release()
        assert lease.state is State.LOST

    run(scenario)


def _assignments(attribute: str) -> list[str]:
    """``module.function`` of every ``self.<attribute> = ...`` in the lease's classes."""
    parts = {cls.__name__ for cls in Lease.__mro__}
    found = []
    for path in sorted(pathlib.Path(dynalease._engine.__path__[0]).glob("*.py")):
        for cls in ast.parse(path.read_text()).body:
            if not isinstance(cls, ast.ClassDef) or cls.name not in parts:
                continue
            for function in ast.walk(cls):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    targets: list[ast.expr] = []
                    if isinstance(node, ast.Assign):
                        targets = node.targets
                    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                        targets = [node.target]
                    found.extend(
                        f"{path.stem}.{function.name}"
                        for target in targets
                        for part in ast.walk(target)
                        if isinstance(part, ast.Attribute)
                        and part.attr == attribute
                        and isinstance(part.value, ast.Name)
                        and part.value.id == "self"
                    )
    return found


def test_the_lease_changes_state_only_through_the_table() -> None:
    assert sorted(_assignments("state")) == ["base.__init__", "base.move"]


def test_a_loss_is_written_in_one_place() -> None:
    assert sorted(_assignments("loss")) == ["base.__init__", "base.lose"]


def test_the_table_text_names_each_state_and_event_pair_once() -> None:
    from dynalease._engine.states import TABLE, _parse

    doubled = TABLE + "HELD          LOSE         LOST          again\n"
    with pytest.raises(ValueError, match="two rows for HELD on LOSE"):
        _parse(doubled)
