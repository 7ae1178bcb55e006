"""One share group member (Kafka's ShareGroupMember): what the member said of itself (rack,
client, subscription: ShareGroupMemberMetadata) and what it was given (its epoch and assigned
partitions: ShareGroupCurrentMemberAssignment). Immutable: an update is a new member."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from kcoord.protocol.share_records import (
    Assignment,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataValue,
)

LEAVE_GROUP_MEMBER_EPOCH = -1
STABLE = 0  # Kafka's MemberState.STABLE: a share member is always reconciled at once


@dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = STABLE
    assigned: Assignment = field(default_factory=dict)

    def metadata_value(self) -> ShareGroupMemberMetadataValue:
        return ShareGroupMemberMetadataValue(self.rack_id, self.client_id, self.client_host,
                                             self.subscribed_topic_names)

    def assignment_value(self) -> ShareGroupCurrentMemberAssignmentValue:
        return ShareGroupCurrentMemberAssignmentValue(self.member_epoch, self.previous_member_epoch, self.state,
                                                      dict(self.assigned))

    def with_metadata(self, v: ShareGroupMemberMetadataValue) -> ShareGroupMember:
        return dataclasses.replace(self, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
                                   subscribed_topic_names=tuple(v.subscribed_topic_names))

    def with_assignment(self, v: ShareGroupCurrentMemberAssignmentValue) -> ShareGroupMember:
        return dataclasses.replace(self, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                                   state=v.state, assigned=dict(v.assigned))

    def partitions(self) -> set[tuple[object, int]]:
        return {(t, p) for t, ps in self.assigned.items() for p in ps}
