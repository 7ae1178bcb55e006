"""The transition table and the per-request outcome table beside it."""
from __future__ import annotations

import pytest

from kcoord.server.group.classic.state import (
    REQUEST_OUTCOMES,
    VALID_PREVIOUS_STATES,
    GroupState,
    IllegalStateTransition,
    can_rebalance,
    check_transition,
)

S = GroupState


def test_table_matches_kafka() -> None:
    assert VALID_PREVIOUS_STATES == {
        S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
        S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
        S.STABLE: {S.COMPLETING_REBALANCE},
        S.EMPTY: {S.PREPARING_REBALANCE},
        S.DEAD: set(S),
    }


@pytest.mark.parametrize("current", list(S))
@pytest.mark.parametrize("target", list(S))
def test_check_transition(current: GroupState, target: GroupState) -> None:
    if current in VALID_PREVIOUS_STATES[target]:
        assert check_transition("g", current, target) is target
    else:
        with pytest.raises(IllegalStateTransition):
            check_transition("g", current, target)


def test_can_rebalance() -> None:
    assert {s for s in S if can_rebalance(s)} == {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}


def test_every_request_has_an_outcome_in_every_state() -> None:
    for request, outcomes in REQUEST_OUTCOMES.items():
        assert set(outcomes) == set(S), request


def test_wire_names() -> None:
    assert [str(s) for s in S] == ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"]


def test_group_transitions_go_through_the_table() -> None:
    from kcoord.server.group.classic.group import ClassicGroup as GroupMetadata
    g = GroupMetadata("g", 0)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(S.STABLE, 1)
    g.transition_to(S.PREPARING_REBALANCE, 5)
    assert g.state is S.PREPARING_REBALANCE and g.current_state_timestamp == 5
