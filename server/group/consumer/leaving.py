"""Members leaving a consumer group: a ConsumerGroupHeartbeat at epoch -1 (leave) or -2 (a
static member leaving for a while, keeping its place and target assignment), and fencing (Kafka's
consumerGroupFenceMember): the member's records removed and the group epoch bumped, or, when the
last consumer-protocol member goes and the rest speak the classic protocol, the group converted
back to a classic group (server/group/migration.py). A member timer that fires fences through
expire()."""
from __future__ import annotations

import logging
from typing import Any

from kcoord.protocol.coordinator_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupRegularExpressionKey,
    CoordinatorRecord,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.consumer.answers import heartbeat_response
from kcoord.server.group.consumer.assignment import TargetAssignment
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.member import LEAVE_GROUP_STATIC_MEMBER_EPOCH
from kcoord.server.group.consumer.records import epoch_bump, removal_records
from kcoord.server.group.consumer.subscriptions import Subscriptions
from kcoord.server.group.consumer.timers import Timers, cancel_member_timers
from kcoord.server.group.consumer.validation import RequestError, known_static_member
from kcoord.server.group.consumer.writes import ConsumerGroupWrites
from kcoord.server.group.group_manager import GroupMetadataManager
from kcoord.server.group.migration import GroupMigration, MigrationError
from kcoord.server.group.result import CoordinatorResult

log = logging.getLogger("kcoord.group")


class Leaving:
    def __init__(self, manager: GroupMetadataManager, writes: ConsumerGroupWrites, subscriptions: Subscriptions,
                 assignment: TargetAssignment, timers: Timers, migration: GroupMigration) -> None:
        self._groups = manager.groups_by_id
        self.writes = writes
        self.subscriptions = subscriptions
        self.assignment = assignment
        self.timers = timers
        self.migration = migration

    def leave(self, req: Any, version: int) -> CoordinatorResult:
        gid, member_id, epoch, instance_id = req.group_id, req.member_id, req.member_epoch, req.instance_id
        group = self._groups.get(gid)
        if not isinstance(group, ConsumerGroup):
            raise RequestError(ErrorCode.UNKNOWN_MEMBER_ID if group is None else ErrorCode.GROUP_ID_NOT_FOUND,
                               f"Member {member_id} is not a member of group {gid}.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise RequestError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
            log.info("[GroupId %s] Member %s left the consumer group.", gid, member_id)
        else:
            member = known_static_member(group, member_id, instance_id)
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # a static member leaving for a while keeps its place and its target assignment
                leaving = member.evolve(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                records: list[CoordinatorRecord] = []
                undo: list[CoordinatorRecord] = []
                self.writes.apply(records, undo, [CoordinatorRecord(
                    ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), leaving.assignment_value())])
                log.info("[GroupId %s] Static Member %s with instance id %s temporarily left the consumer group.",
                         gid, member_id, instance_id)
                return self._answer(records, undo, version, member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)
            log.info("[GroupId %s] Static Member %s with instance id %s left the consumer group.",
                     gid, member_id, instance_id)
        records, undo = [], []
        self.fence(group, member.member_id, records, undo)
        return self._answer(records, undo, version, member_id, epoch)

    def _answer(self, records: list[CoordinatorRecord], undo: list[CoordinatorRecord], version: int,
                member_id: str, epoch: int) -> CoordinatorResult:
        return self.writes.result(records, undo, heartbeat_response(version, ErrorCode.NONE, None, member_id, epoch),
                                  lambda code, message: heartbeat_response(version, code, message))

    def fence(self, group: ConsumerGroup, member_id: str, records: list[CoordinatorRecord],
              undo: list[CoordinatorRecord]) -> None:
        """Remove the member and bump the group epoch (Kafka's consumerGroupFenceMember)."""
        gid = group.group_id
        member = group.members.get(member_id)
        migration = self.migration
        if member is not None and migration.can_downgrade_after_fencing(group, member_id):
            try:
                migration.downgrade(group, member_id, records, undo)
                cancel_member_timers(self.timers, gid, member_id)
                return
            except MigrationError as e:
                log.warning("[GroupId %s] Cannot downgrade the consumer group to a classic group: %s", gid, e)
        apply = self.writes.apply
        apply(records, undo, removal_records(gid, member_id))
        for regex in list(group.regexes):
            if regex not in group.regex_counts:  # nobody subscribes with it any more
                apply(records, undo, [CoordinatorRecord(ConsumerGroupRegularExpressionKey(gid, regex), None)])
        self.subscriptions.refresh_metadata(group, records, undo)
        apply(records, undo, [epoch_bump(group)])
        cancel_member_timers(self.timers, gid, member_id)
        if member is not None and group.group_epoch > group.assignment_epoch and group.members:
            self.assignment.schedule(group)

    def expire(self, gid: str, member_id: str, reason: str, epoch: int | None = None) -> None:
        """A member timer fired: fence the member (only at `epoch`, when given) and write it."""
        group = self._groups.get(gid)
        if not isinstance(group, ConsumerGroup) or group.dead:
            return
        member = group.members.get(member_id)
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("[GroupId %s] Member %s fenced from the group because %s", gid, member_id, reason)
        records: list[CoordinatorRecord] = []
        undo: list[CoordinatorRecord] = []
        self.fence(group, member_id, records, undo)
        self.writes.emit(records, undo)
