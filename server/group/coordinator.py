"""GroupCoordinator: the group coordinator the handlers call, composed as Kafka's
GroupCoordinatorShard is: a group metadata manager (the groups of every type), an offset
metadata manager (every group's committed offsets) and, per group type, the unit that runs
that type's protocol (server/group/classic/). Each API and each record key is routed once,
in the two tables below.

The API methods take the decoded kafka-python request and the negotiated version and return
a CoordinatorResult (server/group/result.py). Persisted state changes in replay(), which the
runtime calls for a result's records when it is made (server/coordinator/result.py states the
rule; current_record() tells it how to revert them) and, at start-up, for every record of a
partition between begin_loading() and end_loading(); answers wait until the records are
durable. A classic group's state is kept ahead of its records by its requests, as in Kafka
(whose classic writes do not replay): replaying a live group's GroupMetadata changes nothing,
and what a durable assignment completes is done by the write's on_appended. In-memory-only
state (parked requests, timers, members joining during a rebalance) changes directly.

Routing: every result's records belong to one group, except expire_offsets() and
delete_groups(), whose records are contiguous per group: route each record by
partition_of(record.key.group). Writes nobody asked for (a group emptied by a session timeout)
go to the background writer given at construction (the runtime's write_background).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kcoord.protocol import consumer_group_codec
from kcoord.protocol.coordinator_records import (
    CoordinatorRecord,
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.server.clock import Clock
from kcoord.server.group.classic.group import ClassicGroup
from kcoord.server.group.classic.member import JoinResult
from kcoord.server.group.classic.membership import ClassicMembership
from kcoord.server.group.config import GroupConfig
from kcoord.server.group.consumer.classic_members import ClassicMembersOfConsumerGroups
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.protocol import ConsumerGroupProtocol
from kcoord.server.group.consumer.records import ConsumerGroupRecords
from kcoord.server.group.consumer.timers import Timers
from kcoord.server.group.consumer.topics import GroupTopics, TopicSource
from kcoord.server.group.consumer.writes import ConsumerGroupWrites
from kcoord.server.group.group_manager import GroupMetadataManager, log
from kcoord.server.group.migration import GroupMigration
from kcoord.server.group.offset_manager import OffsetMetadataManager
from kcoord.server.group.responses import delete_groups_response, heartbeat_response, join_response
from kcoord.server.group.result import CoordinatorResult
from kcoord.server.group.share.coordinator import ShareGroupCoordinator
from kcoord.server.group.share.group import ShareGroup
from kcoord.server.group.share.ports import MemberLeft
from kcoord.server.group.txn_offsets import PendingTxnOffsets
from kcoord.server.group.types import Group, GroupType


class GroupCoordinator:
    def __init__(self, config: GroupConfig, clock: Clock, num_partitions: int = 50,
                 background_writer: Callable[[CoordinatorResult], None] | None = None,
                 end_of_turn: Callable[[Callable[[], None]], None] | None = None,
                 topics: TopicSource | None = None, txn_offsets: PendingTxnOffsets | None = None,
                 share_member_left: Sequence[MemberLeft] = (),
                 committed: Callable[[Any], Any] | None = None) -> None:
        """background_writer, end_of_turn: see GroupMetadataManager (the runtime's
        write_background and end_of_turn); topics: the broker's topics (set_topics);
        txn_offsets: the offsets of open transactions (the transaction coordinator writes them);
        share_member_left: called with (group id, member id) once a share group member's
        leaving is durable (the share-partition side releases what it held); committed: the
        runtime's (the value last made durable of a key with a write in flight), which
        OffsetFetch reads."""
        self.config = config
        self.clock = clock
        self.num_partitions = num_partitions
        self.group_manager = groups = GroupMetadataManager(config, clock, num_partitions, background_writer,
                                                           end_of_turn)
        self.offset_manager = offsets = OffsetMetadataManager(groups, txn_offsets, committed)
        self.classic = classic = ClassicMembership(groups)
        # the consumer group protocol (KIP-848) and the online migration between the two types
        # (conversions, and classic members served inside consumer groups) share the broker's
        # topics (set_topics), how consumer group records are applied (undone by replaying what
        # memory held: a classic group's record for a conversion) and the members' timers
        group_topics = GroupTopics()
        records = ConsumerGroupRecords(groups)
        writes = ConsumerGroupWrites(groups, records, replay=self.replay, classic_record=self._classic_record)
        timers = Timers(clock)
        self.migration = migration = GroupMigration(groups, classic, writes, timers, group_topics)
        self.consumer = consumer = ConsumerGroupProtocol(groups, group_topics, records, writes, timers, migration)
        self.classic_in_consumer = ClassicMembersOfConsumerGroups(consumer, migration)
        # share groups (KIP-932): the same topics; ports.ShareGroupMembership for the share partitions
        self.share = share = ShareGroupCoordinator(groups, config, clock, group_topics, share_member_left)
        offsets.commit_hooks[ClassicGroup] = classic.on_offset_commit
        # what finishing a partition's load does to a group, by type
        self._on_loaded: dict[GroupType, Callable[[Any], None]] = {
            GroupType.CLASSIC: classic.on_group_loaded,
            GroupType.CONSUMER: consumer.on_group_loaded,
            GroupType.SHARE: share.on_group_loaded,
        }

        # ---- the APIs: (request, version) -> CoordinatorResult, each served by one unit ----
        # (the classic APIs by the group's type: join_group, sync_group, heartbeat,
        # heartbeat_error, leave_group below)
        self.offset_commit = offsets.offset_commit
        self.offset_fetch = offsets.offset_fetch
        self.offset_delete = offsets.offset_delete
        self.describe_groups = groups.describe_groups
        self.list_groups = groups.list_groups
        self.consumer_group_heartbeat = consumer.heartbeat  # (request, version, client_id, client_host)
        self.consumer_group_keepalive = consumer.keepalive  # its steady state: a KeepAlive, or None
        self.consumer_group_describe = consumer.describe
        self.share_group_heartbeat = share.heartbeat  # (request, version, client_id, client_host)
        self.share_group_describe = share.describe
        # delete_groups (below) needs both managers
        self.expire_offsets = offsets.expire_offsets  # the retention task, no request
        self.on_partitions_deleted = offsets.on_partitions_deleted  # DeleteTopics

        # ---- the records: key type -> replay(key, value) ----
        self._replayers: dict[type, Callable[[Any, Any], None]] = {
            OffsetKey: offsets.replay,
            GroupKey: self._replay_group_metadata,
        }
        for key_type in consumer_group_codec.KEY_VERSIONS:
            self._replayers[key_type] = consumer.replay
        for key_type in share.key_types:
            self._replayers[key_type] = share.replay
        # ---- and how memory reads back as a key's record (the runtime reverts with it) ----
        self._offsets_by_group = offsets.offsets_by_group  # current_record's offsets, read directly
        self._current_consumer_record = writes.current_record  # classic or consumer group keys
        self._share_key_types = frozenset(share.key_types)
        self._current_share_record = share.records.current_record

        self._replay_offset = offsets.replay
        self.partition_of = groups.partition_of
        self.set_background_writer = groups.set_background_writer
        self.drain_background = groups.drain_background
        self.run_end_of_turn = groups.run_end_of_turn
        if topics is not None:
            self.set_topics(topics)

    # ====================================================================== the classic APIs

    def _consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The group when classic requests for it go to its consumer group (Kafka 4.x's
        classicGroup*ToConsumerGroup); None when the classic unit answers them."""
        group = self.group_manager.groups_by_id.get(group_id)
        return group if group.__class__ is ConsumerGroup else None

    def join_group(self, req: Any, version: int, client_id: str, client_host: str) -> CoordinatorResult:
        if self.group_manager.groups_by_id.get(req.group_id).__class__ is ShareGroup:
            # Kafka: the id is a share group's; no classic member joins it
            return CoordinatorResult(response=join_response(
                version, JoinResult("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL)))
        group = self._consumer_group(req.group_id)
        if group is not None and not group.is_empty():
            return self.classic_in_consumer.join_group(group, req, version, client_id, client_host)
        # an empty consumer group becomes a classic group (the classic unit converts it)
        return self.classic.join_group(req, version, client_id, client_host)

    def sync_group(self, req: Any, version: int) -> CoordinatorResult:
        group = self._consumer_group(req.group_id)
        if group is not None:
            return self.classic_in_consumer.sync_group(group, req, version)
        return self.classic.sync_group(req, version)

    def heartbeat_error(self, req: Any, version: int) -> ErrorCode:
        """Heartbeat's whole outcome is its error code (the server's fast path encodes it alone)."""
        group = self._consumer_group(req.group_id)
        if group is not None:
            return self.classic_in_consumer.heartbeat_error(group, req, version)
        return self.classic.heartbeat_error(req, version)

    def heartbeat(self, req: Any, version: int) -> CoordinatorResult:
        return CoordinatorResult(response=heartbeat_response(version, self.heartbeat_error(req, version)))

    def leave_group(self, req: Any, version: int) -> CoordinatorResult:
        group = self._consumer_group(req.group_id)
        if group is not None:
            return self.classic_in_consumer.leave_group(group, req, version)
        return self.classic.leave_group(req, version)

    # ====================================================================== inspection

    def group(self, group_id: str) -> Any:
        """The live group of any type, or None (tests and tools may inspect it; do not mutate)."""
        return self.group_manager.group(group_id)

    def groups(self) -> list[Any]:
        return self.group_manager.groups()

    def committed_offsets(self, group_id: str) -> Iterator[tuple[str, int, OffsetValue]]:
        """(topic, partition, value) of every offset the group has committed."""
        return self.offset_manager.committed(group_id)

    def set_topics(self, topics: TopicSource) -> None:
        """The broker's topics, which consumer groups subscribe to (by name or regex)."""
        self.consumer.topics.source = topics

    def _classic_record(self, key: GroupKey) -> CoordinatorRecord:
        group = self.group_manager.group(key.group)
        if isinstance(group, ClassicGroup) and not group.is_dead():
            return self.classic.group_record(group, {mid: m.assignment for mid, m in group.members.items()})
        return CoordinatorRecord(key, None)

    def is_loading(self, partition: int | None = None) -> bool:
        loading = self.group_manager.loading
        return bool(loading) if partition is None else partition in loading

    # ====================================================================== replay

    def replay(self, record: CoordinatorRecord) -> None:
        key = record.key
        if key.__class__ is OffsetKey:  # the bulk of every log: no table look-up
            self._replay_offset(key, record.value)
            return
        replay = self._replayers.get(type(key))
        if replay is None:
            log.warning("Skipping __consumer_offsets record with unknown key %r", record.key)
            return
        replay(record.key, record.value)

    def current_record(self, key: Any) -> CoordinatorRecord:
        """The record that, replayed, puts back what memory holds now for `key` (a tombstone
        when nothing): how the runtime reverts a write that never reached the log."""
        if key.__class__ is OffsetKey:  # every commit: no call more than needed
            s = self._offsets_by_group.get(key.group)
            return CoordinatorRecord(key, None if s is None else s.get(key.topic, key.partition))
        if key.__class__ in self._share_key_types:
            return self._current_share_record(key)
        return self._current_consumer_record(key)

    def _replay_group_metadata(self, key: GroupKey, value: GroupValue | None) -> None:
        self.classic.replay(key, value)
        if value is None and self.offset_manager.count(key.group):
            # offsets outlive the group metadata until their own tombstones
            self.group_manager.classic_group_for_offsets(key.group)

    # ====================================================================== loading

    def begin_loading(self, partition: int) -> None:
        """Groups of `partition` answer COORDINATOR_LOAD_IN_PROGRESS until end_loading; any
        state held for it is dropped (the log is the truth)."""
        self.group_manager.begin_loading(partition)
        self.offset_manager.begin_loading(partition)

    def unload(self, partition: int) -> None:
        """Another node coordinates `partition` (runtime.unload): its groups and offsets are
        dropped, parked requests answered NOT_COORDINATOR, and so are later ones."""
        self.group_manager.unload(partition)
        self.offset_manager.begin_loading(partition)

    def end_loading(self, partition: int) -> None:
        self.group_manager.end_loading(partition)
        n_groups = n_offsets = 0
        for g in self.group_manager.groups_of_partition(partition):
            n_groups += 1
            n_offsets += self.offset_manager.count(g.group_id)
            on_loaded = self._on_loaded.get(g.TYPE)
            if on_loaded is not None:
                on_loaded(g)
        # an empty partition is not worth a line at INFO (a new server has 50 of them)
        log.log(logging.INFO if n_groups else logging.DEBUG,
                "Finished loading offsets and group metadata from __consumer_offsets-%d: %d groups, "
                "%d offsets", partition, n_groups, n_offsets)

    # ====================================================================== DeleteGroups

    def delete_groups(self, req: Any, version: int) -> CoordinatorResult:
        """Records may span several groups (contiguous per group): route each record by
        partition_of(record.key.group)."""
        results: dict[str, ErrorCode] = {}
        deleted: list[Group] = []
        now = self.clock.now_ms()
        for gid in dict.fromkeys(req.groups_names):
            err = self.group_manager.validate(gid, "delete_groups")
            if err is None:
                group = self.group_manager.group(gid)
                err = ErrorCode.GROUP_ID_NOT_FOUND if group is None else group.validate_delete_group()
            if err is not None:
                results[gid] = err
                continue
            group.mark_dead(now, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            deleted.append(group)
            results[gid] = ErrorCode.NONE
        if not deleted:
            return CoordinatorResult(response=delete_groups_response(version, list(results.items())))
        records: list[CoordinatorRecord] = []
        n_offsets = 0
        for g in deleted:
            n_offsets += self.offset_manager.delete_all_offsets(g.group_id, records)
            records.extend(g.tombstones())
        log.info("The following groups were deleted: %s. A total of %d offsets were removed.",
                 ", ".join(g.group_id for g in deleted), n_offsets)

        def on_appended(error: ErrorCode | None) -> Any:
            for g in deleted:
                if error is None:
                    self.group_manager.remove_dead(g)
                else:
                    self.group_manager.revive(g)
                    results[g.group_id] = error
            return delete_groups_response(version, list(results.items()))

        return CoordinatorResult(records=records, on_appended=on_appended)
