"""The share group coordinator: ShareGroupHeartbeat (v1) and ShareGroupDescribe (v1), the share
group members' sessions, and the ShareGroup* records' replay and loading (KIP-932).

A heartbeat follows Kafka's GroupMetadataManager.shareGroupHeartbeat: (1) the member (its id
chosen by the client, joining with epoch 0) is created or updated, and the group epoch bumped
when a subscription or the subscribed topics' metadata changed; (2) when the group epoch is
ahead of the target assignment epoch, the `simple` assignor (assignor.py) computes a new target
for every member; (3) the member takes its target at once (share members revoke nothing: a
partition may be read by several members) and is answered with its epoch and, when it joined
or its assignment changed, its assignment. A member leaves with epoch -1 or when its session
(group.share.session.timeout.ms) runs out: its records are deleted and the group epoch bumped,
and the others get the new target at their next heartbeat.

Each step's records are applied as they are made (so the next request sees them); the answer
waits until they are durable, and a failed append undoes them. The share-partition side learns
of members that left through the `on_member_left` callables (ports.py), once that is durable,
and reads assignments through assignment().
"""
from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kcoord.protocol.coordinator_records import CoordinatorRecord
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_messages import ShareGroupDescribeResponse, ShareGroupHeartbeatResponse
from kcoord.protocol.share_records import (
    Assignment,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupMemberMetadataKey,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
)
from kcoord.server.group.config import GroupConfig
from kcoord.server.group.consumer.timers import Timers
from kcoord.server.group.consumer.topics import GroupTopics
from kcoord.server.group.result import CoordinatorResult
from kcoord.server.group.share import assignor
from kcoord.server.group.share.group import ShareGroup
from kcoord.server.group.share.member import LEAVE_GROUP_MEMBER_EPOCH, STABLE, ShareGroupMember
from kcoord.server.group.share.ports import MemberLeft
from kcoord.server.group.share.records import (
    KEY_TYPES,
    ShareGroupRecords,
    removal_records,
    state_metadata_value,
)

log = logging.getLogger("kcoord.group")

SESSION_EXPIRED = "the member session expired."
EXPIRY_RETRY_MS = 500  # after a failed write of a member's expiry (undone), the expiry is tried again
_HB = ShareGroupHeartbeatResponse
_Described = ShareGroupDescribeResponse.DescribedGroup
_DMember = _Described.Member
_DAssignment = _DMember.Assignment
_DTP = _DAssignment.TopicPartitions
_HBAssignment = _HB.Assignment
_HBTP = _HBAssignment.TopicPartitions
# READ(3), DELETE(6), DESCRIBE(8): a group's operations when no authorizer says otherwise
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
_OMITTED = -2**31


class Refused(Exception):
    """The heartbeat is refused with `code` and Kafka's message; nothing changed."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def heartbeat_response(code: ErrorCode, message: str | None = None, member_id: str | None = None,
                       epoch: int = 0, interval: int = 0, assignment: Assignment | None = None) -> Any:
    a = None if assignment is None else _HBAssignment(topic_partitions=[
        _HBTP(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))])
    return _HB(version=1, throttle_time_ms=0, error_code=int(code), error_message=message, member_id=member_id,
               member_epoch=epoch, heartbeat_interval_ms=interval, assignment=a)


class _Step:
    """The records one request (or timer) makes, applied as made, and what undoes them."""

    def __init__(self, records: ShareGroupRecords) -> None:
        self._records = records
        self.records: list[CoordinatorRecord] = []
        self.undo: list[CoordinatorRecord | Callable[[], None]] = []

    def apply(self, record: CoordinatorRecord) -> None:
        self.undo.append(self._records.current_record(record.key))
        self._records.replay(record.key, record.value)
        self.records.append(record)

    def on_undo(self, fn: Callable[[], None]) -> None:
        self.undo.append(fn)

    def undoer(self) -> Callable[[], None]:
        def run() -> None:
            for r in reversed(self.undo):
                if isinstance(r, CoordinatorRecord):
                    self._records.replay(r.key, r.value)
                else:
                    r()

        return run


class ShareGroupCoordinator:
    """Runs share groups. `groups`: the group metadata manager's table of groups of every type
    (with put_group, remove_group, validate and emit: server/group/group_manager.py); `topics`:
    the broker's topics; `on_member_left`: called with (group id, member id) once a member's
    leaving is durable."""

    def __init__(self, manager: Any, config: GroupConfig, clock: Any, topics: GroupTopics,
                 on_member_left: Sequence[MemberLeft] = ()) -> None:
        self.manager = manager
        self.config = config
        self.topics = topics
        self._groups: dict[str, Any] = manager.groups_by_id
        self.records = ShareGroupRecords(self._groups, manager.put_group, manager.remove_group)
        self.replay = self.records.replay  # (key, value)
        self.key_types = KEY_TYPES
        self.timers = Timers(clock)
        self.on_member_left = on_member_left

    # ====================================================================== ports

    def assignment(self, group_id: str, member_id: str) -> set[tuple[uuid.UUID, int]] | None:
        group = self._groups.get(group_id)
        if group.__class__ is not ShareGroup or group.dead:
            return None
        member = group.members.get(member_id)
        return None if member is None else {(t, p) for t, ps in member.assigned.items() for p in ps}

    def members(self, group_id: str) -> int | None:
        """How many members the share group `group_id` has; None when there is no such share group."""
        group = self._groups.get(group_id)
        if group.__class__ is not ShareGroup or group.dead:
            return None
        return len(group.members)

    def state_partitions(self, group_id: str) -> set[tuple[uuid.UUID, int]]:
        """The (topic id, partition) pairs whose share state the group has initialized
        (ShareGroupStatePartitionMetadata); empty when there is no such share group."""
        group = self._groups.get(group_id)
        if group.__class__ is not ShareGroup or group.dead:
            return set()
        return {(t, p) for t, (_name, ps) in group.initialized.items() for p in ps}

    def _left(self, gid: str, member_id: str) -> None:
        for fn in self.on_member_left:
            try:
                fn(gid, member_id)
            except Exception:  # noqa: BLE001 - one listener's failure must not stop the others
                log.exception("[GroupId %s] on_member_left failed for member %s", gid, member_id)

    # ====================================================================== ShareGroupHeartbeat

    def heartbeat(self, req: Any, version: int, client_id: str, client_host: str) -> CoordinatorResult:
        try:
            self._check(req)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(req)
            return self._heartbeat(req, client_id, client_host)
        except Refused as r:
            return CoordinatorResult(response=heartbeat_response(r.code, r.message))

    def _check(self, req: Any) -> None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid, then the group id's partition."""
        if not req.group_id:
            raise Refused(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if req.rack_id is not None and not req.rack_id:
            raise Refused(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
        if not req.member_id:
            raise Refused(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        epoch = req.member_epoch
        if epoch == 0:
            if not req.subscribed_topic_names:
                raise Refused(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        elif epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise Refused(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
        err = self.manager.validate(req.group_id, "share_group_heartbeat")
        if err is not None:
            raise Refused(err)

    def _share_group(self, gid: str, create: bool) -> ShareGroup | None:
        """The share group `gid`; None when it is to be created (`create`)."""
        group = self._groups.get(gid)
        if group is not None and not group.is_dead() and group.__class__ is not ShareGroup:
            raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
        if group is not None and group.__class__ is ShareGroup:
            if group.dead:  # being deleted: its tombstones are on their way
                raise Refused(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            return group
        if not create:
            raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.")
        return None

    def _heartbeat(self, req: Any, client_id: str, client_host: str) -> CoordinatorResult:
        gid, mid, epoch = req.group_id, req.member_id, req.member_epoch
        group = self._share_group(gid, create=epoch == 0)
        members = {} if group is None else group.members
        max_size = self.config.group_share_max_size
        if len(members) >= max_size and mid not in members:
            raise Refused(ErrorCode.GROUP_MAX_SIZE_REACHED,
                          f"The share group has reached its maximum capacity of {max_size} members.")
        member = members.get(mid)
        if member is None:
            if epoch != 0:
                raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
            member = ShareGroupMember(mid)
            log.info("[GroupId %s] Member %s joins the share group using the share protocol.", gid, mid)
        elif epoch > member.member_epoch or (0 < epoch < member.member_epoch and epoch != member.previous_member_epoch):
            raise Refused(ErrorCode.FENCED_MEMBER_EPOCH,
                          f"The share group member has a {'greater' if epoch > member.member_epoch else 'smaller'} "
                          f"member epoch ({epoch}) than the one known by the group coordinator "
                          f"({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        step = _Step(self.records)
        if group is None:
            # a new group: undone (after its members' records) by its tombstone
            step.undo.append(CoordinatorRecord(ShareGroupMetadataKey(gid), None))
            group = ShareGroup(gid)
            self.manager.put_group(group)
        # 1. the member, and the group epoch
        names = req.subscribed_topic_names
        updated = dataclasses.replace(
            member, rack_id=member.rack_id if req.rack_id is None else req.rack_id, client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=member.subscribed_topic_names if names is None else tuple(sorted(set(names))))
        new = mid not in group.members
        if new or updated.metadata_value() != member.metadata_value():
            step.apply(CoordinatorRecord(ShareGroupMemberMetadataKey(gid, mid), updated.metadata_value()))
        bump = new or updated.subscribed_topic_names != member.subscribed_topic_names
        if self._refresh_metadata(group, step) or bump:
            step.apply(CoordinatorRecord(ShareGroupMetadataKey(gid), ShareGroupMetadataValue(group.group_epoch + 1)))
            log.info("[GroupId %s] Bumped group epoch to %d.", gid, group.group_epoch)
        # 2. the target assignment
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, step)
        # 3. the member takes its target
        current = group.members[mid]
        target = group.target_assignment.get(mid, {})
        if current.member_epoch != group.assignment_epoch or current.assigned != target:
            reconciled = dataclasses.replace(current, member_epoch=group.assignment_epoch,
                                             previous_member_epoch=current.member_epoch, state=STABLE,
                                             assigned=dict(target))
            step.apply(CoordinatorRecord(ShareGroupCurrentMemberAssignmentKey(gid, mid),
                                         reconciled.assignment_value()))
            log.info("[GroupId %s] Member %s new assignment state: epoch=%d, previousEpoch=%d, assigned=%s.",
                     gid, mid, reconciled.member_epoch, reconciled.previous_member_epoch, _show(target))
        answered = group.members[mid]
        self._session(gid, mid)
        assignment = answered.assigned if epoch == 0 or answered.assigned != member.assigned else None
        response = heartbeat_response(ErrorCode.NONE, None, mid, answered.member_epoch,
                                      self.heartbeat_interval_ms(gid), assignment)
        return self._result(step, response, lambda code: heartbeat_response(code))

    def _refresh_metadata(self, group: ShareGroup, step: _Step) -> bool:
        """Whether the subscribed topics' metadata changed since the group epoch was computed
        (a topic created, deleted or given partitions)."""
        source = self.topics.source
        if group.metadata_version == source.changes and not step.records:
            return False
        metadata = self._metadata(group)
        old, old_version = group.subscription_metadata, group.metadata_version
        group.metadata_version = source.changes
        if metadata == old:
            return False
        group.subscription_metadata = metadata

        def undo() -> None:
            group.subscription_metadata, group.metadata_version = old, old_version

        step.on_undo(undo)
        return True

    def _metadata(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        out = {}
        source = self.topics.source
        for name in group.subscribed_topic_names():
            tm = source.metadata(name)
            if tm is not None:
                out[name] = (tm.topic_id, tm.num_partitions)
        return out

    def _assign(self, group: ShareGroup, step: _Step) -> None:
        gid = group.group_id
        target = assignor.assign({m.member_id: m.subscribed_topic_names for m in group.members.values()},
                                 group.subscription_metadata, group.target_assignment)
        for mid, a in target.items():
            if group.target_assignment.get(mid, {}) != a:  # (no record for a member given nothing)
                step.apply(CoordinatorRecord(ShareGroupTargetAssignmentMemberKey(gid, mid),
                                             ShareGroupTargetAssignmentMemberValue(a)))
        step.apply(CoordinatorRecord(ShareGroupTargetAssignmentMetadataKey(gid),
                                     ShareGroupTargetAssignmentMetadataValue(group.group_epoch)))
        # the share partitions the group now reads are initialized (their state starts empty)
        names = {tid: name for name, (tid, _) in group.subscription_metadata.items()}
        initialized = {t: (name, set(ps)) for t, (name, ps) in group.initialized.items()}
        grew = False
        for a in target.values():
            for t, ps in a.items():
                entry = initialized.setdefault(t, (names.get(t, ""), set()))
                if not ps <= entry[1]:
                    entry[1].update(ps)
                    grew = True
        if grew:
            shadow = ShareGroup(gid)
            shadow.initialized = {t: (name, frozenset(ps)) for t, (name, ps) in initialized.items()}
            shadow.deleting = group.deleting
            step.apply(CoordinatorRecord(ShareGroupStatePartitionMetadataKey(gid), state_metadata_value(shadow)))
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with the simple assignor: %s.", gid,
                 group.group_epoch, {m: _show(a) for m, a in target.items()})

    def _result(self, step: _Step, response: Any, error: Callable[[ErrorCode], Any],
                after: Callable[[], None] | None = None) -> CoordinatorResult:
        if not step.records:
            if after is not None:
                after()
            return CoordinatorResult(response=response)

        def on_appended(code: ErrorCode | None) -> Any:
            if code is not None:
                return error(code)
            if after is not None:
                after()
            return response

        return CoordinatorResult(records=step.records, on_appended=on_appended, applied=True, undo=step.undoer())

    # ====================================================================== leaving

    def _leave(self, req: Any) -> CoordinatorResult:
        gid, mid = req.group_id, req.member_id
        group = self._share_group(gid, create=False)
        assert group is not None
        if mid not in group.members:
            raise Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {gid}.")
        log.info("[GroupId %s] Member %s left the share group.", gid, mid)
        step = self._fence(group, mid)
        return self._result(step, heartbeat_response(ErrorCode.NONE, None, mid, LEAVE_GROUP_MEMBER_EPOCH),
                            lambda code: heartbeat_response(code), after=lambda: self._left(gid, mid))

    def _fence(self, group: ShareGroup, mid: str) -> _Step:
        """Kafka's shareGroupFenceMember: the member's records deleted, the group epoch bumped."""
        step = _Step(self.records)
        for r in removal_records(group.group_id, mid):
            step.apply(r)
        self._refresh_metadata(group, step)
        step.apply(CoordinatorRecord(ShareGroupMetadataKey(group.group_id),
                                     ShareGroupMetadataValue(group.group_epoch + 1)))
        self.timers.cancel(("share-session", group.group_id, mid))
        return step

    def session_timeout_ms(self, gid: str) -> int:
        """group.share.session.timeout.ms (a group's own share.session.timeout.ms, once group
        configs carry it, goes here)."""
        return self.config.group_share_session_timeout_ms

    def heartbeat_interval_ms(self, gid: str) -> int:
        """group.share.heartbeat.interval.ms (likewise share.heartbeat.interval.ms)."""
        return self.config.group_share_heartbeat_interval_ms

    def _session(self, gid: str, mid: str) -> None:
        self.timers.schedule(("share-session", gid, mid), self.session_timeout_ms(gid),
                             lambda: self.expire(gid, mid, SESSION_EXPIRED))

    def expire(self, gid: str, mid: str, reason: str) -> None:
        """Fence the member (its session ran out), written in the background."""
        group = self._groups.get(gid)
        if group.__class__ is not ShareGroup or group.dead or mid not in group.members:
            return
        if self.manager.is_group_loading(gid):
            return
        log.info("[GroupId %s] Member %s fenced from the group because %s", gid, mid, reason)
        step = self._fence(group, mid)

        def on_appended(error: ErrorCode | None) -> None:
            if error is not None:
                # undone: the member is back, and its expiry is tried again (Kafka's timers retry
                # a failed operation)
                log.warning("[GroupId %s] Failed to write the removal of member %s: %s", gid, mid, error.name)
                self.timers.schedule(("share-session", gid, mid), EXPIRY_RETRY_MS,
                                     lambda: self.expire(gid, mid, reason))
                return
            self._left(gid, mid)

        self.manager.emit(CoordinatorResult(records=step.records, on_appended=on_appended, applied=True,
                                            undo=step.undoer()))

    def write_in_background(self, gid: str, records: list[CoordinatorRecord]) -> None:
        """Apply `records` now and write them in the background (the control API's rebalance)."""
        step = _Step(self.records)
        for r in records:
            step.apply(r)

        def on_appended(error: ErrorCode | None) -> None:
            if error is not None:
                log.warning("[GroupId %s] Failed to write %d share group records: %s", gid, len(records), error.name)

        self.manager.emit(CoordinatorResult(records=step.records, on_appended=on_appended, applied=True,
                                            undo=step.undoer()))

    # ====================================================================== ShareGroupDescribe

    def describe(self, req: Any, version: int) -> CoordinatorResult:
        out = []
        ops = _GROUP_OPERATIONS if req.include_authorized_operations else _OMITTED
        for gid in req.group_ids:
            err = self.manager.validate(gid, "share_group_describe")
            group = self._groups.get(gid) if err is None else None
            message = None
            if err is None and (group.__class__ is not ShareGroup or group.dead):
                err = ErrorCode.GROUP_ID_NOT_FOUND
                message = f"Group {gid} not found." if group is None or group.dead else \
                    f"Group {gid} is not a share group."
            if err is not None:
                out.append(_Described(error_code=int(err), error_message=message, group_id=gid, group_state="",
                                      group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                                      authorized_operations=_OMITTED))
                continue
            out.append(self._described(group, ops))
        return CoordinatorResult(response=ShareGroupDescribeResponse(version=version, throttle_time_ms=0, groups=out))

    def _described(self, group: ShareGroup, ops: int) -> Any:
        name_of = self.topics.source.name_of
        members = [
            _DMember(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
                     client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                     assignment=_DAssignment(topic_partitions=[
                         _DTP(topic_id=t, topic_name=name_of(t) or "", partitions=sorted(ps))
                         for t, ps in m.assigned.items()]))
            for m in group.members.values()
        ]
        return _Described(error_code=0, error_message=None, group_id=group.group_id, group_state=group.state_name(),
                          group_epoch=group.group_epoch, assignment_epoch=max(group.assignment_epoch, 0),
                          assignor_name=assignor.NAME, members=members, authorized_operations=ops)

    # ====================================================================== loading

    def on_group_loaded(self, group: ShareGroup) -> None:
        log.info("Loaded share group %s with %d members.", group.group_id, len(group.members))
        group.subscription_metadata = self._metadata(group)
        group.metadata_version = self.topics.source.changes
        for mid in group.members:
            self._session(group.group_id, mid)


def _show(a: Assignment) -> str:
    return ", ".join(f"{t}-{sorted(ps)}" for t, ps in a.items()) or "none"
