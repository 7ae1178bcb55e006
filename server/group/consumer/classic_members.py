"""Members that speak the classic protocol inside a consumer group (KIP-848's online migration),
as Kafka 4.x serves them: JoinGroup (v0-v9), SyncGroup (v0-v5), Heartbeat (v0-v4) and
LeaveGroup (v0-v5) sent to a consumer group are answered from the consumer group's state
(GroupMetadataManager.classicGroupJoinToConsumerGroup, classicGroupSyncToConsumerGroup,
classicGroupHeartbeatToConsumerGroup, classicGroupLeaveToConsumerGroup).

A classic member is a consumer-group member whose ConsumerGroupMemberMetadata record carries
its classic metadata (session timeout, the JoinGroup protocols): its subscription is read from
its ConsumerProtocolSubscription, the server-side assignor assigns it like any member, and the
reconciliation walks it to its target (its owned partitions, from the subscription, stand for a
heartbeat's). JoinGroup answers with the member epoch as the generation and no leader; SyncGroup
hands out the member's assigned partitions as a ConsumerProtocolAssignment. A new group epoch,
partitions to revoke, or released partitions to pick up are signalled as Heartbeat's
REBALANCE_IN_PROGRESS, which makes the client rejoin, and a member that does not rejoin (or sync)
within its rebalance timeout is fenced. Its session is its own session timeout.
"""
from __future__ import annotations

import logging
from typing import Any

from kcoord.protocol.consumer_protocol import (
    ConsumerProtocolError,
    decode_subscription,
    encode_assignment,
    read_version,
)
from kcoord.protocol.coordinator_records import ClassicMemberMetadata, CoordinatorRecord
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.classic.member import JoinResult, SyncResult
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.member import ConsumerGroupMember, MemberState, kafka_uuid
from kcoord.server.group.consumer.protocol import ConsumerGroupProtocol
from kcoord.server.group.consumer.records import epoch_bump, removal_records
from kcoord.server.group.migration import GroupMigration, MigrationError
from kcoord.server.group.responses import join_response, leave_response, sync_response
from kcoord.server.group.result import CoordinatorResult

log = logging.getLogger("kcoord.group")

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicMembersOfConsumerGroups:
    def __init__(self, consumer: ConsumerGroupProtocol, migration: GroupMigration) -> None:
        self.migration = migration
        self.config = consumer.config
        # the consumer group protocol's units, whose steps a classic member takes too
        self.members = consumer.members
        self.assignment = consumer.assignment
        self.subscriptions = consumer.subscriptions
        self.timers = consumer.timers
        self.writes = consumer.writes

    # ---------------------------------------------------------------- shared checks

    @staticmethod
    def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember | ErrorCode:
        """Kafka's validateConsumerGroupMember then throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
        else:
            member = group.static_member(instance_id)
            if member is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member.member_id != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if not member.uses_classic_protocol():
            return ErrorCode.UNKNOWN_MEMBER_ID
        return member

    def _rejoin_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        """Kafka's scheduleConsumerGroupJoinTimeoutIfAbsent: a member told to rejoin that does
        not within its rebalance timeout is fenced."""
        self.timers.schedule_once("join", group.group_id, member.member_id, member.rebalance_timeout_ms,
                                  "the classic member failed to join within the rebalance timeout.")

    # ---------------------------------------------------------------- JoinGroup

    def join_group(self, group: ConsumerGroup, req: Any, version: int, client_id: str,
                   client_host: str) -> CoordinatorResult:
        session = req.session_timeout_ms
        request_member_id = req.member_id or ""

        def fail(code: ErrorCode, member_id: str = "") -> CoordinatorResult:
            return CoordinatorResult(response=join_response(version, JoinResult(member_id, code)))

        if not self.config.group_min_session_timeout_ms <= session <= self.config.group_max_session_timeout_ms:
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT, request_member_id)
        if group.dead:
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        gid = group.group_id
        unknown = request_member_id == ""
        member_id = kafka_uuid() if unknown else request_member_id
        instance_id = req.group_instance_id if version >= 5 else None
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        if member_id not in group.members and len(group.members) >= self.config.group_consumer_max_size:
            return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not group.supports_classic_protocols(req.protocol_type, {name for name, _ in protocols}):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and version >= 4 and instance_id is None:
            # KIP-394: a dynamic member first gets its id and comes back with it
            log.info("[GroupId %s] Dynamic member with unknown member id joins the consumer group. Created a new "
                     "member id %s and requesting the member to rejoin with this id.", gid, member_id)
            return fail(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = decode_subscription(protocols[0][1])
        except ConsumerProtocolError as e:
            log.error("[GroupId %s] Malformed embedded consumer protocol in the subscription of %s: %s",
                      gid, member_id, e)
            return fail(ErrorCode.UNKNOWN_SERVER_ERROR)

        records: list[CoordinatorRecord] = []
        undo: list[CoordinatorRecord] = []
        downgrade = False
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                member = ConsumerGroupMember(member_id)
                log.info("[GroupId %s] Member %s joins the consumer group using the classic protocol.",
                         gid, member_id)
        else:
            existing = group.static_member(instance_id)
            if unknown:
                if existing is None:
                    member = group.members.get(member_id) or ConsumerGroupMember(member_id)
                    log.info("[GroupId %s] Static member %s with instance id %s joins the consumer group using the "
                             "classic protocol.", gid, member_id, instance_id)
                else:
                    # the last consumer-protocol member replaced by a classic one: the group
                    # becomes classic after this join (Kafka's step 4)
                    downgrade = self.migration.can_downgrade_replacing(group, existing.member_id)
                    member = self.members.replace_static_member(group, existing, member_id, records, undo)
            elif existing is None:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            elif existing.member_id != member_id:
                return fail(ErrorCode.FENCED_INSTANCE_ID)
            else:
                member = existing
        old = group.members.get(member.member_id)
        rebalance_timeout = req.rebalance_timeout_ms if version >= 1 else session
        updated = member.evolve(
            instance_id=member.instance_id if instance_id is None else instance_id,
            rack_id=member.rack_id if subscription.rack_id is None else subscription.rack_id,
            client_id=client_id, client_host=client_host,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=member.rebalance_timeout_ms if rebalance_timeout == -1 else rebalance_timeout,
            classic=ClassicMemberMetadata(session, protocols))
        self.members.update_member(group, old, updated, records, undo)
        owned = list(self.migration.topic_ids(subscription.owned_partitions).items())
        protocol_name = protocols[0][0]

        def answer(g: ConsumerGroup, records: list[CoordinatorRecord], undo: list[CoordinatorRecord]) -> tuple:
            reconciled = self.members.reconcile_member(g, member_id, owned, records, undo)
            converted = False
            if downgrade:
                try:
                    self.migration.downgrade(g, None, records, undo, rebalance=False)
                    converted = True
                except MigrationError as e:
                    log.warning("[GroupId %s] Cannot downgrade the consumer group to a classic group: %s", gid, e)
            response = join_response(version, JoinResult(
                member_id, ErrorCode.NONE, generation_id=reconciled.member_epoch,
                protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocol_name))

            def after() -> None:
                timers = self.timers
                timers.cancel("join", gid, member_id)
                if not converted:
                    timers.restart_session(gid, member_id)
                    timers.schedule("sync", gid, member_id, req.rebalance_timeout_ms if version >= 1 else session,
                                    "the member failed to sync within timeout.")

            return response, after

        return self.assignment.answer_after(
            group, member_id, records, undo, answer,
            lambda code, message: join_response(version, JoinResult("", code)))

    # ---------------------------------------------------------------- SyncGroup

    def sync_group(self, group: ConsumerGroup, req: Any, version: int) -> CoordinatorResult:
        def answer(r: SyncResult) -> CoordinatorResult:
            return CoordinatorResult(response=sync_response(version, r))

        if group.dead:
            return answer(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        if group.is_empty():
            return answer(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member = self._member(group, req.member_id, req.group_instance_id if version >= 3 else None)
        if isinstance(member, ErrorCode):
            return answer(SyncResult(member))
        if req.generation_id != member.member_epoch:
            return answer(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        protocol_name, metadata = member.classic_protocol()
        protocol_type = req.protocol_type if version >= 5 else None
        requested_name = req.protocol_name if version >= 5 else None
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                (requested_name is not None and requested_name != protocol_name):
            return answer(SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            # a new rebalance started since the join: rejoin to catch up (one that still has
            # partitions to revoke gets what it keeps first, and rejoins after)
            self._rejoin_timeout(group, member)
            return answer(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        gid = group.group_id
        self.timers.cancel("sync", gid, member.member_id)
        self.timers.restart_session(gid, member.member_id)
        try:
            version_of_member = read_version(metadata)
        except ConsumerProtocolError:
            version_of_member = 0
        assignment = encode_assignment(self.migration.topic_names(member.assigned), version_of_member)
        return answer(SyncResult(ErrorCode.NONE, protocol_type, requested_name, assignment))

    # ---------------------------------------------------------------- Heartbeat

    def heartbeat_error(self, group: ConsumerGroup, req: Any, version: int) -> ErrorCode:
        if group.dead:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        member = self._member(group, req.member_id, req.group_instance_id if version >= 3 else None)
        if isinstance(member, ErrorCode):
            return member
        if req.generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.timers.restart_session(group.group_id, member.member_id)
        state = member.state
        # rejoin: to catch up with a new group epoch, to finish revoking, or to pick up
        # partitions that other members have released meanwhile
        if (member.member_epoch < group.group_epoch or state is MemberState.UNREVOKED_PARTITIONS
                or (state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member))):
            self._rejoin_timeout(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ---------------------------------------------------------------- LeaveGroup

    def leave_group(self, group: ConsumerGroup, req: Any, version: int) -> CoordinatorResult:
        if version >= 3:
            leaving = [(m.member_id or "", m.group_instance_id, getattr(m, "reason", None)) for m in req.members]
        else:
            leaving = [(req.member_id or "", None, None)]
        if group.dead:
            return CoordinatorResult(response=leave_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, []))
        gid = group.group_id
        apply = self.writes.apply
        records: list[CoordinatorRecord] = []
        undo: list[CoordinatorRecord] = []
        out: list[tuple[str, str | None, ErrorCode]] = []
        for member_id, instance_id, reason in leaving:
            why = reason or "not provided"
            if instance_id is None:
                member = group.members.get(member_id)
            else:
                member = group.static_member(instance_id)
                # an administrative removal names only the instance id
                if member is not None and member_id and member.member_id != member_id:
                    out.append((member_id, instance_id, ErrorCode.FENCED_INSTANCE_ID))
                    continue
            if member is None or not member.uses_classic_protocol():
                out.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                continue
            if instance_id is None:
                log.info("[Group %s] Dynamic Member %s has left group through explicit `LeaveGroup` request; "
                         "client reason: %s", gid, member.member_id, why)
            else:
                log.info("[Group %s] Static Member %s with instance id %s has left group through explicit "
                         "`LeaveGroup` request; client reason: %s", gid, member.member_id, instance_id, why)
            apply(records, undo, removal_records(gid, member.member_id))
            self.timers.cancel_all(gid, member.member_id)
            out.append((member.member_id, instance_id, ErrorCode.NONE))
        if records:
            self.subscriptions.refresh_metadata(group, records, undo)
            apply(records, undo, [epoch_bump(group)])
            if group.members:
                self.assignment.schedule(group)
        return self.writes.result(records, undo, leave_response(version, ErrorCode.NONE, out),
                                  lambda code, message: leave_response(version, code, []))
