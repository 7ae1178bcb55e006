"""One classic-group member: identity, timeouts, the protocols it supports (in preference
order), its assignment, and the in-memory callbacks of its parked JoinGroup / SyncGroup.

Mirrors Kafka's MemberMetadata (kafka.coordinator.group, 3.x).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcoord.protocol.errors import ErrorCode


@dataclass(slots=True)
class JoinResult:
    """What a parked JoinGroup is answered with; turned into the versioned response later."""

    member_id: str
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata) for the leader; empty for everyone else.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]

Protocols = list[tuple[str, bytes]]


class MemberMetadata:
    __slots__ = (
        "member_id",
        "group_instance_id",
        "client_id",
        "client_host",
        "rebalance_timeout_ms",
        "session_timeout_ms",
        "protocol_type",
        "protocols",
        "assignment",
        "awaiting_join",
        "awaiting_sync",
        "is_new",
        "heartbeat_satisfied",
        "_session",
    )

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.awaiting_join: JoinCallback | None = None
        self.awaiting_sync: SyncCallback | None = None
        # a member added by JoinGroup that has not yet received a JoinGroup response
        self.is_new = False
        # set by any sign of life; the pending DelayedHeartbeat completes when it is set
        self.heartbeat_satisfied = False
        # the member's live session expiration (a DelayedHeartbeat), extended by heartbeats
        self._session: Any = None  # runtime only (not state): snapshots skip "_" slots

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            # new members can expire while awaiting join (they have no member id to heartbeat with)
            return self.heartbeat_satisfied
        if self.awaiting_join is not None or self.awaiting_sync is not None:
            # a parked request is proof of life
            return True
        return self.heartbeat_satisfied

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols, same order, same metadata bytes."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The first protocol (by this member's preference) that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {candidates}")

    def __repr__(self) -> str:
        return (
            f"MemberMetadata(member_id={self.member_id}, group_instance_id={self.group_instance_id}, "
            f"client_id={self.client_id}, client_host={self.client_host}, "
            f"session_timeout_ms={self.session_timeout_ms}, "
            f"rebalance_timeout_ms={self.rebalance_timeout_ms}, "
            f"protocols={[n for n, _ in self.protocols]})"
        )
