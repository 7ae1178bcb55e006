"""The group metadata manager: the one table of groups of every type, which partitions are
loading, request validation shared by every group API (group id, loading), the channel for
writes no request asked for, and the group APIs that look at any group: DescribeGroups
(v0-v5) and ListGroups (v0-v5).

What a group type does with its own requests lives in its package (server/group/classic/);
the group itself answers the questions every API asks through server/group/types.Group.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.partitioner import partition_for
from kcoord.server.clock import Clock
from kcoord.server.group.classic.group import ClassicGroup
from kcoord.server.group.classic.state import GroupState
from kcoord.server.group.config import GroupConfig
from kcoord.server.group.responses import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_AUTHORIZED_OPERATIONS,
    describe_response,
    described_group,
    list_response,
)
from kcoord.server.group.result import CoordinatorResult
from kcoord.server.group.types import Group

log = logging.getLogger("kcoord.group")

# APIs whose group id may be "" (Kafka keeps that for backward compatibility); the others
# coordinate membership and need a real id.
_EMPTY_ID_OK = frozenset({"offset_commit", "offset_fetch", "describe_groups", "delete_groups"})


class GroupMetadataManager:
    def __init__(self, config: GroupConfig, clock: Clock, num_partitions: int = 50,
                 background_writer: Callable[[CoordinatorResult], None] | None = None,
                 end_of_turn: Callable[[Callable[[], None]], None] | None = None) -> None:
        """background_writer: where writes that no request asked for go (the GroupMetadata
        record of a group that became Empty when its last member timed out or left). It must
        handle the result like any handler's result (append, replay, on_appended), but later:
        it must not call back into the coordinator before returning. Without one they queue
        up for drain_background(). end_of_turn: how work deferred to the end of the current
        event-loop turn is scheduled (the runtime's loop.call_soon); without it, it queues up
        for run_end_of_turn()."""
        self.config = config
        self.clock = clock
        self.num_partitions = num_partitions
        self.groups_by_id: dict[str, Any] = {}  # group id -> a Group of any type
        self.loading: set[int] = set()
        self.unloaded: set[int] = set()  # partitions another node leads: NOT_COORDINATOR
        self._writer = background_writer
        self._background: list[CoordinatorResult] = []
        self._soon = end_of_turn
        self._later: list[Callable[[], None]] = []

    # ---- routing / validation ------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def is_group_loading(self, group_id: str) -> bool:
        return bool(self.loading) and self.partition_of(group_id) in self.loading

    def validate(self, group_id: str | None, api: str) -> ErrorCode | None:
        if group_id is None or (not group_id and api not in _EMPTY_ID_OK):
            return ErrorCode.INVALID_GROUP_ID
        if self.loading and self.partition_of(group_id) in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if self.unloaded and self.partition_of(group_id) in self.unloaded:
            return ErrorCode.NOT_COORDINATOR
        return None

    # ---- the table -----------------------------------------------------------------------

    def group(self, group_id: str) -> Any:
        """The live group of any type, or None (tests and tools may inspect it; do not mutate)."""
        return self.groups_by_id.get(group_id)

    def groups(self) -> list[Any]:
        return list(self.groups_by_id.values())

    def groups_of_partition(self, partition: int) -> Iterator[Any]:
        for gid, g in list(self.groups_by_id.items()):
            if self.partition_of(gid) == partition:
                yield g

    def new_classic_group(self, group_id: str) -> ClassicGroup:
        g = ClassicGroup(group_id, self.clock.now_ms())
        self.groups_by_id[group_id] = g
        return g

    def classic_group_for_offsets(self, group_id: str) -> Any:
        """The group committed offsets belong to: offsets without group metadata belong to an
        Empty classic group (Kafka's load does the same), also after a Dead one (not while
        loading: the group's own record may follow)."""
        group = self.groups_by_id.get(group_id)
        if group is None or (group.is_dead() and not self.is_group_loading(group_id)):
            group = self.new_classic_group(group_id)
        return group

    def put_group(self, group: Group) -> None:
        self.groups_by_id[group.group_id] = group

    def remove_group(self, group_id: str) -> None:
        self.groups_by_id.pop(group_id, None)

    def revive(self, group: Group) -> None:
        """Undo mark_dead after its tombstones failed to append (the runtime reverted them),
        if the group's partition is still ours. The group object itself comes back: a revert
        may have put an equal stand-in in its place (its offsets' records make one)."""
        gid = group.group_id
        if self.validate(gid, "delete_groups") is not None:
            return  # unloaded or loading meanwhile: the log is the truth
        if self.groups_by_id.get(gid) is not group:
            self.groups_by_id[gid] = group
        group.revive()

    def remove_dead(self, group: Group) -> None:
        """A group's deletion is durable: it leaves the table. Until then the Dead group
        stays (replaying its tombstones leaves a Dead group where it is), answering as Dead."""
        if self.groups_by_id.get(group.group_id) is group:
            del self.groups_by_id[group.group_id]

    def begin_loading(self, partition: int) -> None:
        """Groups of `partition` answer COORDINATOR_LOAD_IN_PROGRESS until end_loading; the
        groups held for it are dropped (the log is the truth)."""
        self.loading.add(partition)
        self.unloaded.discard(partition)
        now = self.clock.now_ms()
        for g in self.groups_of_partition(partition):
            if not g.is_dead():
                g.mark_dead(now, ErrorCode.NOT_COORDINATOR)
            del self.groups_by_id[g.group_id]

    def end_loading(self, partition: int) -> None:
        self.loading.discard(partition)

    def unload(self, partition: int) -> None:
        """Another node coordinates `partition` now: its groups are dropped (parked requests
        answered NOT_COORDINATOR) and its group ids answer NOT_COORDINATOR until begin_loading."""
        self.begin_loading(partition)
        self.loading.discard(partition)
        self.unloaded.add(partition)

    # ---- background writes -----------------------------------------------------------------

    def set_background_writer(self, writer: Callable[[CoordinatorResult], None] | None) -> None:
        """Replace the background writer (tests and benches that drive a coordinator without
        a runtime collect the writes); what queued up meanwhile goes to it."""
        self._writer = writer
        if writer is not None:
            queued, self._background = self._background, []
            for r in queued:
                writer(r)

    def at_end_of_turn(self, fn: Callable[[], None]) -> None:
        if self._soon is not None:
            self._soon(fn)
        else:
            self._later.append(fn)

    def run_end_of_turn(self) -> int:
        """Run the queued end-of-turn work (tests drive the coordinator without a loop)."""
        n = 0
        while self._later:
            fns, self._later = self._later, []
            for fn in fns:
                fn()
                n += 1
        return n

    def drain_background(self) -> list[CoordinatorResult]:
        out, self._background = self._background, []
        return out

    def emit(self, result: CoordinatorResult) -> None:
        if self._writer is not None:
            self._writer(result)
        else:
            self._background.append(result)

    # ---- DescribeGroups / ListGroups -------------------------------------------------------

    def describe_groups(self, req: Any, version: int) -> CoordinatorResult:
        ops = GROUP_AUTHORIZED_OPERATIONS if version >= 3 and req.include_authorized_operations else \
            AUTHORIZED_OPERATIONS_OMITTED
        out = []
        for gid in req.groups:
            err = self.validate(gid, "describe_groups")
            if err is not None:
                out.append(described_group(gid, err, "", "", "", [], ops))
                continue
            group = self.groups_by_id.get(gid)
            if group is None:
                out.append(described_group(gid, ErrorCode.NONE, str(GroupState.DEAD), "", "", [], ops))
                continue
            if not isinstance(group, ClassicGroup):
                # another type's group: ConsumerGroupDescribe describes it (Kafka 4.x)
                out.append(described_group(gid, ErrorCode.GROUP_ID_NOT_FOUND, str(GroupState.DEAD), "", "", [], ops))
                continue
            if group.state is GroupState.STABLE:
                proto = group.protocol_name or ""
                members = [
                    (mid, m.group_instance_id, m.client_id, m.client_host, m.metadata(proto), m.assignment)
                    for mid, m in group.members.items()
                ]
            else:
                # metadata and assignments only mean something once the group is Stable
                proto = ""
                members = [
                    (mid, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                    for mid, m in group.members.items()
                ]
            out.append(described_group(
                gid, ErrorCode.NONE, str(group.state), group.protocol_type or "", proto, members, ops
            ))
        return CoordinatorResult(response=describe_response(version, out))

    def list_groups(self, req: Any, version: int) -> CoordinatorResult:
        states = {s.lower() for s in (req.states_filter or [])} if version >= 4 else set()
        types = {t.lower() for t in (req.types_filter or [])} if version >= 5 else set()
        err = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.loading else ErrorCode.NONE
        rows = []
        for g in self.groups_by_id.values():
            if types and g.TYPE.value not in types:
                continue
            if self.is_group_loading(g.group_id):
                continue
            state = g.state_name()
            if states and state.lower() not in states:
                continue
            rows.append((g.group_id, g.listed_protocol_type(), state, g.TYPE.value))
        return CoordinatorResult(response=list_response(version, err, rows))
