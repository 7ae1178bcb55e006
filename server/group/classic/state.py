"""The classic group state machine as data: the GroupState enum, the ONE table of valid
transitions (Kafka's GroupMetadata `validPreviousStates`), the one function that moves a state
along it, and, beside it, what every member-facing request gets in every state.

The request table is documentation checked by tests (tests/unit/test_group_state.py); the
coordinator's code paths follow it (kafka.coordinator.group.GroupCoordinator, Kafka 3.x).
"""
from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:  # the wire name (DescribeGroups, ListGroups)
        return self.value


E, PR, CR, S, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

# target state -> states it may be entered from.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    # a member joins an Empty group, or a member joins/leaves/fails/changes metadata.
    PR: frozenset({S, CR, E}),
    # the join phase completed with at least one member.
    CR: frozenset({PR}),
    # the leader's assignment was persisted.
    S: frozenset({CR}),
    # the join phase completed with no members left.
    E: frozenset({PR}),
    # deleted, expired or unloaded; final.
    D: frozenset({S, PR, CR, E, D}),
}


class IllegalStateTransition(RuntimeError):
    pass


def check_transition(group_id: str, current: GroupState, target: GroupState) -> GroupState:
    """Return `target` if the table allows current -> target, else raise."""
    if current not in VALID_PREVIOUS_STATES[target]:
        allowed = ",".join(s.value for s in VALID_PREVIOUS_STATES[target])
        raise IllegalStateTransition(
            f"Group {group_id} should be in the {allowed} states before moving to {target.value} "
            f"state. Instead it is in {current.value} state"
        )
    return target


def can_rebalance(state: GroupState) -> bool:
    return state in VALID_PREVIOUS_STATES[PR]


# What each member-facing request gets in each state, once the group id, the loading status,
# the member id / group.instance.id (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and the generation
# (ILLEGAL_GENERATION) have been validated. "park" = the response waits (a Deferred).
REQUEST_OUTCOMES: dict[str, dict[GroupState, str]] = {
    "JoinGroup(unknown member)": {
        E: "add member (or MEMBER_ID_REQUIRED for v4+ dynamic members) -> PreparingRebalance "
           "with the initial delay; park",
        PR: "add member (or MEMBER_ID_REQUIRED); park until all known members rejoined",
        CR: "add member (or MEMBER_ID_REQUIRED) -> PreparingRebalance; park",
        S: "add member (or MEMBER_ID_REQUIRED) -> PreparingRebalance; park. A known static "
           "member's new id replaces the old one: no rebalance if the selected protocol stays",
        D: "COORDINATOR_NOT_AVAILABLE",
    },
    "JoinGroup(known member)": {
        E: "UNKNOWN_MEMBER_ID",
        PR: "update metadata; park",
        CR: "same metadata: current generation answered at once; changed: -> PreparingRebalance",
        S: "leader or changed metadata: -> PreparingRebalance, park; "
           "unchanged follower: current generation answered at once",
        D: "COORDINATOR_NOT_AVAILABLE",
    },
    "SyncGroup": {
        E: "UNKNOWN_MEMBER_ID",
        PR: "REBALANCE_IN_PROGRESS",
        CR: "park; the leader's assignment is written, replayed -> Stable, all parked answered",
        S: "the member's current assignment",
        D: "COORDINATOR_NOT_AVAILABLE",
    },
    "Heartbeat": {
        E: "UNKNOWN_MEMBER_ID",
        PR: "REBALANCE_IN_PROGRESS (session timer reset)",
        CR: "NONE (session timer reset)",
        S: "NONE (session timer reset)",
        D: "COORDINATOR_NOT_AVAILABLE",
    },
    "LeaveGroup": {
        E: "UNKNOWN_MEMBER_ID per member",
        PR: "remove member; the pending join may complete",
        CR: "remove member -> PreparingRebalance",
        S: "remove member -> PreparingRebalance",
        D: "COORDINATOR_NOT_AVAILABLE",
    },
    "OffsetCommit": {
        E: "generation -1 and no member: stored; otherwise UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION",
        PR: "stored for a member of the current generation (counts as a heartbeat)",
        CR: "REBALANCE_IN_PROGRESS",
        S: "stored for a member of the current generation (counts as a heartbeat)",
        D: "COORDINATOR_NOT_AVAILABLE",
    },
}
