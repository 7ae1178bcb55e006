"""The classic rebalance protocol: JoinGroup (v0-v9), SyncGroup (v0-v5), Heartbeat (v0-v4),
LeaveGroup (v0-v5) and the engine behind them: delayed joins, the initial join delay, session
and sync timeouts, static membership (KIP-345), pending members (KIP-394), skip_assignment
(KIP-814); and the classic group's record (ClassicGroup): building it, replaying it, loading.

Follows kafka.coordinator.group.GroupCoordinator (Kafka 3.x) decision for decision; see
state.REQUEST_OUTCOMES for the per-state summary. The groups themselves are kept by the group
metadata manager (server/group/group_manager.py), shared by every group type.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kcoord.protocol.coordinator_records import CoordinatorRecord, GroupKey, GroupValue, MemberValue
from kcoord.protocol.errors import ErrorCode
from kcoord.server.deferred import Deferred
from kcoord.server.group.classic.delayed import (
    DelayedHeartbeat,
    DelayedJoin,
    DelayedSync,
    InitialDelayedJoin,
    join_key,
    member_key,
    sync_key,
)
from kcoord.server.group.classic.group import ClassicGroup
from kcoord.server.group.classic.member import JoinCallback, JoinResult, MemberMetadata, Protocols, SyncResult
from kcoord.server.group.classic.state import GroupState
from kcoord.server.group.group_manager import GroupMetadataManager, log
from kcoord.server.group.responses import heartbeat_response, join_response, leave_response, sync_response
from kcoord.server.group.result import CoordinatorResult
from kcoord.server.purgatory import Purgatory

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

# A new member's JoinGroup is parked without a session (it has no member id to heartbeat
# with); Kafka expires it after 5 minutes so disconnected joiners do not pile up.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

# Kafka's GroupMetadataManager.storeGroup maps append failures a little differently from
# offset commits; the runtime hands us the commit mapping, so undo the one that differs.
_GROUP_WRITE_ERRORS = {ErrorCode.INVALID_COMMIT_OFFSET_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR}


def group_write_error(code: ErrorCode) -> ErrorCode:
    return _GROUP_WRITE_ERRORS.get(code, code)


@dataclass(slots=True)
class _Join:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    require_known_member_id: bool
    supports_skip_assignment: bool
    reason: str
    callback: JoinCallback
    deferred: Deferred


class ClassicMembership:
    """Runs classic groups: their requests, timers (two purgatories) and records."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self.config = manager.config
        self.clock = manager.clock
        self._groups = manager.groups_by_id  # the manager's table, read on every request
        self._validate = manager.validate
        self._emit = manager.emit
        self.partition_of = manager.partition_of
        self._heartbeats = Purgatory(self.clock, "Heartbeat")
        self._rebalances = Purgatory(self.clock, "Rebalance")

    @staticmethod
    def _answer(d: Deferred) -> CoordinatorResult:
        return CoordinatorResult(response=d.result() if d.done else d)

    # ====================================================================== records

    def group_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> CoordinatorRecord:
        """The group's GroupMetadata record with these assignments."""
        proto = group.protocol_name
        members = [
            MemberValue(
                member_id=mid,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(proto) if proto is not None else b"",
                assignment=assignment.get(mid, b""),
            )
            for mid, m in group.members.items()
        ]
        ts = group.current_state_timestamp
        value = GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=proto,
            leader=group.leader_id,
            current_state_timestamp=-1 if ts is None else ts,
            members=members,
        )
        return CoordinatorRecord(GroupKey(group.group_id), value)

    def replay(self, key: GroupKey, value: GroupValue | None) -> None:
        """A GroupMetadata record (or its tombstone), live or while loading."""
        group_id = key.group
        group = self._groups.get(group_id)
        loading = self.manager.is_group_loading(group_id)
        if value is None:
            if group is None or not isinstance(group, ClassicGroup):
                return
            if group.is_dead() and not loading:
                return  # the request that deleted it removes it once the deletion is durable
            group.mark_dead(self.clock.now_ms(), ErrorCode.COORDINATOR_NOT_AVAILABLE)
            self.manager.remove_group(group_id)
            return
        if group is not None and not isinstance(group, ClassicGroup):
            log.warning("Skipping GroupMetadata record of %s, which is a %s group", group_id, group.TYPE)
            return
        if loading or group is None or group.state is DEAD:
            self._load_group(group_id, value, group)
        # otherwise memory is already ahead of (or equal to) the record, as the request that
        # made it keeps it: nothing to apply

    def _load_group(self, group_id: str, value: GroupValue, previous: ClassicGroup | None) -> None:
        state = STABLE if value.members else EMPTY
        ts = value.current_state_timestamp
        g = ClassicGroup(group_id, self.clock.now_ms(), state)
        g.current_state_timestamp = None if ts == -1 else ts
        g.generation_id = value.generation
        g.protocol_type = value.protocol_type or None
        g.protocol_name = value.protocol
        g.leader_id = value.leader
        for mv in value.members:
            g.add(MemberMetadata(
                mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host,
                # v0 values have no rebalance timeout: the codec fills the session timeout
                mv.rebalance_timeout, mv.session_timeout, value.protocol_type,
                [(value.protocol or "", mv.subscription)], mv.assignment,
            ))
        g.subscribed_topics = g.compute_subscribed_topics()
        if previous is not None and not previous.is_dead():
            previous.mark_dead(self.clock.now_ms(), ErrorCode.NOT_COORDINATOR)
        self.manager.put_group(g)
        if not self.manager.is_group_loading(group_id):
            self.on_group_loaded(g)

    def on_group_loaded(self, group: ClassicGroup) -> None:
        """The group's partition finished loading (or the group was replaced live)."""
        log.info("Loading group metadata for %s with generation %d", group.group_id, group.generation_id)
        if group.size() > self.config.group_max_size:
            self._prepare_rebalance(
                group, f"Freshly-loaded group is over capacity ({self.config.group_max_size}). "
                       "Rebalancing in order to give a chance for consumers to commit offsets"
            )
        for m in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat(group, m)

    # ====================================================================== OffsetCommit

    def on_offset_commit(self, group: ClassicGroup, member_id: str) -> None:
        """An accepted commit is a sign of life while Stable or PreparingRebalance (Kafka's
        rescheduleClassicGroupMemberHeartbeat)."""
        state = group.state
        if state is STABLE or state is PREPARING:
            member = group.members.get(member_id)
            if member is not None:
                self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    # ====================================================================== JoinGroup

    def join_group(self, req: Any, version: int, client_id: str, client_host: str) -> CoordinatorResult:
        d: Deferred = Deferred()

        def respond(r: JoinResult) -> None:
            d.complete(join_response(version, r))

        session = req.session_timeout_ms
        j = _Join(
            member_id=req.member_id or "",
            instance_id=req.group_instance_id if version >= 5 else None,
            client_id=client_id,
            client_host=client_host,
            # v0 has no rebalance timeout: the session timeout doubles as one (Kafka does this)
            rebalance_timeout_ms=req.rebalance_timeout_ms if version >= 1 else session,
            session_timeout_ms=session,
            protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            # KIP-394: v4+ dynamic members first get an id and must come back with it
            require_known_member_id=version >= 4 and not (version >= 5 and req.group_instance_id),
            supports_skip_assignment=version >= 9,
            reason=(req.reason if version >= 8 else None) or "not provided",
            callback=respond,
            deferred=d,
        )
        result = self._handle_join(req.group_id, j)
        return result if result is not None else self._answer(d)

    def _handle_join(self, group_id: str, j: _Join) -> CoordinatorResult | None:
        err = self._validate(group_id, "join_group")
        if err is None and not (
            self.config.group_min_session_timeout_ms
            <= j.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            err = ErrorCode.INVALID_SESSION_TIMEOUT
        if err is not None:
            j.callback(JoinResult(j.member_id, err))
            return None
        unknown = j.member_id == ""
        group = self._groups.get(group_id)
        if group is not None and group.__class__ is not ClassicGroup:
            if group.is_dead() or group.num_members():
                # another group type holds the id (Kafka: classic members cannot join it here)
                j.callback(JoinResult(j.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
                return None
            # an Empty group of another type becomes a classic group; its offsets stay
            log.info("Converting the empty %s group %s to a classic group.", group.TYPE, group_id)
            self.manager.remove_group(group_id)
            self._emit(CoordinatorResult(records=group.tombstones(), on_appended=lambda error: None))
            group = None
        if group is None:
            # only a brand-new member creates the group
            if not unknown:
                j.callback(JoinResult(j.member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return None
            group = self.manager.new_classic_group(group_id)
        result = None
        if not self._accept_joining_member(group, j.member_id):
            group.remove(j.member_id)
            j.callback(JoinResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif unknown:
            result = self._new_member_join(group, j)
        else:
            result = self._current_member_join(group, j)
        if group.state is PREPARING:
            self._rebalances.check_and_complete(join_key(group.group_id))
        return result

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.state is PREPARING:
            # count members that already rejoined: the group may be above a lowered max size,
            # and the last ones to rejoin are the ones left out
            m = group.members.get(member_id)
            return (m is not None and m.is_awaiting_join) or group.num_awaiting_join < max_size
        return member_id in group.members or group.size() < max_size

    def _new_member_join(self, group: ClassicGroup, j: _Join) -> CoordinatorResult | None:
        if group.state is DEAD:
            # the group was just deleted or unloaded: let the client rediscover and retry
            j.callback(JoinResult("", ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return None
        if not group.supports_protocols(j.protocol_type, {n for n, _ in j.protocols}):
            j.callback(JoinResult("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return None
        new_id = ClassicGroup.generate_member_id(j.client_id, j.instance_id)
        if j.instance_id is not None:
            old_id = group.current_static_member_id(j.instance_id)
            if old_id is not None:
                log.info(
                    "Static member with groupInstanceId=%s and unknown member id joins group %s in %s "
                    "state. Replacing previously mapped member %s with this groupInstanceId.",
                    j.instance_id, group.group_id, group.state, old_id,
                )
                return self._update_static_member_and_rebalance(group, old_id, new_id, j)
            self._add_member_and_rebalance(group, new_id, j)
        elif j.require_known_member_id:
            group.pending_members.add(new_id)
            self._add_pending_member_expiration(group, new_id, j.session_timeout_ms)
            j.callback(JoinResult(new_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_id, j)
        return None

    def _current_member_join(self, group: ClassicGroup, j: _Join) -> CoordinatorResult | None:
        mid = j.member_id
        if group.state is DEAD:
            j.callback(JoinResult(mid, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return None
        if not group.supports_protocols(j.protocol_type, {n for n, _ in j.protocols}):
            j.callback(JoinResult(mid, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return None
        if mid in group.pending_members:
            if j.instance_id is not None:
                # pending members are dynamic by construction; Kafka treats this as a bug
                j.callback(JoinResult(mid, ErrorCode.UNKNOWN_SERVER_ERROR))
                return None
            self._add_member_and_rebalance(group, mid, j)
            return None
        err = group.validate_member(mid, j.instance_id)
        if err is not None:
            j.callback(JoinResult(mid, err))
            return None
        member = group.members[mid]
        state = group.state
        if state is PREPARING:
            self._update_member_and_rebalance(group, member, j)
        elif state is COMPLETING:
            if member.matches(j.protocols):
                # it probably lost the JoinGroup response: answer with the current generation
                members = group.current_member_metadata() if group.is_leader(mid) else []
                j.callback(self._generation_result(group, mid, members))
            else:
                self._update_member_and_rebalance(group, member, j)
        elif state is STABLE:
            if group.is_leader(mid) or not member.matches(j.protocols):
                # the leader rejoining is how a consumer asks for a rebalance (e.g. new topic
                # partitions), even with unchanged metadata
                self._update_member_and_rebalance(group, member, j)
            else:
                j.callback(self._generation_result(group, mid, []))
        else:
            log.warning("Attempt to add rejoining member %s of group %s in unexpected state %s",
                        mid, group.group_id, state)
            j.callback(JoinResult(mid, ErrorCode.UNKNOWN_MEMBER_ID))
        return None

    @staticmethod
    def _generation_result(
        group: ClassicGroup, member_id: str, members: list, skip: bool = False, leader: str | None = None
    ) -> JoinResult:
        return JoinResult(
            member_id=member_id,
            error=ErrorCode.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=(group.leader_id if leader is None else leader) or "",
            skip_assignment=skip,
            members=members,
        )

    def _add_member_and_rebalance(self, group: ClassicGroup, member_id: str, j: _Join) -> None:
        member = MemberMetadata(
            member_id, j.instance_id, j.client_id, j.client_host,
            j.rebalance_timeout_ms, j.session_timeout_ms, j.protocol_type, j.protocols,
        )
        member.is_new = True
        # lets the initial delayed join wait a little longer for more members
        if group.state is PREPARING and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, j.callback)
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
            group, f"Adding new member {member_id} with group instance id {j.instance_id}; client reason: {j.reason}"
        )

    def _update_member_and_rebalance(self, group: ClassicGroup, member: MemberMetadata, j: _Join) -> None:
        group.update_member(member, j.protocols, j.rebalance_timeout_ms, j.session_timeout_ms, j.callback)
        self._maybe_prepare_rebalance(
            group, f"Updating metadata for member {member.member_id} during {group.state}; client reason: {j.reason}"
        )

    def _update_static_member_and_rebalance(
        self, group: ClassicGroup, old_id: str, new_id: str, j: _Join
    ) -> CoordinatorResult | None:
        assert j.instance_id is not None
        instance_id = j.instance_id
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        # the old id's session expires harmlessly: the group no longer has that id
        self._complete_and_schedule_next_heartbeat(group, member)
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, j.protocols, j.rebalance_timeout_ms, j.session_timeout_ms, j.callback)

        if group.state is STABLE:
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance(
                    group, f"Group's selectedProtocol will change because static member {new_id} with "
                           f"instance id {instance_id} joined with change of protocol; client reason: {j.reason}"
                )
                return None
            # Kafka 3.x: a known static member coming back with a new id does not rebalance a
            # Stable group; persist the new member id, then answer.
            log.info("Static member which joins during Stable stage and doesn't affect selectProtocol "
                     "will not trigger rebalance.")
            record = self.group_record(group, {mid: m.assignment for mid, m in group.members.items()})
            generation = group.generation_id

            def on_appended(error: ErrorCode | None) -> Any:
                if error is not None:
                    log.warning("Failed to persist metadata for group %s: %s", group.group_id, error.name)
                    if group.members.get(new_id) is member:
                        group.update_member(member, *old, None)
                        restored = group.replace_static_member(instance_id, new_id, old_id)
                        self._complete_and_schedule_next_heartbeat(group, restored)
                    j.callback(JoinResult(
                        member_id="", error=group_write_error(error), generation_id=generation,
                        protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                        leader_id=current_leader or "",
                    ))
                elif group.state in (PREPARING, DEAD) or group.members.get(new_id) is not member:
                    pass  # a rebalance started meanwhile: it answers the member
                elif j.supports_skip_assignment:
                    # KIP-814: tell a static leader it leads, but that it must not reassign
                    is_leader = group.is_leader(new_id)
                    members = group.current_member_metadata() if is_leader else []
                    group.maybe_invoke_join(member, self._generation_result(group, new_id, members, skip=is_leader))
                else:
                    # before v9 hide the leadership (old leader id) so no useless assignment runs
                    group.maybe_invoke_join(
                        member, self._generation_result(group, new_id, [], leader=current_leader or "")
                    )
                return None

            return CoordinatorResult(records=[record], on_appended=self._chain(on_appended, j))
        if group.state is COMPLETING:
            # the leader may already be assigning with the old member id: start over
            self._prepare_rebalance(
                group, f"Updating metadata for static member {new_id} with instance id {instance_id}; "
                       f"client reason: {j.reason}"
            )
        return None

    @staticmethod
    def _chain(on_appended: Callable[[ErrorCode | None], Any], j: _Join) -> Callable[[ErrorCode | None], Any]:
        """on_appended for a JoinGroup result: run the effect, then hand back the response."""
        d = j.deferred

        def run(error: ErrorCode | None) -> Any:
            on_appended(error)
            return d.result() if d.done else d

        return run

    # ====================================================================== rebalance engine

    def _maybe_prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        """Start a rebalance now (a group converted from a consumer group, the control API)."""
        self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        # members parked in SyncGroup must rejoin
        if group.state is COMPLETING:
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        delay = self.config.group_initial_rebalance_delay_ms
        op: DelayedJoin
        if group.state is EMPTY:
            op = InitialDelayedJoin(
                self, self._rebalances, group, delay, delay, max(group.rebalance_timeout_ms() - delay, 0)
            )
        else:
            op = DelayedJoin(self, group, group.rebalance_timeout_ms())
        group.transition_to(PREPARING, self.clock.now_ms())
        log.info("Preparing to rebalance group %s in state %s with old generation %d "
                 "(__consumer_offsets-%d) (reason: %s)", group.group_id, group.state,
                 group.generation_id, self.partition_of(group.group_id), reason)
        self._rebalances.try_complete_else_watch(op, (join_key(group.group_id),))

    def _try_complete_join(self, group: ClassicGroup, force_complete: Callable[[], bool]) -> bool:
        return force_complete() if group.has_all_members_joined() else False

    def _on_complete_join(self, group: ClassicGroup) -> None:
        for m in group.not_yet_rejoined_members():
            # static members keep their seat across a missed rebalance (KIP-345)
            if not m.is_static:
                group.remove(m.member_id)
                self._remove_heartbeat_for_leaving_member(group, m.member_id)
        if group.state is DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait another rebalance timeout for their sessions to expire
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            self._rebalances.try_complete_else_watch(
                DelayedJoin(self, group, group.rebalance_timeout_ms()), (join_key(group.group_id),)
            )
            return
        group.init_next_generation(self.clock.now_ms())
        if group.state is EMPTY:
            log.info("Group %s with generation %d is now empty (__consumer_offsets-%d)",
                     group.group_id, group.generation_id, self.partition_of(group.group_id))
            gid = group.group_id

            def on_appended(error: ErrorCode | None) -> None:
                if error is not None:
                    # the previous generation stays in the log and times out after a restart
                    log.warning("Failed to write empty metadata for group %s: %s", gid, error.name)

            self._emit(CoordinatorResult(records=[self.group_record(group, {})], on_appended=on_appended))
            return
        log.info("Stabilized group %s generation %d (__consumer_offsets-%d) with %d members",
                 group.group_id, group.generation_id, self.partition_of(group.group_id), group.size())
        leader_members = group.current_member_metadata()
        for mid, member in list(group.members.items()):
            is_leader = group.is_leader(mid)
            group.maybe_invoke_join(member, self._generation_result(group, mid, leader_members if is_leader else []))
            self._complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(mid)
        self._rebalances.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms()),
            (sync_key(group.group_id),),
        )

    # ---- sync expiration (members that never send SyncGroup) ----

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        self._rebalances.check_and_complete(sync_key(group.group_id))

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self._rebalances.check_and_complete(sync_key(group.group_id))

    def _try_complete_pending_sync(
        self, group: ClassicGroup, generation_id: int, force_complete: Callable[[], bool]
    ) -> bool:
        if generation_id != group.generation_id or group.state in (DEAD, EMPTY, PREPARING):
            return force_complete()
        return force_complete() if not group.pending_sync_members else False

    def _on_expire_pending_sync(self, group: ClassicGroup, generation_id: int) -> None:
        if generation_id != group.generation_id or group.state not in (COMPLETING, STABLE):
            return
        if group.pending_sync_members:
            pending = list(group.pending_sync_members)
            for mid in pending:
                member = group.remove(mid)
                if member is not None:
                    group.maybe_invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
                self._remove_heartbeat_for_leaving_member(group, mid)
            log.debug("Group %s removed members who haven't sent their sync request: %s", group.group_id, pending)
            self._prepare_rebalance(group, f"Removing {pending} on pending sync request expiration")

    # ---- sessions ----

    def _complete_and_schedule_next_heartbeat(self, group: ClassicGroup, member: MemberMetadata) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(
        self, group: ClassicGroup, member: MemberMetadata, timeout_ms: int
    ) -> None:
        session = member._session
        if (session is not None and session.group is group and session.member_id == member.member_id
                and not session.is_pending and self._heartbeats.extend(session, timeout_ms)):
            # The hot path (every heartbeat and commit): a live session just moves its
            # deadline, equivalent to completing it and watching a fresh one (extend refuses
            # a completed one).
            return
        key = member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self._heartbeats.check_and_complete(key)
        member.heartbeat_satisfied = False
        op = DelayedHeartbeat(self, group, member.member_id, False, timeout_ms)
        if not self._heartbeats.try_complete_else_watch(op, (key,)):
            member._session = op

    def _add_pending_member_expiration(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        self._heartbeats.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, True, timeout_ms), (member_key(group.group_id, member_id),)
        )

    def _remove_heartbeat_for_leaving_member(self, group: ClassicGroup, member_id: str) -> None:
        self._heartbeats.check_and_complete(member_key(group.group_id, member_id))

    def _try_complete_heartbeat(
        self, group: ClassicGroup, member_id: str, is_pending: bool, force_complete: Callable[[], bool]
    ) -> bool:
        if group.state is DEAD:
            return force_complete()
        if is_pending:
            return force_complete() if member_id in group.members else False
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return force_complete()
        return False

    def _on_expire_heartbeat(self, group: ClassicGroup, member_id: str, is_pending: bool) -> None:
        if group.state is DEAD:
            return
        if is_pending:
            log.info("Pending member %s in group %s has been removed after session timeout expiration.",
                     member_id, group.group_id)
            self._remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            log.info("Member %s in group %s has failed, removing it from the group", member_id, group.group_id)
            self._remove_member_and_update_group(
                group, member, f"removing member {member_id} on heartbeat expiration"
            )

    # ---- removal ----

    def _remove_member_and_update_group(self, group: ClassicGroup, member: MemberMetadata, reason: str) -> None:
        # a new member may time out while parked in JoinGroup: answer it so it retries
        group.maybe_invoke_join(member, JoinResult("", ErrorCode.UNKNOWN_MEMBER_ID))
        # Kafka leaves a parked SyncGroup of a removed member unanswered; answering keeps that
        # connection's later requests from waiting behind it
        group.maybe_invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group, reason)
        elif group.state is PREPARING:
            self._rebalances.check_and_complete(join_key(group.group_id))

    def _remove_pending_member_and_update_group(self, group: ClassicGroup, member_id: str) -> None:
        group.remove(member_id)
        if group.state is PREPARING:
            self._rebalances.check_and_complete(join_key(group.group_id))

    # ---- assignment propagation ----

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: ErrorCode) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        ptype = group.protocol_type if ok else None
        pname = group.protocol_name if ok else None
        members = list(group.members.values())
        leader = group.members.get(group.leader_id) if group.leader_id else None
        if leader is not None and members[0] is not leader:  # the leader first, as Kafka never lags it
            members.remove(leader)
            members.insert(0, leader)
        for m in members:
            if group.maybe_invoke_sync(m, SyncResult(error, ptype, pname, m.assignment)):
                # sessions that lapsed while waiting for the assignment restart now
                self._complete_and_schedule_next_heartbeat(group, m)

    def _complete_rebalance(self, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """The leader's assignment is durable: apply it and answer every SyncGroup."""
        for mid, m in group.members.items():
            m.assignment = assignment.get(mid, b"")
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(STABLE, self.clock.now_ms())

    # ====================================================================== SyncGroup

    def sync_group(self, req: Any, version: int) -> CoordinatorResult:
        d: Deferred = Deferred()

        def respond(r: SyncResult) -> None:
            d.complete(sync_response(version, r))

        group_id = req.group_id
        err = self._validate(group_id, "sync_group")
        if err is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # the rebalance state was lost with the load; old clients do not expect
            # COORDINATOR_LOAD_IN_PROGRESS here, and REBALANCE_IN_PROGRESS makes them rejoin
            respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif err is not None:
            respond(SyncResult(err))
        else:
            group = self._groups.get(group_id)
            if group is None or group.__class__ is not ClassicGroup:
                respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            else:
                result = self._do_sync(
                    group,
                    req.generation_id,
                    req.member_id,
                    req.protocol_type if version >= 5 else None,
                    req.protocol_name if version >= 5 else None,
                    req.group_instance_id if version >= 3 else None,
                    [(a.member_id, bytes(a.assignment)) for a in req.assignments],
                    respond,
                    d,
                )
                if result is not None:
                    return result
        return self._answer(d)

    def _do_sync(
        self,
        group: ClassicGroup,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        instance_id: str | None,
        assignments: list[tuple[str, bytes]],
        respond: Callable[[SyncResult], None],
        d: Deferred,
    ) -> CoordinatorResult | None:
        if group.state is DEAD:
            respond(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return None
        err = group.validate_member(member_id, instance_id)
        if err is None:
            if generation_id != group.generation_id:
                err = ErrorCode.ILLEGAL_GENERATION
            elif protocol_type is not None and protocol_type != group.protocol_type:
                err = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            elif protocol_name is not None and protocol_name != group.protocol_name:
                err = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if err is not None:
            respond(SyncResult(err))
            return None
        state = group.state
        if state is EMPTY:
            respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif state is PREPARING:
            respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif state is COMPLETING:
            member = group.members[member_id]
            # a duplicate SyncGroup replaces the parked one; answer the old so it cannot hang
            group.maybe_invoke_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = respond
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("Assignment received from leader %s for group %s for generation %d. The group has "
                         "%d members, %d of which are static.", member_id, group.group_id,
                         group.generation_id, group.size(), len(group.static_members))
                given = dict(assignments)
                # members the leader left out get an empty assignment
                full = {mid: given.get(mid, b"") for mid in group.members}
                record = self.group_record(group, full)
                generation = group.generation_id

                def on_appended(error: ErrorCode | None) -> None:
                    if group.state is not COMPLETING or generation != group.generation_id:
                        return  # the group moved on meanwhile (and answered its members)
                    if error is None:  # durable: every member gets its assignment, the leader first
                        self._complete_rebalance(group, full)
                    else:
                        self._reset_and_propagate_assignment_error(group, group_write_error(error))
                        self._maybe_prepare_rebalance(
                            group, f"Error {error.name} when storing group assignment during SyncGroup "
                                   f"(member: {member_id})"
                        )

                # `d` is the leader's answer from now on (not on_appended's return value):
                # on_appended answers it with its followers, leader first
                return CoordinatorResult(records=[record], response=d, on_appended=on_appended)
        else:  # STABLE
            self._remove_pending_sync_member(group, member_id)
            member = group.members[member_id]
            respond(SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment))
            self._complete_and_schedule_next_heartbeat(group, member)
        return None

    # ====================================================================== Heartbeat

    def heartbeat(self, req: Any, version: int) -> CoordinatorResult:
        return CoordinatorResult(response=heartbeat_response(version, self.heartbeat_error(req, version)))

    def heartbeat_error(self, req: Any, version: int) -> ErrorCode:
        """Heartbeat's whole outcome is its error code (the server's fast path encodes the
        response from it alone)."""
        group_id = req.group_id
        err = self._validate(group_id, "heartbeat")
        if err is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is loading: answer blindly, as Kafka does
        if err is not None:
            return err
        group = self._groups.get(group_id)
        if group is None or group.__class__ is not ClassicGroup:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        member_id = req.member_id
        instance_id = req.group_instance_id if version >= 3 else None
        member = group.members.get(member_id) if instance_id is None else None
        if member is None:  # not a known dynamic member: the full check says why (or finds it)
            err = group.validate_member(member_id, instance_id)
            if err is not None:
                return err
            member = group.members[member_id]
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)
        if group.state is PREPARING:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ====================================================================== LeaveGroup

    def leave_group(self, req: Any, version: int) -> CoordinatorResult:
        if version >= 3:
            leaving = [(m.member_id or "", m.group_instance_id, getattr(m, "reason", None)) for m in req.members]
        else:
            leaving = [(req.member_id or "", None, None)]
        top, members = self._leave(req.group_id, leaving)
        return CoordinatorResult(response=leave_response(version, top, members))

    def _leave(
        self, group_id: str, leaving: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        err = self._validate(group_id, "leave_group")
        if err is not None:
            return err, []
        group = self._groups.get(group_id)
        if group is None or group.__class__ is not ClassicGroup:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i, _ in leaving]
        if group.state is DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        out: list[tuple[str, str | None, ErrorCode]] = []
        for mid, instance_id, reason in leaving:
            why = reason or "not provided"
            if mid == "":
                # administrative removal by group.instance.id (KIP-345)
                current = group.current_static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    out.append((mid, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                else:
                    self._remove_current_member(group, current, why)
                    out.append((mid, instance_id, ErrorCode.NONE))
            elif mid in group.pending_members:
                self._remove_pending_member_and_update_group(group, mid)
                self._heartbeats.check_and_complete(member_key(group.group_id, mid))
                log.info("Pending member with memberId=%s has left group %s through explicit `LeaveGroup` "
                         "request", mid, group.group_id)
                out.append((mid, instance_id, ErrorCode.NONE))
            else:
                e = group.validate_member(mid, instance_id)
                if e is None:
                    self._remove_current_member(group, mid, why)
                    e = ErrorCode.NONE
                out.append((mid, instance_id, e))
        return ErrorCode.NONE, out

    def _remove_current_member(self, group: ClassicGroup, member_id: str, reason: str) -> None:
        member = group.members[member_id]
        self._remove_member_and_update_group(
            group, member, f"Removing member {member_id} on LeaveGroup; client reason: {reason}"
        )
        self._remove_heartbeat_for_leaving_member(group, member_id)
        log.info("Member %s has left group %s through explicit `LeaveGroup`; client reason: %s",
                 member, group.group_id, reason)
