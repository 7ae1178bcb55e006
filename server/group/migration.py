"""Online migration between the classic and the consumer group protocol (KIP-848), as Kafka 4.x's
GroupMetadataManager does it under group.consumer.migration.policy:

- upgrade: a consumer-protocol member (ConsumerGroupHeartbeat) joining a classic group that has
  members turns it into a consumer group: the classic members become consumer-group members
  that speak the classic protocol, at the classic generation, owning what the last classic
  assignment gave them (Kafka's convertToConsumerGroup / ConsumerGroup.fromClassicGroup).
- downgrade: when the last consumer-protocol member leaves (or is fenced, or is replaced by a
  static member joining with the classic protocol) and every other member speaks the classic
  protocol, the group becomes a classic group again, generation = the group epoch, each
  member's assignment what it may still hold, and a rebalance starts (convertToClassicGroup /
  ClassicGroup.fromConsumerGroup). Kafka writes each member's target assignment there; kcoord
  writes its assigned partitions and those it has not yet revoked, so that a member that never
  revoked (silent, or slow) is not counted as owning less than it holds if the group is upgraded
  again before the rebalance ends: another member would be handed its partitions.

A conversion is one set of records in the same write as the request that caused it: the
tombstones of the old group's records, then the new group's records. They are applied as they
are made (the consumer group unit applies records that way) and reverted by the runtime if the
write fails, and
start-up loading replays them like any other record, so the log alone says which type the group
is. Classic members inside a consumer group are served by server/group/consumer/classic_members.py.
"""
from __future__ import annotations

import logging
from enum import StrEnum
from typing import TYPE_CHECKING

from kcoord.protocol.consumer_protocol import (
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    read_version,
)
from kcoord.protocol.coordinator_records import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupKey,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from kcoord.server.group.classic.member import JoinResult, MemberMetadata, SyncResult
from kcoord.server.group.classic.state import GroupState
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.member import ConsumerGroupMember, MemberState
from kcoord.server.group.consumer.timers import Timers, cancel_member_timers

if TYPE_CHECKING:
    from kcoord.server.group.classic.membership import ClassicMembership
    from kcoord.server.group.consumer.topics import GroupTopics
    from kcoord.server.group.consumer.writes import ConsumerGroupWrites
    from kcoord.server.group.group_manager import GroupMetadataManager

log = logging.getLogger("kcoord.group")


class MigrationPolicy(StrEnum):
    """group.consumer.migration.policy (Kafka's ConsumerGroupMigrationPolicy)."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


class MigrationError(Exception):
    """The group cannot be converted (its embedded consumer protocol is malformed)."""


class GroupMigration:
    """`writes` applies the conversion's records as the consumer group unit does
    (server/group/consumer/writes.py); `timers` holds the consumer-group members' timers, which
    a downgrade cancels; `topics` maps topic names to ids and back."""

    def __init__(self, manager: GroupMetadataManager, classic: ClassicMembership, writes: ConsumerGroupWrites,
                 timers: Timers, topics: GroupTopics) -> None:
        self.manager = manager
        self.classic = classic
        self.writes = writes
        self.timers = timers
        self.topics = topics
        self.config = manager.config
        self.clock = manager.clock
        self.policy = MigrationPolicy(self.config.group_consumer_migration_policy)

    # ====================================================================== upgrade

    def can_upgrade(self, group: ClassicGroup) -> bool:
        """Kafka's validateOnlineUpgrade (logs why not)."""
        gid = group.group_id
        if not self.policy.upgrade_enabled:
            log.info("Cannot upgrade classic group %s to consumer group because the online upgrade is disabled.", gid)
            return False
        if not group.is_consumer_group():
            log.info("Cannot upgrade classic group %s to consumer group because the group does not use the "
                     "consumer embedded protocol.", gid)
            return False
        if group.num_members() > self.config.group_consumer_max_size:
            log.info("Cannot upgrade classic group %s to consumer group because the group size exceeds the "
                     "consumer group maximum size.", gid)
            return False
        return True

    def upgrade(self, group: ClassicGroup, records: list[CoordinatorRecord],
                undo: list[CoordinatorRecord]) -> ConsumerGroup:
        """The classic group's tombstone and the consumer group's records, applied; raises
        MigrationError (nothing applied) when the classic members' metadata cannot be read.
        The caller starts the converted members' sessions."""
        gid = group.group_id
        generation = group.generation_id
        members = [self._from_classic_member(group, m, generation) for m in group.members.values()]
        owners: set[tuple[object, int]] = set()
        for m in members:
            for topic_id, partitions in m.assigned.items():
                for p in partitions:
                    if (topic_id, p) in owners:
                        raise MigrationError(f"partition {p} of topic {topic_id} is assigned to two members")
                    owners.add((topic_id, p))
        # Members parked in JoinGroup / SyncGroup rejoin: the join that converts the group
        # changes the subscriptions and bumps the epoch anyway (Kafka does the same).
        for m in list(group.members.values()):
            group.maybe_invoke_join(m, JoinResult(m.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
            group.maybe_invoke_sync(m, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        log.info("[GroupId %s] Converting the classic group (generation %d, %d members) to a consumer group.",
                 gid, generation, len(members))
        self.writes.apply(records, undo, [CoordinatorRecord(GroupKey(gid), None)])
        # undone after the consumer group's records, before the classic group comes back
        undo.append(CoordinatorRecord(ConsumerGroupMetadataKey(gid), None))
        # Kafka's createConsumerGroupRecords, in its order
        new = [CoordinatorRecord(ConsumerGroupMemberMetadataKey(gid, m.member_id), m.metadata_value())
                for m in members]
        new.append(CoordinatorRecord(ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(generation)))
        new += [CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(gid, m.member_id),
                                  ConsumerGroupTargetAssignmentMemberValue(m.assigned)) for m in members]
        new.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(gid),
                                     ConsumerGroupTargetAssignmentMetadataValue(generation)))
        new += [CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(gid, m.member_id), m.assignment_value())
                for m in members]
        self.writes.apply(records, undo, new)
        converted = self.manager.group(gid)
        assert isinstance(converted, ConsumerGroup), converted
        return converted

    def _from_classic_member(self, group: ClassicGroup, m: MemberMetadata, generation: int) -> ConsumerGroupMember:
        """Kafka's ConsumerGroup.fromClassicGroup for one member: Stable at the generation,
        owning (and targeted with) its last classic assignment."""
        try:
            metadata = m.metadata(group.protocol_name) if group.protocol_name is not None else m.protocols[0][1]
        except (ValueError, IndexError):
            metadata = m.protocols[0][1] if m.protocols else b""
        try:
            sub = decode_subscription(metadata)
            # a member that joined the current rebalance has no assignment yet: it owns nothing
            # (Kafka refuses the upgrade then; an empty assignment is read as one here)
            assigned = self.topic_ids(decode_assignment(m.assignment)) if m.assignment else {}
        except ConsumerProtocolError as e:
            raise MigrationError(f"the embedded consumer protocol of member {m.member_id} is malformed: {e}") \
                from None
        return ConsumerGroupMember(
            m.member_id, instance_id=m.group_instance_id, rack_id=sub.rack_id, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=tuple(sorted(set(sub.topics))),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            classic=ClassicMemberMetadata(m.session_timeout_ms, list(m.protocols)),
            member_epoch=generation, previous_member_epoch=generation, state=MemberState.STABLE,
            assigned=assigned)

    def topic_ids(self, partitions: list[tuple[str, list[int]]]) -> Assignment:
        """Topic names to ids (Kafka's toTopicPartitionMap: unknown topics are left out)."""
        out: dict = {}
        topics = self.topics.source
        for name, ps in partitions:
            meta = topics.metadata(name)
            if meta is not None and ps:
                out[meta.topic_id] = out.get(meta.topic_id, frozenset()) | frozenset(ps)
        return out

    def topic_names(self, assignment: Assignment) -> list[tuple[str, list[int]]]:
        topics = self.topics.source
        out = []
        for topic_id, ps in assignment.items():
            name = topics.name_of(topic_id)
            if name is not None:
                out.append((name, sorted(ps)))
        return out

    # ====================================================================== downgrade

    def can_downgrade_after_fencing(self, group: ConsumerGroup, member_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        if not group.all_members_use_classic_protocol_except(member_id):
            return False
        gid = group.group_id
        if len(group.members) <= 1:
            log.debug("Skip downgrading the consumer group %s to classic group because it's empty.", gid)
            return False
        if not self.policy.downgrade_enabled:
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled.", gid)
            return False
        if len(group.members) - 1 > self.config.group_max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater "
                     "than classic group max size.", gid)
            return False
        return True

    def can_downgrade_replacing(self, group: ConsumerGroup, replaced_member_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithReplacedMemberId: the last consumer-protocol
        member is a static member whose instance id rejoins with the classic protocol."""
        if not group.all_members_use_classic_protocol_except(replaced_member_id):
            return False
        gid = group.group_id
        if not self.policy.downgrade_enabled:
            log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled.", gid)
            return False
        if len(group.members) > self.config.group_max_size:
            log.info("Cannot downgrade consumer group %s to classic group because its group size is greater "
                     "than classic group max size.", gid)
            return False
        return True

    def downgrade(self, group: ConsumerGroup, leaving_member_id: str | None, records: list[CoordinatorRecord],
                  undo: list[CoordinatorRecord], rebalance: bool = True) -> ClassicGroup:
        """The consumer group's tombstones and the classic group's record, applied: every
        member but `leaving_member_id`, generation = the group epoch, each member's assigned and
        not yet revoked partitions as its classic assignment (disjoint across members); then, when the last consumer-protocol member
        left (`rebalance`), a rebalance of the classic group. (A static member that replaced
        the last consumer-protocol one is already in the group, with its target assignment.)
        Raises MigrationError (nothing applied) when no protocol is common to the members."""
        gid = group.group_id
        classic = ClassicGroup(gid, self.clock.now_ms(), GroupState.STABLE)
        classic.generation_id = group.group_epoch
        classic.protocol_type = CONSUMER_PROTOCOL_TYPE
        for mid, m in group.members.items():
            if mid == leaving_member_id:
                continue
            assert m.classic is not None, m
            classic.add(MemberMetadata(mid, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                       m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols)))
        try:
            classic.protocol_name = classic.select_protocol()
            assignments = {}
            for mid, m in classic.members.items():
                version = read_version(m.metadata(classic.protocol_name))
                assignments[mid] = encode_assignment(self.topic_names(held(group, mid)), version)
        except (ValueError, ConsumerProtocolError) as e:
            raise MigrationError(str(e)) from None
        log.info("[GroupId %s] Converting the consumer group (epoch %d) to a classic group with %d members.",
                 gid, group.group_epoch, len(classic.members))
        for mid in group.members:
            cancel_member_timers(self.timers, gid, mid, keep_session=True)
        self.writes.apply(records, undo, group.tombstones() + [self.classic.group_record(classic, assignments)])
        converted = self.manager.group(gid)
        assert isinstance(converted, ClassicGroup), converted
        if rebalance:
            self.classic.prepare_rebalance(converted, f"Downgrade group {gid} from consumer to classic.")
        return converted


def held(group: ConsumerGroup, member_id: str) -> Assignment:
    """What a member may still hold: its assigned partitions and those pending revocation (the
    coordinator never assigns a partition while another member has yet to revoke it, so these
    sets are disjoint across the members)."""
    m = group.members.get(member_id)
    if m is None:
        return group.target_assignment.get(member_id, {})
    out: dict = {t: set(ps) for t, ps in m.assigned.items()}
    for t, ps in m.pending_revocation.items():
        out.setdefault(t, set()).update(ps)
    return {t: frozenset(ps) for t, ps in out.items() if ps}

