"""The members of consumer groups, steps 1 and 3 of a heartbeat (a classic member's JoinGroup
takes the same steps, classic_members.py): the group a member joins (created, or upgraded from a
classic group), a static member found or replacing its previous incarnation, the member's
record and the group epoch bump when its subscription or the subscribed topics changed, and its
reconciliation towards its target assignment (reconcile.py), with the rebalance timeout of a
member that has partitions to revoke."""
from __future__ import annotations

import logging
from typing import Any

from kcoord.protocol.coordinator_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    CoordinatorRecord,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.member import (
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from kcoord.server.group.consumer.reconcile import reconcile
from kcoord.server.group.consumer.records import epoch_bump, removal_records
from kcoord.server.group.consumer.subscriptions import Subscriptions
from kcoord.server.group.consumer.timers import MemberTimers
from kcoord.server.group.consumer.topics import GroupTopics
from kcoord.server.group.consumer.validation import RequestError, check_member_epoch, known_static_member
from kcoord.server.group.consumer.writes import ConsumerGroupWrites
from kcoord.server.group.group_manager import GroupMetadataManager
from kcoord.server.group.migration import GroupMigration, MigrationError
from kcoord.server.group.types import GroupType

log = logging.getLogger("kcoord.group")


class Membership:
    def __init__(self, manager: GroupMetadataManager, writes: ConsumerGroupWrites, subscriptions: Subscriptions,
                 timers: MemberTimers, topics: GroupTopics, migration: GroupMigration) -> None:
        self.manager = manager
        self._groups = manager.groups_by_id
        self.writes = writes
        self.subscriptions = subscriptions
        self.timers = timers
        self.topics = topics
        self.migration = migration

    def group(self, gid: str, create: bool, records: list[CoordinatorRecord],
              undo: list[CoordinatorRecord]) -> ConsumerGroup:
        """The consumer group `gid`; with `create`, a new one, or the classic group of that id
        converted (an empty one simply gives way; its offsets stay)."""
        group = self._groups.get(gid)
        if isinstance(group, ConsumerGroup):
            if group.dead:  # being deleted: its tombstones are on their way
                raise RequestError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return group
        if not create:
            if group is None or group.is_dead():
                raise RequestError(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {gid} has no member of that id.")
            raise RequestError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        if group is not None and not group.is_dead():
            if group.TYPE is GroupType.SHARE:
                raise RequestError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
            if not group.is_empty() or group.num_members():
                migration = self.migration
                if not migration.can_upgrade(group):
                    raise RequestError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
                try:
                    converted = migration.upgrade(group, records, undo)
                except MigrationError as e:
                    log.warning("[GroupId %s] Cannot upgrade the classic group to a consumer group: %s", gid, e)
                    raise RequestError(ErrorCode.GROUP_ID_NOT_FOUND,
                                       f"Cannot upgrade the classic group {gid} to consumer group because the "
                                       "embedded consumer protocol is malformed.") from None
                for mid in converted.members:
                    self.timers.restart_session(gid, mid)
                return converted
            # an Empty classic group becomes a consumer group; its offsets stay
            log.info("[GroupId %s] Converting the empty classic group to a consumer group.", gid)
            self.writes.apply(records, undo, group.tombstones())
        new = ConsumerGroup(gid)
        self.manager.put_group(new)
        # the group's creation is undone last: its tombstone removes it once its members are gone
        undo.append(CoordinatorRecord(ConsumerGroupMetadataKey(gid), None))
        return new

    def static_member(self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str, owned: Any,
                      records: list[CoordinatorRecord], undo: list[CoordinatorRecord]) -> ConsumerGroupMember:
        """The static member a heartbeat with `instance_id` speaks for (a new one, the one it
        replaces, or itself), as Kafka's consumerGroupHeartbeat finds it."""
        existing = group.static_member(instance_id)
        gid = group.group_id
        if epoch == 0:
            if existing is None:
                log.info("[GroupId %s] Static member %s with instance id %s joins the consumer group.",
                         gid, member_id, instance_id)
                return group.members.get(member_id) or ConsumerGroupMember(member_id)
            if existing.member_id == member_id:
                return existing
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not existing.uses_classic_protocol():
                raise RequestError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                   f"Static member {existing.member_id} with instance id {instance_id} cannot be "
                                   "replaced because it has not left the group.")
            return self.replace_static_member(group, existing, member_id, records, undo)
        member = known_static_member(group, member_id, instance_id)
        check_member_epoch(member, epoch, owned)
        return member

    def replace_static_member(self, group: ConsumerGroup, existing: ConsumerGroupMember, member_id: str,
                              records: list[CoordinatorRecord], undo: list[CoordinatorRecord]) -> ConsumerGroupMember:
        """A static member rejoining with a new member id takes over the old one's place and
        target assignment (Kafka's replaceMember)."""
        gid = group.group_id
        instance_id = existing.instance_id
        new = ConsumerGroupMember(member_id, instance_id=instance_id, rack_id=existing.rack_id,
                                  client_id=existing.client_id, client_host=existing.client_host,
                                  subscribed_topic_names=existing.subscribed_topic_names,
                                  subscribed_topic_regex=existing.subscribed_topic_regex,
                                  rebalance_timeout_ms=existing.rebalance_timeout_ms,
                                  server_assignor=existing.server_assignor,
                                  assigned=existing.assigned)
        target = group.target_assignment.get(existing.member_id, {})
        self.writes.apply(records, undo, removal_records(gid, existing.member_id) + [
            CoordinatorRecord(ConsumerGroupMemberMetadataKey(gid, member_id), new.metadata_value()),
            CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(gid, member_id),
                              ConsumerGroupTargetAssignmentMemberValue(target)),
            CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), new.assignment_value()),
        ])
        self.timers.cancel_all(gid, existing.member_id)
        log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group. Created a new "
                 "member %s to replace the existing member %s.", gid, instance_id, member_id, existing.member_id)
        return group.members[member_id]

    def update_member(self, group: ConsumerGroup, old: ConsumerGroupMember | None, updated: ConsumerGroupMember,
                      records: list[CoordinatorRecord], undo: list[CoordinatorRecord]) -> None:
        """Step 1 of a heartbeat or a classic join (Kafka's hasMemberSubscriptionChanged and
        what follows): the member's record when it changed; the group epoch bumped when its
        subscription changed or the subscribed topics' metadata did."""
        gid = group.group_id
        bump = False
        if old is None or not updated.same_metadata(old):
            self.writes.apply(records, undo, [CoordinatorRecord(
                ConsumerGroupMemberMetadataKey(gid, updated.member_id), updated.metadata_value())])
            if old is None or updated.subscribed_topic_names != old.subscribed_topic_names \
                    or updated.subscribed_topic_regex != old.subscribed_topic_regex:
                bump = True
        if bump or group.metadata_version != self.topics.source.changes:
            bump = self.subscriptions.refresh_metadata(group, records, undo) or bump
        if bump:
            self.writes.apply(records, undo, [epoch_bump(group)])
            log.info("[GroupId %s] Bumped group epoch to %d.", gid, group.group_epoch)

    def reconcile_member(self, group: ConsumerGroup, member_id: str, owned: Any, records: list[CoordinatorRecord],
                         undo: list[CoordinatorRecord]) -> ConsumerGroupMember:
        """Step 3: the member's next step towards its target assignment, applied (Kafka's
        maybeReconcile)."""
        member = group.members[member_id]
        target_epoch = group.assignment_epoch
        if member.is_reconciled_to(target_epoch):
            return member
        target = group.target_assignment.get(member_id, {})
        updated = reconcile(member, target_epoch, target, group.partition_epoch, owned)
        if not updated.same_assignment_state(member):
            self.writes.apply(records, undo, [CoordinatorRecord(
                ConsumerGroupCurrentMemberAssignmentKey(group.group_id, member_id), updated.assignment_value())])
            log.debug("[GroupId %s] Member %s new assignment state: epoch=%d, previousEpoch=%d, state=%s",
                      group.group_id, member_id, updated.member_epoch, updated.previous_member_epoch,
                      updated.state.name)
            if updated.state is MemberState.UNREVOKED_PARTITIONS:
                self.timers.rebalance(group.group_id, member_id, updated.member_epoch, updated.rebalance_timeout_ms)
            else:
                self.timers.cancel("rebalance", group.group_id, member_id)
        return updated
