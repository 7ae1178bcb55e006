"""What a ConsumerGroupHeartbeat answers: the response (the fast path's response object), and a
settled member's keep-alive as a plain value (KeepAlive), which the route's encoder turns into
its cached body (protocol/fastpath.py encode_consumer_group_heartbeat_answer)."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from kcoord.protocol.coordinator_records import Assignment
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.fastpath import ConsumerGroupHeartbeatResponseData


class KeepAlive(NamedTuple):
    """The answer to a keep-alive: no error, no assignment, nothing written."""

    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int


# A member's KeepAlive is the same until its epoch changes: made once (as is its body).
keep_alive = lru_cache(maxsize=4096)(KeepAlive)


def heartbeat_response(version: int, code: ErrorCode, message: str | None = None, member_id: str | None = None,
                       epoch: int = 0, interval: int = 0, assignment: Assignment | None = None) -> Any:
    return ConsumerGroupHeartbeatResponseData(
        version, int(code), message, member_id, epoch, interval,
        None if assignment is None else [(t, sorted(ps)) for t, ps in assignment.items()])
