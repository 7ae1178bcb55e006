"""Share sessions (KIP-932, ShareFetch's session semantics; Kafka's ShareSessionCache): one per
(group, member), holding the partitions the member fetches and the epoch its next request must
carry.

- ShareFetch epoch 0 opens a session (replacing the member's old one; its partitions are the
  request's topics) and must carry no acknowledgements (INVALID_REQUEST); the next request
  carries epoch 1. A new session beyond group.share.max.share.sessions is refused with
  SHARE_SESSION_LIMIT_REACHED.
- Epoch > 0 continues it: no session: SHARE_SESSION_NOT_FOUND; another epoch:
  INVALID_SHARE_SESSION_EPOCH; else the request's topics are added, its forgotten topics
  removed, and the epoch moves on (wrapping to 1 after Integer.MAX_VALUE).
- Epoch -1 (final) closes it after its acknowledgements; it may not ask to fetch anything
  (INVALID_REQUEST); no session: SHARE_SESSION_NOT_FOUND.
- ShareAcknowledge: epoch 0 is INVALID_SHARE_SESSION_EPOCH; > 0 checks and moves the epoch;
  -1 closes the session.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kcoord.protocol.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SHARE_SESSIONS_DEFAULT = 2000  # group.share.max.share.sessions
TopicPartition = tuple[uuid.UUID, int]


class SessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


@dataclass
class ShareSession:
    group: str
    member: str
    epoch: int  # the epoch the next request must carry
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set


class ShareSessionCache:
    def __init__(self, max_sessions: int = MAX_SHARE_SESSIONS_DEFAULT) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group: str, member: str) -> ShareSession | None:
        return self.sessions.get((group, member))

    def open(self, group: str, member: str, partitions: Iterable[TopicPartition]) -> ShareSession:
        key = (group, member)
        if key not in self.sessions and len(self.sessions) >= self.max_sessions:
            raise SessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                               f"the broker holds the maximum of {self.max_sessions} share sessions")
        s = ShareSession(group, member, next_epoch(INITIAL_EPOCH), dict.fromkeys(partitions))
        self.sessions[key] = s
        return s

    def check(self, group: str, member: str, epoch: int) -> ShareSession:
        s = self.sessions.get((group, member))
        if s is None:
            raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for member {member}")
        if epoch != FINAL_EPOCH and epoch != s.epoch:
            raise SessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                               f"share session epoch {epoch}, expected {s.epoch}")
        return s

    def advance(self, s: ShareSession, add: Iterable[TopicPartition] = (),
                forget: Iterable[TopicPartition] = ()) -> None:
        for tp in forget:
            s.partitions.pop(tp, None)
        for tp in add:
            s.partitions[tp] = None
        s.epoch = next_epoch(s.epoch)

    def close(self, group: str, member: str) -> ShareSession | None:
        return self.sessions.pop((group, member), None)

    def __len__(self) -> int:
        return len(self.sessions)
