"""State and helpers every part of the group coordinator shares: the group table, the loading
partitions, the two purgatories, request validation (group id, loading), building the
GroupMetadata record, and the channel for writes no request asked for (background writes).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from protocol.coordinator_records import CoordinatorRecord, GroupKey, GroupValue, MemberValue
from protocol.errors import ErrorCode
from protocol.partitioner import partition_for
from server.clock import Clock
from server.deferred import Deferred
from server.group.config import GroupConfig
from server.group.group import GroupMetadata
from server.group.member import JoinResult, SyncResult
from server.group.result import CoordinatorResult
from server.group.state import GroupState
from server.purgatory import Purgatory

log = logging.getLogger("kcoord.group")

# APIs whose group id may be "" (Kafka keeps that for backward compatibility); the others
# coordinate membership and need a real id.
_EMPTY_ID_OK = frozenset({"offset_commit", "offset_fetch", "describe_groups", "delete_groups"})

# Kafka's GroupMetadataManager.storeGroup maps append failures a little differently from
# offset commits; the runtime hands us the commit mapping, so undo the one that differs.
_GROUP_WRITE_ERRORS = {ErrorCode.INVALID_COMMIT_OFFSET_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR}


def group_write_error(code: ErrorCode) -> ErrorCode:
    return _GROUP_WRITE_ERRORS.get(code, code)


class CoordinatorBase:
    def __init__(self, config: GroupConfig, clock: Clock, num_partitions: int = 50) -> None:
        self.config = config
        self.clock = clock
        self.num_partitions = num_partitions
        self._groups: dict[str, GroupMetadata] = {}
        self._loading: set[int] = set()
        self._heartbeats = Purgatory(clock, "Heartbeat")
        self._rebalances = Purgatory(clock, "Rebalance")
        self._writer: Callable[[CoordinatorResult], None] | None = None
        self._background: list[CoordinatorResult] = []

    # ---- routing / validation ------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def _is_loading(self, group_id: str) -> bool:
        return bool(self._loading) and self.partition_of(group_id) in self._loading

    def _validate(self, group_id: str | None, api: str) -> ErrorCode | None:
        if group_id is None or (not group_id and api not in _EMPTY_ID_OK):
            return ErrorCode.INVALID_GROUP_ID
        if self._loading and self._is_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def group(self, group_id: str) -> GroupMetadata | None:
        """The live group (tests and the runtime may inspect it; do not mutate)."""
        return self._groups.get(group_id)

    def groups(self) -> list[GroupMetadata]:
        return list(self._groups.values())

    def _new_group(self, group_id: str) -> GroupMetadata:
        g = GroupMetadata(group_id, self.clock.now_ms())
        self._groups[group_id] = g
        return g

    # ---- background writes -----------------------------------------------------------------

    def set_background_writer(self, writer: Callable[[CoordinatorResult], None] | None) -> None:
        """Where writes that no request asked for go (the GroupMetadata record of a group that
        became Empty when its last member timed out or left). The writer must handle the
        result like any handler's result (append, replay, on_appended), but later: it must not
        call back into the coordinator before returning. Without a writer they queue up for
        drain_background()."""
        self._writer = writer
        if writer is not None:
            queued, self._background = self._background, []
            for r in queued:
                writer(r)

    def drain_background(self) -> list[CoordinatorResult]:
        out, self._background = self._background, []
        return out

    def _emit(self, result: CoordinatorResult) -> None:
        if self._writer is not None:
            self._writer(result)
        else:
            self._background.append(result)

    # ---- records ---------------------------------------------------------------------------

    def _group_record(self, group: GroupMetadata, assignment: dict[str, bytes]) -> CoordinatorRecord:
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

    @staticmethod
    def _answer(d: Deferred) -> CoordinatorResult:
        return CoordinatorResult(response=d.result() if d.done else d)

    # ---- group death -------------------------------------------------------------------------

    def _mark_dead(self, group: GroupMetadata, error: ErrorCode) -> None:
        """Dead is final: answer everything parked on the group (Kafka's onGroupUnloaded)."""
        previous = group.state
        group.transition_to(GroupState.DEAD, self.clock.now_ms())
        for m in list(group.members.values()):
            if previous is GroupState.PREPARING_REBALANCE:
                group.maybe_invoke_join(m, JoinResult(m.member_id, error))
            group.maybe_invoke_sync(m, SyncResult(error))
        group.pending_sync_members.clear()

    def _revive(self, group: GroupMetadata) -> None:
        """Undo a Dead marking whose tombstone failed to append. The only way out of Dead and
        deliberately outside the transition table: Kafka removes the group from its cache
        before appending and never needs it; we keep the log and memory in step instead."""
        if group.state is GroupState.DEAD and self._groups.get(group.group_id) is group:
            group.state = GroupState.EMPTY
            # retention keeps counting from when the group really became Empty
            group.current_state_timestamp = group.previous_state_timestamp
