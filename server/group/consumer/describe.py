"""ConsumerGroupDescribe (v0-v1): each group's epochs, assignor and members, with each member's
current and target assignment by topic id and name. Reads the groups; writes nothing."""
from __future__ import annotations

from typing import Any

from kcoord.protocol.coordinator_records import Assignment
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ConsumerGroupDescribeResponse
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.topics import GroupTopics
from kcoord.server.group.group_manager import GroupMetadataManager
from kcoord.server.group.result import CoordinatorResult

_Described = ConsumerGroupDescribeResponse.DescribedGroup
_DescribedMember = ConsumerGroupDescribeResponse.DescribedGroup.Member
_DAssignment = ConsumerGroupDescribeResponse.DescribedGroup.Member.Assignment
_DTP = _DAssignment.TopicPartitions


class ConsumerGroupDescribe:
    """`assignor_names`: group.consumer.assignors (the first is a group's when none is preferred)."""

    def __init__(self, manager: GroupMetadataManager, topics: GroupTopics, assignor_names: list[str]) -> None:
        self.manager = manager
        self._groups = manager.groups_by_id
        self.topics = topics
        self.assignor_names = assignor_names

    def describe(self, req: Any, version: int) -> CoordinatorResult:
        out = []
        for gid in req.group_ids:
            err = self.manager.validate(gid, "consumer_group_describe")
            group = self._groups.get(gid) if err is None else None
            if err is None and (not isinstance(group, ConsumerGroup) or group.dead):
                err = ErrorCode.GROUP_ID_NOT_FOUND
            if err is not None:
                message = f"Group {gid} not found." if err is ErrorCode.GROUP_ID_NOT_FOUND else None
                out.append(_Described(error_code=int(err), error_message=message, group_id=gid, group_state="",
                                      group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                                      authorized_operations=-2**31))
                continue
            out.append(self._described(group, req.include_authorized_operations))
        return CoordinatorResult(response=ConsumerGroupDescribeResponse(version=version, throttle_time_ms=0,
                                                                        groups=out))

    def _described(self, group: ConsumerGroup, ops: bool) -> Any:
        name_of = self.topics.source.name_of

        def assignment(a: Assignment) -> Any:
            return _DAssignment(topic_partitions=[
                _DTP(topic_id=t, topic_name=name_of(t) or "", partitions=sorted(ps)) for t, ps in a.items()])

        members = [
            _DescribedMember(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=assignment(m.assigned), target_assignment=assignment(group.target_assignment.get(mid, {})),
                member_type=0 if m.uses_classic_protocol() else 1)
            for mid, m in group.members.items()
        ]
        # READ(3), DELETE(6), DESCRIBE(8) as DescribeGroups reports them without an authorizer
        operations = (1 << 3) | (1 << 6) | (1 << 8) if ops else -2**31
        return _Described(error_code=0, error_message=None, group_id=group.group_id, group_state=group.state_name(),
                          group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                          assignor_name=group.preferred_assignor() or self.assignor_names[0], members=members,
                          authorized_operations=operations)
