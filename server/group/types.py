"""What every group type offers the rest of the coordinator (Kafka's Group interface).

The group metadata manager keeps one table of groups of every type; the offset metadata
manager and the admin APIs (ListGroups, DeleteGroups, OffsetDelete, retention) only talk to a
group through this interface, so a new group type (share groups, say) is a new package beside
server/group/classic/ and server/group/consumer/, not a branch in the managers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from kcoord.protocol.coordinator_records import CoordinatorRecord
from kcoord.protocol.errors import ErrorCode


class GroupType(StrEnum):
    """Kafka's Group.GroupType: the wire names of ListGroups v5 (KIP-1043)."""

    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"


@dataclass(frozen=True, slots=True)
class OffsetExpiration:
    """When a group's committed offsets expire (Kafka's OffsetExpirationCondition): after
    offsets.retention.minutes counted from `base_timestamp` (when the group became Empty) or,
    when it is None, from each offset's own commit timestamp; offsets of `keep_topics` (topics
    the live group consumes) never expire."""

    base_timestamp: int | None = None
    keep_topics: frozenset[str] | set[str] = field(default_factory=frozenset)


@runtime_checkable
class Group(Protocol):
    """One group, whatever its protocol. Errors are returned (None = fine), never raised."""

    TYPE: GroupType
    group_id: str
    dead: bool  # deleted or unloaded (is_dead(), as a plain attribute for the replay hot path)

    def state_name(self) -> str:
        """The state as DescribeGroups / ListGroups / ConsumerGroupDescribe spell it."""
        ...

    def listed_protocol_type(self) -> str:
        """ListGroups' protocol_type column."""
        ...

    def is_empty(self) -> bool: ...

    def is_dead(self) -> bool: ...

    def num_members(self) -> int: ...

    def has_member(self, member_id: str) -> bool: ...

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_or_epoch: int,
                               transactional: bool, version: int) -> ErrorCode | None: ...

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None: ...

    def validate_offset_delete(self) -> ErrorCode | None: ...

    def validate_delete_group(self) -> ErrorCode | None: ...

    def is_subscribed_to_topic(self, topic: str) -> bool: ...

    def offset_expiration(self) -> OffsetExpiration | None:
        """None: the group's offsets do not expire now."""
        ...

    def tombstones(self) -> list[CoordinatorRecord]:
        """The records that delete the group's metadata (not its offsets)."""
        ...

    def mark_dead(self, now_ms: int, error: ErrorCode) -> None:
        """Deleted or unloaded: final; whatever waits on the group is answered with `error`."""
        ...

    def revive(self) -> None:
        """Undo mark_dead whose tombstones failed to append (memory stays in step with the log)."""
        ...
