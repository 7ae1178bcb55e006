"""GroupCoordinator: the classic consumer-group coordinator the handlers call.

The API methods take the decoded kafka-python request and the negotiated version and return
a CoordinatorResult (server/group/result.py). Persisted state (offsets, a group's generation,
members and assignments as written in GroupMetadata records) changes only in replay(), which
the runtime calls after a durable append and, at start-up, for every record of a partition
between begin_loading() and end_loading(). In-memory-only state (parked requests, timers,
members joining during a rebalance) changes directly, as in Kafka.

Routing: every result's records belong to one group, except expire_offsets() and
delete_groups(), whose records are contiguous per group: route each record by
partition_of(record.key.group). Writes nobody asked for (a group emptied by a session timeout)
go to set_background_writer().
"""
from __future__ import annotations

import logging

from protocol.coordinator_records import CoordinatorRecord, GroupKey, GroupValue, OffsetKey, OffsetValue
from protocol.errors import ErrorCode
from server.clock import Clock
from server.group.admin import AdminMixin
from server.group.base import log
from server.group.config import GroupConfig
from server.group.group import GroupMetadata
from server.group.member import MemberMetadata
from server.group.membership import MembershipMixin
from server.group.offset_api import OffsetsMixin
from server.group.state import GroupState


class GroupCoordinator(MembershipMixin, OffsetsMixin, AdminMixin):
    def __init__(self, config: GroupConfig, clock: Clock, num_partitions: int = 50) -> None:
        super().__init__(config, clock, num_partitions)

    # ====================================================================== replay

    def replay(self, record: CoordinatorRecord) -> None:
        key = record.key
        if isinstance(key, OffsetKey):
            self._replay_offset(key, record.value)  # type: ignore[arg-type]
        elif isinstance(key, GroupKey):
            self._replay_group(key.group, record.value)  # type: ignore[arg-type]
        else:
            log.warning("Skipping __consumer_offsets record with unknown key %r", key)

    def _replay_offset(self, key: OffsetKey, value: OffsetValue | None) -> None:
        group = self._groups.get(key.group)
        if value is None:
            if group is not None:
                group.offsets.remove(key.topic, key.partition)
            return
        if group is None or (group.state is GroupState.DEAD and not self._is_loading(key.group)):
            # offsets without group metadata belong to an Empty group (Kafka's load does the same)
            group = self._new_group(key.group)
        group.offsets.put(key.topic, key.partition, value)
        group.remove_pending_commit(key.topic, key.partition)

    def _replay_group(self, group_id: str, value: GroupValue | None) -> None:
        group = self._groups.get(group_id)
        loading = self._is_loading(group_id)
        if value is None:
            if group is None:
                return
            if group.state is not GroupState.DEAD:
                self._mark_dead(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            del self._groups[group_id]
            if len(group.offsets):
                # offsets outlive the group metadata until their own tombstones
                fresh = self._new_group(group_id)
                fresh.offsets = group.offsets
            return
        if loading or group is None or group.state is GroupState.DEAD:
            self._load_group(group_id, value, group)
        elif group.state is GroupState.COMPLETING_REBALANCE and group.generation_id == value.generation:
            self._complete_rebalance_from_record(group, {m.member_id: m.assignment for m in value.members})
        # otherwise memory is already ahead of (or equal to) the record: nothing to apply

    def _load_group(self, group_id: str, value: GroupValue, previous: GroupMetadata | None) -> None:
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        ts = value.current_state_timestamp
        g = GroupMetadata(group_id, self.clock.now_ms(), state)
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
        if previous is not None:
            g.offsets = previous.offsets
            g.pending_offset_commits = previous.pending_offset_commits
            if previous.state is not GroupState.DEAD:
                self._mark_dead(previous, ErrorCode.NOT_COORDINATOR)
        self._groups[group_id] = g
        if not self._is_loading(group_id):
            self._on_group_loaded(g)

    # ====================================================================== loading

    def begin_loading(self, partition: int) -> None:
        """Groups of `partition` answer COORDINATOR_LOAD_IN_PROGRESS until end_loading; any
        state held for it is dropped (the log is the truth)."""
        self._loading.add(partition)
        for gid, g in list(self._groups.items()):
            if self.partition_of(gid) == partition:
                if g.state is not GroupState.DEAD:
                    self._mark_dead(g, ErrorCode.NOT_COORDINATOR)
                del self._groups[gid]

    def end_loading(self, partition: int) -> None:
        self._loading.discard(partition)
        n_groups = n_offsets = 0
        for gid, g in list(self._groups.items()):
            if self.partition_of(gid) == partition:
                n_groups += 1
                n_offsets += len(g.offsets)
                self._on_group_loaded(g)
        # an empty partition is not worth a line at INFO (a new server has 50 of them)
        log.log(logging.INFO if n_groups else logging.DEBUG,
                "Finished loading offsets and group metadata from __consumer_offsets-%d: %d groups, "
                "%d offsets", partition, n_groups, n_offsets)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        log.info("Loading group metadata for %s with generation %d", group.group_id, group.generation_id)
        if group.size() > self.config.group_max_size:
            self._prepare_rebalance(
                group, f"Freshly-loaded group is over capacity ({self.config.group_max_size}). "
                       "Rebalancing in order to give a chance for consumers to commit offsets"
            )
        for m in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat(group, m)

    def is_loading(self, partition: int | None = None) -> bool:
        return bool(self._loading) if partition is None else partition in self._loading
