"""The durable share-partition state (Kafka's share coordinator): what __share_group_state
holds per share partition, keyed as Kafka keys it ("group:topicId:partition", its partition
abs(javaHashCode(key)) % share.coordinator.state.topic.num.partitions), as ShareSnapshot and
ShareUpdate records in Kafka's format (protocol/share_records.py).

- A ShareSnapshot replaces a partition's state; a ShareUpdate is merged into it (its start
  offset, when not -1, moves the start; its state batches override the ranges they cover;
  batches below the start are dropped). A tombstone (null value) of either key forgets it.
- `records_for` makes the next record of a partition: a snapshot for a partition with no
  state, or after `share.coordinator.snapshot.update.records.per.snapshot` updates, else an
  update (Kafka's ShareCoordinatorShard).
- The topic is cleanup.policy=delete as Kafka creates it (KIP-932), so its log is replayed in
  order, every record (ShareStateRuntime: the generic loader keeps only the latest value per
  key, which would drop the updates between snapshots). It is pruned instead of compacted
  (ShareManager.prune): every key of a partition is written again as a snapshot, and the log
  start moves past what came before.

Live writes go through the coordinator runtime (server/coordinator/): appended, fsynced,
replayed here, only then answered.
"""
from __future__ import annotations

import asyncio
import base64
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from kcoord.protocol.errors import ErrorCode, coordinator_append_error
from kcoord.protocol.partitioner import java_string_hashcode
from kcoord.protocol.share_records import (
    ShareRecordError,
    ShareSnapshotValue,
    ShareStateKey,
    ShareUpdateValue,
    StateBatch,
    decode_state_key,
    decode_value,
    encode_state_key,
    encode_value,
)
from kcoord.protocol.topics import SHARE_STATE_TOPIC
from kcoord.server.coordinator.runtime import CoordinatorRuntime

log = logging.getLogger("kcoord.share")

NUM_PARTITIONS_DEFAULT = 50  # share.coordinator.state.topic.num.partitions
SNAPSHOT_EVERY_DEFAULT = 500  # share.coordinator.snapshot.update.records.per.snapshot
Key = tuple[str, uuid.UUID, int]  # (group, topic id, partition)


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def coordinator_key(group: str, topic_id: uuid.UUID, partition: int) -> str:
    return f"{group}:{kafka_uuid(topic_id)}:{partition}"


def state_partition(group: str, topic_id: uuid.UUID, partition: int, num_partitions: int) -> int:
    h = java_string_hashcode(coordinator_key(group, topic_id, partition))
    return (0 if h == -2**31 else abs(h)) % num_partitions


@dataclass(frozen=True, slots=True)
class StateRecord:
    """One __share_group_state record: value None is a tombstone."""

    key: ShareStateKey
    value: ShareSnapshotValue | ShareUpdateValue | None


@dataclass(frozen=True, slots=True)
class PersistedState:
    """A share partition's durable state (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int = 0


def combine(old: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int) -> tuple[StateBatch, ...]:
    """`new` batches override `old` where they overlap; nothing below start_offset survives;
    adjacent batches in the same state and count are joined."""
    pieces: list[StateBatch] = []
    newer = sorted(new, key=lambda b: b.first_offset)
    for b in sorted(old, key=lambda b: b.first_offset):
        parts = [b]
        for n in newer:
            nxt = []
            for p in parts:
                if n.last_offset < p.first_offset or n.first_offset > p.last_offset:
                    nxt.append(p)
                    continue
                if p.first_offset < n.first_offset:
                    nxt.append(replace(p, last_offset=n.first_offset - 1))
                if p.last_offset > n.last_offset:
                    nxt.append(replace(p, first_offset=n.last_offset + 1))
            parts = nxt
        pieces += parts
    pieces += newer
    out: list[StateBatch] = []
    for b in sorted(pieces, key=lambda b: b.first_offset):
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = replace(b, first_offset=start_offset)
        if out and out[-1].last_offset + 1 == b.first_offset and \
                (out[-1].delivery_state, out[-1].delivery_count) == (b.delivery_state, b.delivery_count):
            out[-1] = replace(out[-1], last_offset=b.last_offset)
        else:
            out.append(b)
    return tuple(out)


class ShareStateRecords:
    """How the records sit in __share_group_state (the runtime's RecordFormat)."""

    topic = SHARE_STATE_TOPIC
    timeout_config = "share.coordinator.write.timeout.ms"
    decode_errors = (ShareRecordError,)

    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions

    def partition_of(self, record: StateRecord) -> int:
        k = record.key
        return state_partition(k.group, k.topic_id, k.partition, self.num_partitions)

    @staticmethod
    def encode(record: StateRecord) -> tuple[bytes, bytes | None]:
        return encode_state_key(record.key), None if record.value is None else encode_value(record.value)

    @staticmethod
    def decode(key: bytes, value: bytes | None) -> StateRecord | None:
        k = decode_state_key(key)
        return StateRecord(k, decode_value(k, value))

    @staticmethod
    def append_error(code: ErrorCode) -> ErrorCode:
        return coordinator_append_error(code)


class ShareStateShard:
    """Every share partition's persisted state, changed only by replay."""

    def __init__(self, num_partitions: int, snapshot_every: int = SNAPSHOT_EVERY_DEFAULT) -> None:
        self.num_partitions = num_partitions
        self.snapshot_every = snapshot_every
        self.states: dict[Key, PersistedState] = {}
        self.updates_since_snapshot: dict[Key, int] = {}
        self.loading: set[int] = set()

    def begin_loading(self, partition: int) -> None:
        self.loading.add(partition)

    def end_loading(self, partition: int) -> None:
        self.loading.discard(partition)

    def is_loading(self, partition: int | None = None) -> bool:
        return bool(self.loading) if partition is None else partition in self.loading

    def unload(self, partition: int) -> None:
        """This node no longer leads the partition (server/coordinator/runtime.py): its keys'
        state goes; the next leader loads it from its replica of the log."""
        self.loading.discard(partition)
        for key in [k for k in self.states if state_partition(k[0], k[1], k[2], self.num_partitions) == partition]:
            del self.states[key]
            self.updates_since_snapshot.pop(key, None)

    def replay(self, record: StateRecord) -> None:
        k = record.key
        key = (k.group, k.topic_id, k.partition)
        v = record.value
        if v is None:
            self.states.pop(key, None)
            self.updates_since_snapshot.pop(key, None)
            return
        if isinstance(v, ShareSnapshotValue):
            self.states[key] = PersistedState(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                                              combine((), v.state_batches, v.start_offset), v.create_timestamp)
            self.updates_since_snapshot[key] = 0
            return
        old = self.states.get(key)
        if old is None:  # an update without its snapshot (pruned): take it as the state
            start = max(v.start_offset, 0)
            self.states[key] = PersistedState(v.snapshot_epoch, 0, v.leader_epoch, start,
                                              combine((), v.state_batches, start))
        else:
            start = old.start_offset if v.start_offset == -1 else v.start_offset
            self.states[key] = PersistedState(
                old.snapshot_epoch, old.state_epoch, old.leader_epoch if v.leader_epoch == -1 else v.leader_epoch,
                start, combine(old.batches, v.state_batches, start), old.create_timestamp)
        self.updates_since_snapshot[key] = self.updates_since_snapshot.get(key, 0) + 1

    def get(self, key: Key) -> PersistedState | None:
        return self.states.get(key)

    def current_record(self, key: ShareStateKey) -> StateRecord:
        """The record that, replayed, puts back what the share partition of `key` (snapshot or
        update key alike) holds now: a snapshot of its state, or a tombstone (the runtime's
        revert of a write that never became durable, server/coordinator/result.py)."""
        snapshot_key = key if key.snapshot else ShareStateKey(True, key.group, key.topic_id, key.partition)
        s = self.states.get((key.group, key.topic_id, key.partition))
        if s is None:
            return StateRecord(snapshot_key, None)
        return StateRecord(snapshot_key, ShareSnapshotValue(s.snapshot_epoch, s.state_epoch, s.leader_epoch,
                                                            s.start_offset, s.create_timestamp, 0, s.batches))

    def records_for(self, key: Key, start_offset: int, batches: Iterable[StateBatch], now: int, *,
                    state_epoch: int | None = None, full: bool = False, leader_epoch: int = -1) -> list[StateRecord]:
        """The record that persists `batches` (changed ranges) and the start offset (-1:
        unchanged): a snapshot (with the whole state merged) when the key has none yet, after
        snapshot_every updates, or when `full` (the batches are the whole state); else an
        update. `leader_epoch` (-1: unchanged) is the data partition's leader epoch of the
        writer, stored for fencing (server/share/coordinator.py)."""
        group, topic_id, partition = key
        old = self.states.get(key)
        if start_offset < 0:
            start_offset = old.start_offset if old is not None else 0
        if full or old is None or self.updates_since_snapshot.get(key, 0) >= self.snapshot_every:
            merged = combine(() if (full or old is None) else old.batches, batches, start_offset)
            epoch = 0 if old is None else old.snapshot_epoch + 1
            s_epoch = state_epoch if state_epoch is not None else (0 if old is None else old.state_epoch)
            created = now if old is None or full else old.create_timestamp
            l_epoch = max(leader_epoch, 0 if old is None else old.leader_epoch)
            value: Any = ShareSnapshotValue(epoch, s_epoch, l_epoch, start_offset, created, now, merged)
            return [StateRecord(ShareStateKey(True, group, topic_id, partition), value)]
        value = ShareUpdateValue(old.snapshot_epoch, leader_epoch if leader_epoch > old.leader_epoch else -1,
                                 start_offset, tuple(batches))
        return [StateRecord(ShareStateKey(False, group, topic_id, partition), value)]

    def snapshot_of(self, key: Key, now: int) -> StateRecord:
        """A ShareSnapshot of the key's state as it is (pruning rewrites every key this way)."""
        group, topic_id, partition = key
        s = self.states[key]
        return StateRecord(ShareStateKey(True, group, topic_id, partition), ShareSnapshotValue(
            s.snapshot_epoch + 1, s.state_epoch, s.leader_epoch, s.start_offset, s.create_timestamp, now, s.batches))

    def tombstones(self, key: Key) -> list[StateRecord]:
        group, topic_id, partition = key
        return [StateRecord(ShareStateKey(True, group, topic_id, partition), None),
                StateRecord(ShareStateKey(False, group, topic_id, partition), None)]


class ShareStateRuntime(CoordinatorRuntime[StateRecord]):
    """The coordinator runtime over __share_group_state, loading every record in log order."""

    async def _load_partition(self, partition: int) -> int:
        started = time.monotonic()
        plog = self.logs.existing(self.topic, partition)
        n = 0
        if plog is not None:
            for _offset, key, value in plog.iter_records(buffer_size=self.load_buffer_size):
                n += 1
                if key is None:
                    continue
                try:
                    record = self.records.decode(key, value)
                except self.records.decode_errors as e:
                    log.warning("Skipping undecodable record in %s-%d: %s", self.topic, partition, e)
                    continue
                if record is not None:
                    self.shard.replay(record)
                if n % 20_000 == 0:
                    await asyncio.sleep(0)
        self.shard.end_loading(partition)
        if n:
            log.info("Loaded %s-%d in %d ms: %d records", self.topic, partition,
                     (time.monotonic() - started) * 1000, n)
        return n
