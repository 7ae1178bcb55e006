"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat (v0-v1) and ConsumerGroupDescribe
(v0-v1), and the consumer group records' replay and loading. This module is the coordinator of
the units beside it, each owning one part:

- validation.py: what a heartbeat must be before it changes anything;
- membership.py: the group a member joins and the member's update (step 1) and reconciliation
  (step 3, reconcile.py);
- assignment.py: the target assignment (step 2), once per turn and group for every request
  that waits for it;
- subscriptions.py: the subscribed topics' metadata and the subscription regexes, against the
  broker's topics (topics.py);
- leaving.py: members leaving and fenced (with the conversion back to a classic group);
- timers.py: the session and rebalance timers (and a classic member's join and sync timeouts);
- records.py / writes.py: the records, their replay, and how a step applies them now and
  hands the runtime what they replaced (it reverts them if the write fails);
- describe.py: ConsumerGroupDescribe; answers.py: what a heartbeat answers.

Follows Kafka 4.x's GroupMetadataManager.consumerGroupHeartbeat: (1) the member is created or
updated, and the group epoch bumped when a subscription or the subscribed topics' metadata
changed; (2) when the group epoch is ahead of the target assignment epoch, the assignor
computes a new target assignment; (3) the member is reconciled towards its target and answered
with its epoch and, when it changed, its assignment. A settled member's keep-alive changes
nothing but its session and is answered by keepalive() alone.

Assignment answers: beyond Kafka, an answer repeats the member's assignment until a heartbeat
of the member says it owns exactly that (ConsumerGroup.unconfirmed). The answer that carried a
change is sent once the records are replicated, and librdkafka waits for it only one heartbeat
interval: a member that gave up on it would otherwise never learn it (Kafka sends it only when
it changed), keeping partitions it was told to revoke until its rebalance timeout, or never
taking ones released to it. Clients ignore an assignment that is their current target.
"""
from __future__ import annotations

import logging
from typing import Any

from kcoord.protocol.coordinator_records import CoordinatorRecord
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.consumer import assignors
from kcoord.server.group.consumer.answers import KeepAlive, heartbeat_response, keep_alive
from kcoord.server.group.consumer.assignment import TargetAssignment
from kcoord.server.group.consumer.describe import ConsumerGroupDescribe
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.leaving import Leaving
from kcoord.server.group.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
    kafka_uuid,
)
from kcoord.server.group.consumer.membership import Membership
from kcoord.server.group.consumer.reconcile import FencedMemberEpoch, owns_exactly
from kcoord.server.group.consumer.records import ConsumerGroupRecords
from kcoord.server.group.consumer.subscriptions import Subscriptions
from kcoord.server.group.consumer.timers import SESSION_EXPIRED, MemberTimers, Timers
from kcoord.server.group.consumer.topics import GroupTopics
from kcoord.server.group.consumer.validation import RequestError, check_member_epoch, check_request
from kcoord.server.group.consumer.writes import ConsumerGroupWrites
from kcoord.server.group.group_manager import GroupMetadataManager
from kcoord.server.group.migration import GroupMigration
from kcoord.server.group.result import CoordinatorResult

log = logging.getLogger("kcoord.group")


class ConsumerGroupProtocol:
    """Runs consumer groups: their requests, timers and records. `topics`, `records`,
    `writes`, `timers` and `migration` are shared with the migration between group types
    (server/group/migration.py), which the coordinator builds first."""

    def __init__(self, manager: GroupMetadataManager, topics: GroupTopics, records: ConsumerGroupRecords,
                 writes: ConsumerGroupWrites, timers: Timers, migration: GroupMigration) -> None:
        self.manager = manager
        self.config = config = manager.config
        self._groups = manager.groups_by_id
        self.topics = topics
        self.writes = writes
        self.replay = records.replay  # (key, value): a consumer group record into memory
        self.assignor_names = assignors.assignor_names(list(config.group_consumer_assignors))
        self.subscriptions = Subscriptions(manager, writes, topics)
        self.assignment = TargetAssignment(manager, writes, self.assignor_names)
        self.leaving = Leaving(manager, writes, self.subscriptions, self.assignment, timers, migration)
        self.timers = MemberTimers(timers, self._groups, config.consumer_session_timeout_ms,
                                   self.leaving.expire)
        self.members = Membership(manager, writes, self.subscriptions, self.timers, topics, migration)
        self.describe = ConsumerGroupDescribe(manager, topics, self.assignor_names).describe

    # ====================================================================== ConsumerGroupHeartbeat

    def heartbeat(self, req: Any, version: int, client_id: str, client_host: str) -> CoordinatorResult:
        try:
            check_request(req, version, self.manager.validate(req.group_id, "consumer_group_heartbeat"),
                          self.assignor_names)
            epoch = req.member_epoch
            if epoch == LEAVE_GROUP_MEMBER_EPOCH or epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                return self.leaving.leave(req, version)
            return self._heartbeat(req, version, client_id, client_host)
        except RequestError as f:
            return CoordinatorResult(response=heartbeat_response(version, f.code, f.message))
        except FencedMemberEpoch as f:
            return CoordinatorResult(response=heartbeat_response(version, ErrorCode.FENCED_MEMBER_EPOCH, str(f)))

    def keepalive(self, req: Any, version: int, client_id: str, client_host: str) -> KeepAlive | None:
        """The answer to the keep-alive of a reconciled member of a settled group, which changes
        nothing but the member's session; None for any other heartbeat."""
        epoch = req.member_epoch
        if (epoch <= 0 or req.topic_partitions is not None or req.subscribed_topic_names is not None
                or req.rebalance_timeout_ms != -1 or req.instance_id is not None or req.rack_id is not None
                or req.server_assignor is not None or (version >= 1 and req.subscribed_topic_regex is not None)):
            return None
        group = self._groups.get(req.group_id)
        if (group.__class__ is not ConsumerGroup or group.group_epoch != epoch or group.assignment_epoch != epoch
                or group.metadata_version != self.topics.source.changes):
            return None
        member = group.members.get(req.member_id)
        if (member is None or member.member_epoch != epoch or member.state is not MemberState.STABLE
                or req.member_id in group.unconfirmed or member.instance_id is not None or member.client_id != client_id
                or member.client_host != client_host or member.classic is not None):
            return None
        gid, mid = group.group_id, member.member_id
        # the member's session restarted: MemberTimers.session inline (this is the hot path)
        timers = self.timers
        expire = timers.expire
        config = self.config
        timers.timers.schedule(("session", gid, mid), config.consumer_session_timeout_ms(gid),
                               lambda: expire(gid, mid, SESSION_EXPIRED, None))
        return keep_alive(mid, epoch, config.consumer_heartbeat_interval_ms(gid))

    def _heartbeat(self, req: Any, version: int, client_id: str, client_host: str) -> CoordinatorResult:
        """A member joining or heartbeating: steps 1 to 3."""
        gid = req.group_id
        epoch = req.member_epoch
        instance_id = req.instance_id
        owned = None if req.topic_partitions is None else [(tp.topic_id, tp.partitions) for tp in req.topic_partitions]
        records: list[CoordinatorRecord] = []
        undo: list[CoordinatorRecord] = []
        members = self.members
        group = members.group(gid, create=epoch == 0, records=records, undo=undo)
        member_id = req.member_id or kafka_uuid()
        max_size = self.config.group_consumer_max_size
        if len(group.members) >= max_size and (not req.member_id or req.member_id not in group.members):
            raise RequestError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                               f"The consumer group has reached its maximum capacity of {max_size} members.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if epoch != 0:
                    raise RequestError(ErrorCode.UNKNOWN_MEMBER_ID,
                                       f"Member {member_id} is not a member of group {gid}.")
                member = ConsumerGroupMember(member_id)
                log.info("[GroupId %s] Member %s joins the consumer group using the consumer protocol.",
                         gid, member_id)
            else:
                check_member_epoch(member, epoch, owned)
        else:
            member = members.static_member(group, member_id, epoch, instance_id, owned, records, undo)
        old = group.members.get(member.member_id)
        regex = req.subscribed_topic_regex if version >= 1 else None
        # what the request changes (null / -1: unchanged since the last heartbeat)
        names = req.subscribed_topic_names
        updated = ConsumerGroupMember(
            member.member_id, member.instance_id if instance_id is None else instance_id,
            member.rack_id if req.rack_id is None else req.rack_id, client_id, client_host,
            member.subscribed_topic_names if names is None else tuple(sorted(set(names))),
            member.subscribed_topic_regex if regex is None else (regex or None),
            member.rebalance_timeout_ms if req.rebalance_timeout_ms == -1 else req.rebalance_timeout_ms,
            member.server_assignor if req.server_assignor is None else req.server_assignor, None,
            member.member_epoch, member.previous_member_epoch, member.state, member.assigned,
            member.pending_revocation)
        # a new regex is resolved after this turn's assignment (subscriptions.py)
        new_regex = updated.subscribed_topic_regex is not None and updated.subscribed_topic_regex not in group.regexes
        members.update_member(group, old, updated, records, undo)
        full = epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                              and owned is not None)
        self.timers.session(gid, member_id)
        interval = self.config.consumer_heartbeat_interval_ms(gid)

        def answer(g: ConsumerGroup, records: list[CoordinatorRecord],
                   undo: list[CoordinatorRecord]) -> tuple[Any, None]:
            reconciled = members.reconcile_member(g, member_id, owned, records, undo)
            # the assignment when it changed or the request said everything it owns (Kafka), and
            # until the member says it owns exactly it
            changed = old is None or old.assigned != reconciled.assigned
            if owns_exactly(owned, reconciled.assigned):
                g.unconfirmed.discard(member_id)
            elif changed or owned is not None:  # changed, or it says it owns something else
                g.unconfirmed.add(member_id)
            assignment = reconciled.assigned if full or changed or member_id in g.unconfirmed else None
            return heartbeat_response(version, ErrorCode.NONE, None, member_id, reconciled.member_epoch, interval,
                                      assignment), None

        result = self.assignment.answer_after(group, member_id, records, undo, answer,
                                              lambda code, message: heartbeat_response(version, code, message))
        if new_regex:  # after this turn's assignment
            self.subscriptions.resolve_regexes_later(group)
        return result

    # ====================================================================== loading

    def on_group_loaded(self, group: ConsumerGroup) -> None:
        log.info("Loaded consumer group %s with %d members.", group.group_id, len(group.members))
        for mid, m in group.members.items():
            self.timers.restart_session(group.group_id, mid)
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                self.timers.rebalance(group.group_id, mid, m.member_epoch, m.rebalance_timeout_ms)
