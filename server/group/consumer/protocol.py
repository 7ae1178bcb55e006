"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat (v0-v1), ConsumerGroupDescribe
(v0-v1), the consumer group records (building, replaying, loading), the session and rebalance
timeouts, and the subscription metadata and regex resolution behind the group epoch.

Follows Kafka 4.x's GroupMetadataManager.consumerGroupHeartbeat: (1) the member is created or
updated, and the group epoch bumped when a subscription or the subscribed topics' metadata
changed; (2) when the group epoch is ahead of the target assignment epoch, the assignor
computes a new target assignment; (3) the member is reconciled towards its target
(reconcile.py) and answered with its epoch and, when it changed, its assignment.

Records are applied when they are made (as Kafka's timeline does), so the next request sees
them; the response waits until they are durable, and a failed append undoes them (each write
carries the previous value of every key it touched). Step 2 runs once per event-loop turn and
group: the heartbeats that need the new target assignment wait for the end of the turn and are
reconciled together, so a thousand members joining cost a handful of assignor runs, not a
thousand (the role of Kafka's group.consumer.assignment.interval.ms, KIP-1263).
"""
from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from protocol.coordinator_records import (
    Assignment,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    CoordinatorRecord,
    GroupKey,
    TopicMetadata,
)
from protocol.errors import ErrorCode
from protocol.fastpath import ConsumerGroupHeartbeatResponseData, consumer_group_keepalive_body
from protocol.messages import ConsumerGroupDescribeResponse
from server.deferred import Deferred
from server.group.consumer import assignors
from server.group.consumer.group import ConsumerGroup, ConsumerGroupState
from server.group.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from server.group.consumer.reconcile import FencedMemberEpoch, reconcile
from server.group.consumer.regex import compile_regex
from server.group.group_manager import GroupMetadataManager
from server.group.migration import MigrationError
from server.group.result import CoordinatorResult

if TYPE_CHECKING:
    from server.group.migration import GroupMigration

log = logging.getLogger("kcoord.group")

_Described = ConsumerGroupDescribeResponse.DescribedGroup
_DescribedMember = ConsumerGroupDescribeResponse.DescribedGroup.Member
_DAssignment = ConsumerGroupDescribeResponse.DescribedGroup.Member.Assignment
_DTP = _DAssignment.TopicPartitions


class TopicSource(Protocol):
    """What the coordinator needs of the broker's topics."""

    changes: int  # bumped on every topic creation, deletion or partition change

    def metadata(self, name: str) -> TopicMetadata | None: ...

    def names(self) -> Iterable[str]: ...

    def name_of(self, topic_id: uuid.UUID) -> str | None: ...


class NoTopics:
    changes = 0

    def metadata(self, name: str) -> TopicMetadata | None:
        return None

    def names(self) -> Iterable[str]:
        return ()

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return None


class _Fail(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def kafka_uuid() -> str:
    """Kafka's Uuid.randomUuid().toString(): 16 random bytes, URL-safe base64, no padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _response(version: int, code: ErrorCode, message: str | None = None, member_id: str | None = None,
              epoch: int = 0, interval: int = 0, assignment: Assignment | None = None) -> Any:
    return ConsumerGroupHeartbeatResponseData(
        version, int(code), message, member_id, epoch, interval,
        None if assignment is None else [(t, sorted(ps)) for t, ps in assignment.items()])


# A waiting answer: (group, records, undo) -> (response, what to do once it is durable)
Answer = Callable[[ConsumerGroup, list[CoordinatorRecord], list[CoordinatorRecord]],
                  tuple[Any, Callable[[], None] | None]]
# The answer when it fails: (error, message) -> response
ErrorAnswer = Callable[[ErrorCode, str | None], Any]


class _Waiter:
    """A request that waits for its group's next target assignment (end of the turn): a
    ConsumerGroupHeartbeat, or a classic member's JoinGroup (classic_members.py)."""

    __slots__ = ("member_id", "records", "undo", "answer", "error", "deferred")

    def __init__(self, member_id: str, records: list[CoordinatorRecord], undo: list[CoordinatorRecord],
                 answer: Answer, error: ErrorAnswer) -> None:
        self.member_id = member_id
        self.records = records
        self.undo = undo
        self.answer = answer
        self.error = error
        self.deferred: Deferred = Deferred()

    def fail(self, code: ErrorCode) -> None:
        self.deferred.complete(self.error(code, None))


class _Timers:
    """Keyed one-shot timers on the coordinator's clock; rescheduling a key only moves its
    deadline (the armed timer re-arms itself), so a heartbeat costs no timer churn."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self._deadlines: dict[tuple, tuple[int, Callable[[], None]]] = {}
        self._armed: dict[tuple, int] = {}

    def schedule(self, key: tuple, delay_ms: int, fn: Callable[[], None]) -> None:
        deadline = self.clock.now_ms() + delay_ms
        self._deadlines[key] = (deadline, fn)
        armed = self._armed.get(key)
        if armed is None or armed > deadline:
            self._arm(key, deadline)

    def _arm(self, key: tuple, deadline: int) -> None:
        self._armed[key] = deadline
        self.clock.call_later(deadline - self.clock.now_ms(), lambda: self._fire(key, deadline))

    def _fire(self, key: tuple, armed_for: int) -> None:
        if self._armed.get(key) != armed_for:
            return  # superseded by an earlier re-arm
        del self._armed[key]
        entry = self._deadlines.get(key)
        if entry is None:
            return
        deadline, fn = entry
        now = self.clock.now_ms()
        if deadline > now:
            self._arm(key, deadline)
            return
        del self._deadlines[key]
        fn()

    def cancel(self, key: tuple) -> None:
        self._deadlines.pop(key, None)

    def __contains__(self, key: tuple) -> bool:
        return key in self._deadlines


class ConsumerGroupProtocol:
    """Runs consumer groups: their requests, timers and records."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self.config = manager.config
        self.clock = manager.clock
        self._groups = manager.groups_by_id
        self.topics: TopicSource = NoTopics()
        self.timers = _Timers(self.clock)
        self.assignor_names = assignors.assignor_names(list(self.config.group_consumer_assignors))
        # set by the coordinator: the current record of a classic group key (for undo), and
        # how to replay any record
        self.classic_record: Callable[[GroupKey], CoordinatorRecord] = lambda k: CoordinatorRecord(k, None)
        self.replay_any: Callable[[CoordinatorRecord], None] = lambda r: None
        # set by the coordinator: conversions to and from classic groups (server/group/migration.py)
        self.migration: GroupMigration | None = None

    # ====================================================================== ConsumerGroupHeartbeat

    def heartbeat(self, req: Any, version: int, client_id: str, client_host: str) -> CoordinatorResult:
        try:
            err = self.manager.validate(req.group_id, "consumer_group_heartbeat")
            if err is ErrorCode.INVALID_GROUP_ID:
                raise _Fail(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
            if err is not None:
                raise _Fail(err)
            self._check_request(req, version)
            epoch = req.member_epoch
            if epoch == LEAVE_GROUP_MEMBER_EPOCH or epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                return self._leave(req, version)
            return self._heartbeat(req, version, client_id, client_host)
        except _Fail as f:
            return CoordinatorResult(response=_response(version, f.code, f.message))
        except FencedMemberEpoch as f:
            return CoordinatorResult(response=_response(version, ErrorCode.FENCED_MEMBER_EPOCH, str(f)))

    def keepalive(self, req: Any, version: int, client_id: str, client_host: str) -> bytes | None:
        """The answer (its body) to the keep-alive of a reconciled member of a settled group,
        which changes nothing but the member's session; None for any other heartbeat."""
        epoch = req.member_epoch
        if (epoch <= 0 or req.topic_partitions is not None or req.subscribed_topic_names is not None
                or req.rebalance_timeout_ms != -1 or req.instance_id is not None or req.rack_id is not None
                or req.server_assignor is not None or (version >= 1 and req.subscribed_topic_regex is not None)):
            return None
        group = self._groups.get(req.group_id)
        if (group.__class__ is not ConsumerGroup or group.group_epoch != epoch or group.assignment_epoch != epoch
                or group.metadata_version != self.topics.changes):
            return None
        member = group.members.get(req.member_id)
        if (member is None or member.member_epoch != epoch or member.state is not MemberState.STABLE
                or member.instance_id is not None or member.client_id != client_id
                or member.client_host != client_host or member.classic is not None):
            return None
        mid = member.member_id
        self.timers.schedule(("session", group.group_id, mid), self.config.group_consumer_session_timeout_ms,
                             lambda: self._fence_expired(group.group_id, mid, "the member session expired."))
        return consumer_group_keepalive_body(version, mid, epoch, self.config.group_consumer_heartbeat_interval_ms)

    def _check_request(self, req: Any, version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        if req.instance_id == "":
            raise _Fail(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id == "":
            raise _Fail(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        epoch = req.member_epoch
        if version >= 1 and not req.member_id:
            raise _Fail(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                raise _Fail(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        elif epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise _Fail(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise _Fail(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            regex = req.subscribed_topic_regex if version >= 1 else None
            if not req.subscribed_topic_names and regex is None:
                raise _Fail(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be "
                                                       "set in first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not req.member_id:
                raise _Fail(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
            if req.instance_id is None:
                raise _Fail(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
        else:
            raise _Fail(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.assignor_names:
            raise _Fail(ErrorCode.UNSUPPORTED_ASSIGNOR,
                        f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                        f"{', '.join(self.assignor_names)}.")
        regex = req.subscribed_topic_regex if version >= 1 else None
        if regex is not None:
            try:
                compile_regex(regex)
            except ValueError as e:
                raise _Fail(ErrorCode.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {regex} is invalid: {e}") \
                    from None

    # ---- regular heartbeat / join ----

    def _heartbeat(self, req: Any, version: int, client_id: str, client_host: str) -> CoordinatorResult:
        gid = req.group_id
        epoch = req.member_epoch
        instance_id = req.instance_id
        owned = None if req.topic_partitions is None else [(tp.topic_id, tp.partitions) for tp in req.topic_partitions]
        records: list[CoordinatorRecord] = []
        undo: list[CoordinatorRecord] = []
        group = self._consumer_group(gid, create=epoch == 0, records=records, undo=undo)
        member_id = req.member_id or kafka_uuid()
        if (len(group.members) >= self.config.group_consumer_max_size
                and (not req.member_id or req.member_id not in group.members)):
            raise _Fail(ErrorCode.GROUP_MAX_SIZE_REACHED,
                        f"The consumer group has reached its maximum capacity of "
                        f"{self.config.group_consumer_max_size} members.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if epoch != 0:
                    raise _Fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
                member = ConsumerGroupMember(member_id)
                log.info("[GroupId %s] Member %s joins the consumer group using the consumer protocol.",
                         gid, member_id)
            else:
                self._check_epoch(member, epoch, owned)
        else:
            member = self._static_member(group, member_id, epoch, instance_id, owned, records, undo)
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
        # a new regex is resolved after this turn's assignment, as Kafka resolves them
        # asynchronously: the member first gets its named topics, the matches later
        new_regex = updated.subscribed_topic_regex is not None and updated.subscribed_topic_regex not in group.regexes
        self.update_member(group, old, updated, records, undo)
        full = epoch == 0 or (req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None
                              and owned is not None)
        self._schedule_session(gid, member_id)

        def answer(g: ConsumerGroup, records: list[CoordinatorRecord],
                   undo: list[CoordinatorRecord]) -> tuple[Any, None]:
            return self._reconcile_and_answer(g, member_id, old, owned, full, records, undo, version), None

        result = self.answer_after_assignment(group, member_id, records, undo, answer,
                                              lambda code, message: _response(version, code, message))
        if new_regex:  # after this turn's assignment
            self._resolve_regexes_later(group)
        return result

    def answer_after_assignment(self, group: ConsumerGroup, member_id: str, records: list[CoordinatorRecord],
                                undo: list[CoordinatorRecord], answer: Answer,
                                error: ErrorAnswer) -> CoordinatorResult:
        """Answer now, or once the group's new target assignment is computed when the group
        epoch is ahead of it: the assignment runs once at the end of this turn for every
        request of the group that needs it."""
        if group.group_epoch > group.assignment_epoch:
            w = _Waiter(member_id, records, undo, answer, error)
            group.awaiting_assignment.append(w)
            self._schedule_assignment(group)
            return CoordinatorResult(response=w.deferred)
        try:
            response, after = answer(group, records, undo)
        except FencedMemberEpoch as e:
            self._undoer(undo)()
            return CoordinatorResult(response=error(ErrorCode.FENCED_MEMBER_EPOCH, str(e)))
        return self._result(records, undo, response, after, error)

    def _schedule_assignment(self, group: ConsumerGroup) -> None:
        if not group.assignment_scheduled:
            group.assignment_scheduled = True
            self.manager.at_end_of_turn(lambda: self._assign(group))

    def update_member(self, group: ConsumerGroup, old: ConsumerGroupMember | None, updated: ConsumerGroupMember,
                      records: list[CoordinatorRecord], undo: list[CoordinatorRecord]) -> None:
        """Step 1 of a heartbeat or a classic join (Kafka's hasMemberSubscriptionChanged and
        what follows): the member's record when it changed; the group epoch bumped when its
        subscription changed or the subscribed topics' metadata did."""
        gid = group.group_id
        bump = False
        if old is None or not updated.same_metadata(old):
            self._apply(records, undo, [CoordinatorRecord(ConsumerGroupMemberMetadataKey(gid, updated.member_id),
                                                          updated.metadata_value())])
            if old is None or updated.subscribed_topic_names != old.subscribed_topic_names \
                    or updated.subscribed_topic_regex != old.subscribed_topic_regex:
                bump = True
        if bump or group.metadata_version != self.topics.changes:
            bump = self._refresh_metadata(group, records, undo) or bump
        if bump:
            self._apply(records, undo, [CoordinatorRecord(ConsumerGroupMetadataKey(gid),
                                                          ConsumerGroupMetadataValue(group.group_epoch + 1))])
            log.info("[GroupId %s] Bumped group epoch to %d.", gid, group.group_epoch)

    def _check_epoch(self, member: ConsumerGroupMember, epoch: int, owned: Any) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
        if epoch > member.member_epoch:
            raise _Fail(ErrorCode.FENCED_MEMBER_EPOCH,
                        f"The consumer group member has a greater member epoch ({epoch}) than the one known by "
                        f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                        "partitions and rejoin.")
        if epoch < member.member_epoch:
            # the response with the bumped epoch may have been lost: accept the previous
            # epoch while the member owns only what it still has
            if epoch != member.previous_member_epoch or not _subset(owned, member.assigned):
                raise _Fail(ErrorCode.FENCED_MEMBER_EPOCH,
                            f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
                            f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                            "partitions and rejoin.")

    def _static_member(self, group: ConsumerGroup, member_id: str, epoch: int, instance_id: str, owned: Any,
                       records: list[CoordinatorRecord], undo: list[CoordinatorRecord]) -> ConsumerGroupMember:
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
                raise _Fail(ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {existing.member_id} with instance id {instance_id} cannot be replaced "
                            "because it has not left the group.")
            return self.replace_static_member(group, existing, member_id, records, undo)
        if existing is None:
            raise _Fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise _Fail(ErrorCode.FENCED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {instance_id} was fenced by member "
                        f"{existing.member_id}.")
        self._check_epoch(existing, epoch, owned)
        return existing

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
        self._apply(records, undo, self._removal_records(gid, existing.member_id) + [
            CoordinatorRecord(ConsumerGroupMemberMetadataKey(gid, member_id), new.metadata_value()),
            CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(gid, member_id),
                              ConsumerGroupTargetAssignmentMemberValue(target)),
            CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), new.assignment_value()),
        ])
        self.cancel_member_timers(gid, existing.member_id)
        log.info("[GroupId %s] Static member with instance id %s re-joins the consumer group. Created a new "
                 "member %s to replace the existing member %s.", gid, instance_id, member_id, existing.member_id)
        return group.members[member_id]

    def _reconcile_and_answer(self, group: ConsumerGroup, member_id: str, old: ConsumerGroupMember | None,
                              owned: Any, full: bool, records: list[CoordinatorRecord],
                              undo: list[CoordinatorRecord], version: int) -> Any:
        updated = self.reconcile_member(group, member_id, owned, records, undo)
        assignment = None
        if full or old is None or old.assigned != updated.assigned:
            assignment = updated.assigned
        return _response(version, ErrorCode.NONE, None, member_id, updated.member_epoch,
                         self.config.group_consumer_heartbeat_interval_ms, assignment)

    def reconcile_member(self, group: ConsumerGroup, member_id: str, owned: Any, records: list[CoordinatorRecord],
                         undo: list[CoordinatorRecord]) -> ConsumerGroupMember:
        """The member's next step towards its target assignment, applied (Kafka's maybeReconcile)."""
        member = group.members[member_id]
        target_epoch = group.assignment_epoch
        if member.is_reconciled_to(target_epoch):
            return member
        target = group.target_assignment.get(member_id, {})
        updated = reconcile(member, target_epoch, target, group.partition_epoch, owned)
        if not updated.same_assignment_state(member):
            self._apply(records, undo, [CoordinatorRecord(
                ConsumerGroupCurrentMemberAssignmentKey(group.group_id, member_id), updated.assignment_value())])
            log.debug("[GroupId %s] Member %s new assignment state: epoch=%d, previousEpoch=%d, state=%s",
                      group.group_id, member_id, updated.member_epoch, updated.previous_member_epoch,
                      updated.state.name)
            if updated.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group.group_id, member_id, updated.member_epoch,
                                                 updated.rebalance_timeout_ms)
            else:
                self.timers.cancel(("rebalance", group.group_id, member_id))
        return updated

    # ---- the target assignment ----

    def _assign(self, group: ConsumerGroup) -> None:
        """End of the turn: one new target assignment, then every waiting heartbeat answered.
        One write holds, in the order they were applied, what the waiting heartbeats changed,
        the new target assignment and each member's reconciliation; every answer waits for it."""
        group.assignment_scheduled = False
        waiting, group.awaiting_assignment = group.awaiting_assignment, []
        if group.dead or self._groups.get(group.group_id) is not group:
            for w in waiting:  # deleted or unloaded meanwhile: the log is the truth now
                w.fail(ErrorCode.NOT_COORDINATOR)
            return
        records: list[CoordinatorRecord] = [r for w in waiting for r in w.records]
        undo: list[CoordinatorRecord] = [r for w in waiting for r in w.undo]
        if group.group_epoch > group.assignment_epoch:
            try:
                self._update_target_assignment(group, records, undo)
            except assignors.PartitionAssignorError as e:
                log.error("[GroupId %s] Failed to compute a new target assignment for epoch %d: %s.",
                          group.group_id, group.group_epoch, e)
                # as Kafka, the heartbeats fail and what they changed is dropped
                self._undoer(undo)()
                for w in waiting:
                    w.fail(ErrorCode.UNKNOWN_SERVER_ERROR)
                return
        answers: list[tuple[_Waiter, Any, Callable[[], None] | None]] = []
        for w in waiting:
            if w.member_id not in group.members:
                answers.append((w, w.error(ErrorCode.UNKNOWN_MEMBER_ID, None), None))
                continue
            try:
                response, after = w.answer(group, records, undo)
            except FencedMemberEpoch as e:
                response, after = w.error(ErrorCode.FENCED_MEMBER_EPOCH, str(e)), None
            answers.append((w, response, after))
        if not records:
            for w, response, after in answers:
                if after is not None:
                    after()
                w.deferred.complete(response)
            return

        def on_appended(error: ErrorCode | None) -> None:
            for w, response, after in answers:
                if error is None and after is not None:
                    after()
                w.deferred.complete(response if error is None else w.error(error, None))

        self.manager.emit(CoordinatorResult(records=records, on_appended=on_appended, applied=True,
                                            undo=self._undoer(undo)))

    def _update_target_assignment(self, group: ConsumerGroup, records: list[CoordinatorRecord],
                                  undo: list[CoordinatorRecord]) -> None:
        name = group.preferred_assignor() or self.assignor_names[0]
        ids = {m.topic_id: m for m in group.subscription_metadata.values()}
        by_name = group.subscription_metadata
        members: dict[str, assignors.MemberSpec] = {}
        topic_sets = set()
        for mid, m in group.members.items():
            topics = frozenset(by_name[n].topic_id for n in group.member_topics(m) if n in by_name)
            topic_sets.add(topics)
            members[mid] = assignors.MemberSpec(topics, m.instance_id, group.target_assignment.get(mid, {}))
        spec = assignors.GroupSpec(members, {t: m.num_partitions for t, m in ids.items()},
                                   homogeneous=len(topic_sets) <= 1)
        new = assignors.ASSIGNORS[name](spec)
        gid = group.group_id
        out = []
        for mid in group.members:
            a = new.get(mid, {})
            if group.target_assignment.get(mid) != a:
                out.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(gid, mid),
                                             ConsumerGroupTargetAssignmentMemberValue(a)))
        out.append(CoordinatorRecord(ConsumerGroupTargetAssignmentMetadataKey(gid),
                                     ConsumerGroupTargetAssignmentMetadataValue(group.group_epoch)))
        self._apply(records, undo, out)
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
                 gid, group.group_epoch, name)

    # ---- subscription metadata and regexes ----

    def _refresh_metadata(self, group: ConsumerGroup, records: list[CoordinatorRecord],
                          undo: list[CoordinatorRecord]) -> bool:
        """Recompute the subscribed topics' metadata; True (and a record) when it changed."""
        topics = self.topics
        if group.metadata_version != topics.changes:
            group.metadata_version = topics.changes
            for regex in list(group.regex_counts):
                if regex in group.regexes:  # new ones resolve after the turn (_resolve_regexes_later)
                    self._maybe_resolve_regex(group, regex, records, undo, force=True)
        metadata = {}
        for name in sorted(group.subscribed_topic_names()):
            m = topics.metadata(name)
            if m is not None:
                metadata[name] = m
        if metadata == group.subscription_metadata:
            return False
        self._apply(records, undo, [CoordinatorRecord(ConsumerGroupPartitionMetadataKey(group.group_id),
                                                      ConsumerGroupPartitionMetadataValue(metadata))])
        return True

    def _resolve_regexes_later(self, group: ConsumerGroup) -> None:
        if group.regex_resolution_scheduled:
            return
        group.regex_resolution_scheduled = True

        def resolve() -> None:
            group.regex_resolution_scheduled = False
            if group.dead or self._groups.get(group.group_id) is not group:
                return
            records: list[CoordinatorRecord] = []
            undo: list[CoordinatorRecord] = []
            for regex in list(group.regex_counts):
                if regex not in group.regexes:
                    self._maybe_resolve_regex(group, regex, records, undo)
            if records and self._refresh_metadata(group, records, undo):
                self._apply(records, undo, [CoordinatorRecord(
                    ConsumerGroupMetadataKey(group.group_id), ConsumerGroupMetadataValue(group.group_epoch + 1))])
                log.info("[GroupId %s] Bumped group epoch to %d: a subscription regex resolved.",
                         group.group_id, group.group_epoch)
            self._emit(records, undo)

        self.manager.at_end_of_turn(resolve)

    def _maybe_resolve_regex(self, group: ConsumerGroup, regex: str, records: list[CoordinatorRecord],
                             undo: list[CoordinatorRecord], force: bool = False) -> None:
        """The topics a subscription regex matches (full match, RE2 syntax, internal topics
        never), stored as a ConsumerGroupRegularExpression record when they changed."""
        current = group.regexes.get(regex)
        if current is not None and not force and current.version == self.topics.changes:
            return
        pattern = compile_regex(regex)
        matched = tuple(sorted(n for n in self.topics.names() if not n.startswith("__") and pattern.fullmatch(n)))
        if current is not None and current.topics == matched:
            return
        self._apply(records, undo, [CoordinatorRecord(
            ConsumerGroupRegularExpressionKey(group.group_id, regex),
            ConsumerGroupRegularExpressionValue(matched, self.topics.changes, self.clock.now_ms()))])

    # ---- leaving and fencing ----

    def _leave(self, req: Any, version: int) -> CoordinatorResult:
        gid, member_id, epoch, instance_id = req.group_id, req.member_id, req.member_epoch, req.instance_id
        group = self._groups.get(gid)
        if not isinstance(group, ConsumerGroup):
            raise _Fail(ErrorCode.UNKNOWN_MEMBER_ID if group is None else ErrorCode.GROUP_ID_NOT_FOUND,
                        f"Member {member_id} is not a member of group {gid}.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise _Fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {gid}.")
            log.info("[GroupId %s] Member %s left the consumer group.", gid, member_id)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise _Fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise _Fail(ErrorCode.FENCED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {instance_id} was fenced by member "
                            f"{member.member_id}.")
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # a static member leaving for a while keeps its place and its target assignment
                leaving = member.evolve(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
                records: list[CoordinatorRecord] = []
                undo: list[CoordinatorRecord] = []
                self._apply(records, undo, [CoordinatorRecord(
                    ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), leaving.assignment_value())])
                log.info("[GroupId %s] Static Member %s with instance id %s temporarily left the consumer group.",
                         gid, member_id, instance_id)
                return self._result(records, undo, _response(version, ErrorCode.NONE, None, member_id,
                                                             LEAVE_GROUP_STATIC_MEMBER_EPOCH))
            log.info("[GroupId %s] Static Member %s with instance id %s left the consumer group.",
                     gid, member_id, instance_id)
        records, undo = [], []
        self._fence(group, member.member_id, records, undo)
        return self._result(records, undo, _response(version, ErrorCode.NONE, None, member_id, epoch))

    def _removal_records(self, gid: str, member_id: str) -> list[CoordinatorRecord]:
        """Kafka's removeMember: the order matters."""
        return [CoordinatorRecord(ConsumerGroupCurrentMemberAssignmentKey(gid, member_id), None),
                CoordinatorRecord(ConsumerGroupTargetAssignmentMemberKey(gid, member_id), None),
                CoordinatorRecord(ConsumerGroupMemberMetadataKey(gid, member_id), None)]

    def _fence(self, group: ConsumerGroup, member_id: str, records: list[CoordinatorRecord],
               undo: list[CoordinatorRecord]) -> None:
        """Remove the member and bump the group epoch (Kafka's consumerGroupFenceMember)."""
        gid = group.group_id
        member = group.members.get(member_id)
        migration = self.migration
        if member is not None and migration is not None and migration.can_downgrade_after_fencing(group, member_id):
            try:
                migration.downgrade(group, member_id, records, undo)
                self.cancel_member_timers(gid, member_id)
                return
            except MigrationError as e:
                log.warning("[GroupId %s] Cannot downgrade the consumer group to a classic group: %s", gid, e)
        self._apply(records, undo, self._removal_records(gid, member_id))
        for regex in list(group.regexes):
            if regex not in group.regex_counts:  # nobody subscribes with it any more
                self._apply(records, undo, [CoordinatorRecord(ConsumerGroupRegularExpressionKey(gid, regex), None)])
        self._refresh_metadata(group, records, undo)
        self._apply(records, undo, [CoordinatorRecord(ConsumerGroupMetadataKey(gid),
                                                      ConsumerGroupMetadataValue(group.group_epoch + 1))])
        self.cancel_member_timers(gid, member_id)
        if member is not None and group.group_epoch > group.assignment_epoch and group.members:
            self._schedule_assignment(group)

    def _fence_expired(self, gid: str, member_id: str, reason: str, epoch: int | None = None) -> None:
        group = self._groups.get(gid)
        if not isinstance(group, ConsumerGroup) or group.dead:
            return
        member = group.members.get(member_id)
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("[GroupId %s] Member %s fenced from the group because %s", gid, member_id, reason)
        records: list[CoordinatorRecord] = []
        undo: list[CoordinatorRecord] = []
        self._fence(group, member_id, records, undo)
        self._emit(records, undo)

    def _schedule_session(self, gid: str, member_id: str, timeout_ms: int | None = None) -> None:
        self.timers.schedule(("session", gid, member_id),
                             self.config.group_consumer_session_timeout_ms if timeout_ms is None else timeout_ms,
                             lambda: self._fence_expired(gid, member_id, "the member session expired."))

    def schedule_session(self, gid: str, member_id: str) -> None:
        """(Re)start the member's session: a classic member's own session timeout, else
        group.consumer.session.timeout.ms."""
        group = self._groups.get(gid)
        member = group.members.get(member_id) if isinstance(group, ConsumerGroup) else None
        classic = None if member is None else member.classic
        self._schedule_session(gid, member_id, None if classic is None else classic.session_timeout_ms)

    def schedule_once(self, kind: str, gid: str, member_id: str, timeout_ms: int, reason: str) -> None:
        """A timer that fences the member when it fires, unless one of its kind is armed."""
        if (kind, gid, member_id) not in self.timers:
            self.timers.schedule((kind, gid, member_id), max(timeout_ms, 0),
                                 lambda: self._fence_expired(gid, member_id, reason))

    def schedule_fencing(self, kind: str, gid: str, member_id: str, timeout_ms: int, reason: str) -> None:
        self.timers.schedule((kind, gid, member_id), max(timeout_ms, 0),
                             lambda: self._fence_expired(gid, member_id, reason))

    def cancel_member_timers(self, gid: str, member_id: str, keep_session: bool = False) -> None:
        """Kafka's cancelTimers: the session, rebalance, and a classic member's join and sync
        timeouts. A session timer left behind fences nothing once the group is another type."""
        timers = self.timers
        if not keep_session:
            timers.cancel(("session", gid, member_id))
        timers.cancel(("rebalance", gid, member_id))
        timers.cancel(("join", gid, member_id))
        timers.cancel(("sync", gid, member_id))

    def _schedule_rebalance_timeout(self, gid: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        self.timers.schedule(
            ("rebalance", gid, member_id), max(timeout_ms, 0),
            lambda: self._fence_expired(gid, member_id, f"it failed to transition from epoch {epoch} within "
                                                        f"{timeout_ms}ms.", epoch))

    # ---- groups ----

    def _consumer_group(self, gid: str, create: bool, records: list[CoordinatorRecord],
                        undo: list[CoordinatorRecord]) -> ConsumerGroup:
        group = self._groups.get(gid)
        if isinstance(group, ConsumerGroup):
            if group.dead:  # being deleted: its tombstones are on their way
                raise _Fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return group
        if not create:
            if group is None or group.is_dead():
                raise _Fail(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {gid} has no member of that id.")
            raise _Fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
        if group is not None and not group.is_dead():
            if not group.is_empty() or group.num_members():
                migration = self.migration
                if migration is None or not migration.can_upgrade(group):
                    raise _Fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group.")
                try:
                    return migration.upgrade(group, records, undo)
                except MigrationError as e:
                    log.warning("[GroupId %s] Cannot upgrade the classic group to a consumer group: %s", gid, e)
                    raise _Fail(ErrorCode.GROUP_ID_NOT_FOUND,
                                f"Cannot upgrade the classic group {gid} to consumer group because the embedded "
                                "consumer protocol is malformed.") from None
            # an Empty classic group becomes a consumer group; its offsets stay
            log.info("[GroupId %s] Converting the empty classic group to a consumer group.", gid)
            self._apply(records, undo, group.tombstones())
        new = ConsumerGroup(gid)
        self.manager.put_group(new)
        # the group's creation is undone last: its tombstone removes it once its members are gone
        undo.append(CoordinatorRecord(ConsumerGroupMetadataKey(gid), None))
        return new

    # ====================================================================== records

    def current_record(self, key: Any) -> CoordinatorRecord:
        """The record that says what memory holds now for `key` (a tombstone when nothing):
        replaying it puts memory back, which is how a failed append is undone."""
        if type(key) is GroupKey:
            return self.classic_record(key)
        group = self._groups.get(key.group)
        if not isinstance(group, ConsumerGroup):
            return CoordinatorRecord(key, None)
        t = type(key)
        value: Any = None
        if t is ConsumerGroupMetadataKey:
            value = ConsumerGroupMetadataValue(group.group_epoch)
        elif t is ConsumerGroupPartitionMetadataKey:
            value = ConsumerGroupPartitionMetadataValue(dict(group.subscription_metadata))
        elif t is ConsumerGroupMemberMetadataKey:
            m = group.members.get(key.member_id)
            value = None if m is None else m.metadata_value()
        elif t is ConsumerGroupTargetAssignmentMetadataKey:
            value = None if group.assignment_epoch == -1 else \
                ConsumerGroupTargetAssignmentMetadataValue(group.assignment_epoch)
        elif t is ConsumerGroupTargetAssignmentMemberKey:
            a = group.target_assignment.get(key.member_id)
            value = None if a is None else ConsumerGroupTargetAssignmentMemberValue(a)
        elif t is ConsumerGroupCurrentMemberAssignmentKey:
            m = group.members.get(key.member_id)
            value = None if m is None else m.assignment_value()
        elif t is ConsumerGroupRegularExpressionKey:
            value = group.regexes.get(key.regex)
        return CoordinatorRecord(key, value)

    def apply(self, records: list[CoordinatorRecord], undo: list[CoordinatorRecord],
              new: list[CoordinatorRecord]) -> None:
        """Apply `new` now (replayed as made), add it to `records`, and what it replaced to `undo`."""
        self._apply(records, undo, new)

    def _apply(self, records: list[CoordinatorRecord], undo: list[CoordinatorRecord],
               new: list[CoordinatorRecord]) -> None:
        for r in new:
            undo.append(self.current_record(r.key))
            self.replay_any(r)
            records.append(r)

    def _result(self, records: list[CoordinatorRecord], undo: list[CoordinatorRecord], response: Any,
                after: Callable[[], None] | None = None, error: ErrorAnswer | None = None) -> CoordinatorResult:
        """The answer once `records` (already applied) are durable; `after` runs then (timers
        that only a durable change may start); a failed append answers with `error`."""
        if not records:
            if after is not None:
                after()
            return CoordinatorResult(response=response)
        if error is None:
            version = response.API_VERSION

            def error(code: ErrorCode, message: str | None) -> Any:
                return _response(version, code, message)

        def on_appended(code: ErrorCode | None) -> Any:
            if code is not None:
                return error(code, None)
            if after is not None:
                after()
            return response

        return CoordinatorResult(records=records, on_appended=on_appended, applied=True,
                                 undo=self._undoer(undo))

    def _undoer(self, undo: list[CoordinatorRecord]) -> Callable[[], None]:
        def run() -> None:
            for r in reversed(undo):
                self.replay_any(r)

        return run

    def _emit(self, records: list[CoordinatorRecord], undo: list[CoordinatorRecord]) -> None:
        if not records:
            return

        def on_appended(error: ErrorCode | None) -> None:
            if error is not None:
                log.warning("Failed to write %d consumer group records: %s", len(records), error.name)

        self.manager.emit(CoordinatorResult(records=records, on_appended=on_appended, applied=True,
                                            undo=self._undoer(undo)))

    def replay(self, key: Any, value: Any) -> None:
        t = type(key)
        gid = key.group
        group = self._groups.get(gid)
        if not isinstance(group, ConsumerGroup):
            if value is None:
                return  # a tombstone for what is not there
            if group is not None and not group.is_dead() and group.num_members():
                log.warning("Skipping %s of %s, a non-empty %s group", t.__name__, gid, group.TYPE)
                return
            # offsets-only (Empty) classic groups give way, as Kafka's simple groups do
            group = ConsumerGroup(gid)
            self.manager.put_group(group)
        if t is ConsumerGroupMetadataKey:
            if value is None:
                if group.members:
                    log.warning("Tombstone of consumer group %s while it has %d members", gid, len(group.members))
                    return
                self.manager.remove_group(gid)
                group.dead = True
                return
            group.group_epoch = value.epoch
        elif t is ConsumerGroupPartitionMetadataKey:
            group.subscription_metadata = {} if value is None else dict(value.topics)
        elif t is ConsumerGroupMemberMetadataKey:
            if value is None:
                group.remove_member(key.member_id)
            else:
                old = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
                group.update_member(old.with_metadata(value))
        elif t is ConsumerGroupTargetAssignmentMetadataKey:
            group.assignment_epoch = -1 if value is None else value.assignment_epoch
        elif t is ConsumerGroupTargetAssignmentMemberKey:
            if value is None:
                group.target_assignment.pop(key.member_id, None)
            else:
                group.target_assignment[key.member_id] = value.partitions
        elif t is ConsumerGroupCurrentMemberAssignmentKey:
            old = group.members.get(key.member_id)
            if value is None:
                if old is not None:
                    group.update_member(old.with_epoch(LEAVE_GROUP_MEMBER_EPOCH, old.state, {}, {}))
            else:
                group.update_member((old or ConsumerGroupMember(key.member_id)).with_assignment(value))
        elif t is ConsumerGroupRegularExpressionKey:
            if value is None:
                group.regexes.pop(key.regex, None)
            else:
                group.regexes[key.regex] = value
        group.refresh_state()

    def on_group_loaded(self, group: ConsumerGroup) -> None:
        log.info("Loaded consumer group %s with %d members.", group.group_id, len(group.members))
        for mid, m in group.members.items():
            self.schedule_session(group.group_id, mid)
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group.group_id, mid, m.member_epoch, m.rebalance_timeout_ms)

    # ====================================================================== ConsumerGroupDescribe

    def describe(self, req: Any, version: int) -> CoordinatorResult:
        out = []
        for gid in req.group_ids:
            err = self.manager.validate(gid, "consumer_group_describe")
            if err is ErrorCode.INVALID_GROUP_ID:
                err = ErrorCode.INVALID_GROUP_ID
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
        def assignment(a: Assignment) -> Any:
            return _DAssignment(topic_partitions=[
                _DTP(topic_id=t, topic_name=self.topics.name_of(t) or "", partitions=sorted(ps))
                for t, ps in a.items()])

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

    # what the units beside this one (classic_members.py, migration.py, control.py) build on
    result = _result
    refresh_metadata = _refresh_metadata
    removal_records = _removal_records
    schedule_assignment = _schedule_assignment
    emit = _emit


def _subset(owned: Any, assigned: Assignment) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned:
        have = assigned.get(topic_id)
        if have is None:
            if partitions:
                return False
            continue
        if any(p not in have for p in partitions):
            return False
    return True


STATES = [s.value for s in ConsumerGroupState]
