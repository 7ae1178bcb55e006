"""Old import path of the classic state machine (now server/group/classic/state.py)."""
from server.group.classic.state import (  # noqa: F401
    REQUEST_OUTCOMES,
    VALID_PREVIOUS_STATES,
    GroupState,
    IllegalStateTransition,
    can_rebalance,
    check_transition,
)
