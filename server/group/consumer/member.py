"""One consumer-group member (Kafka's ConsumerGroupMember): identity and subscription (the
ConsumerGroupMemberMetadata record) and where it stands in its reconciliation (the
ConsumerGroupCurrentMemberAssignment record). Treated as immutable: a change makes a new member
(evolve), so the old and the new can be compared, as Kafka's builder does. Not a frozen
dataclass only because building one that way costs several times more, per heartbeat."""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any

from kcoord.protocol.coordinator_records import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
)

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

EMPTY_ASSIGNMENT: Assignment = {}


def kafka_uuid() -> str:
    """A new member id, as Kafka's Uuid.randomUuid().toString(): 16 random bytes, URL-safe
    base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class MemberState(IntEnum):
    """Kafka's MemberState, with its byte values (the State field of the record)."""

    STABLE = 0  # reconciled to the member epoch
    UNREVOKED_PARTITIONS = 1  # must revoke partitions before getting the new epoch
    UNRELEASED_PARTITIONS = 2  # waits for partitions other members still own
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMemberMetadata | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)

    def evolve(self, **changes: Any) -> ConsumerGroupMember:
        """A copy with `changes` (dataclasses.replace, without its per-call overhead)."""
        new = _new(ConsumerGroupMember)
        for name in _FIELDS:
            setattr(new, name, changes[name] if name in changes else getattr(self, name))
        return new

    # The two changes made on every heartbeat and replay, spelled out (several times faster
    # than evolve: this is most of what 1,000 members joining cost).

    def with_metadata(self, v: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        return ConsumerGroupMember(
            self.member_id, v.instance_id, v.rack_id, v.client_id, v.client_host, tuple(v.subscribed_topic_names),
            v.subscribed_topic_regex, v.rebalance_timeout_ms, v.server_assignor, v.classic, self.member_epoch,
            self.previous_member_epoch, self.state, self.assigned, self.pending_revocation)

    def with_epoch(self, epoch: int, state: MemberState, assigned: Assignment,
                   pending: Assignment) -> ConsumerGroupMember:
        """Kafka's updateMemberEpoch: the previous epoch remembers the one before a bump."""
        previous = self.member_epoch if epoch != self.member_epoch else self.previous_member_epoch
        return ConsumerGroupMember(
            self.member_id, self.instance_id, self.rack_id, self.client_id, self.client_host,
            self.subscribed_topic_names, self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor,
            self.classic, epoch, previous, state, assigned, pending)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    # ---- a member that speaks the classic protocol (JoinGroup / SyncGroup / Heartbeat) ----

    def classic_protocol_names(self) -> set[str]:
        return set() if self.classic is None else {name for name, _ in self.classic.protocols}

    def classic_protocol(self) -> tuple[str, bytes]:
        """Its first (preferred) protocol: the name its JoinGroup answers carry, the version
        its assignments are encoded with (Kafka uses the first of supportedProtocols)."""
        assert self.classic is not None and self.classic.protocols
        return self.classic.protocols[0]

    def same_metadata(self, other: ConsumerGroupMember) -> bool:
        """Whether the member metadata record of both is the same."""
        return self.metadata_value() == other.metadata_value()

    def same_assignment_state(self, other: ConsumerGroupMember) -> bool:
        return (self.member_epoch == other.member_epoch and self.previous_member_epoch == other.previous_member_epoch
                and self.state is other.state and self.assigned == other.assigned
                and self.pending_revocation == other.pending_revocation)

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            self.instance_id, self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names,
            self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor, self.classic)

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            self.member_epoch, self.previous_member_epoch, int(self.state), self.assigned, self.pending_revocation)

    def with_assignment(self, v: ConsumerGroupCurrentMemberAssignmentValue) -> ConsumerGroupMember:
        return ConsumerGroupMember(
            self.member_id, self.instance_id, self.rack_id, self.client_id, self.client_host,
            self.subscribed_topic_names, self.subscribed_topic_regex, self.rebalance_timeout_ms, self.server_assignor,
            self.classic, v.member_epoch, v.previous_member_epoch, MemberState.of(v.state), v.assigned,
            v.pending_revocation)


_FIELDS = tuple(f.name for f in fields(ConsumerGroupMember))
_new = object.__new__


def count(assignment: Assignment) -> int:
    return sum(len(ps) for ps in assignment.values())
