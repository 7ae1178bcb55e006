"""The share-partition manager (Kafka's SharePartitionManager): serves records to share
consumers. Owns every live share partition (server/group/share/partition.py, one per group and
topic partition), the share sessions (sessions.py), acquisition-lock expiry, the long poll of a
share fetch, and the durable state in __share_group_state (state.py, through the coordinator
runtime: an acknowledgement is answered only once its ShareUpdate / ShareSnapshot is fsynced).

A share partition is initialized at its first fetch: from its persisted state, else at
`share.auto.offset.reset` (latest by default, or earliest) whose snapshot is written and
fsynced before any record is handed out, so a restart neither skips nor repeats what was
acknowledged. Acquisitions are not persisted (as in Kafka): after a restart every record not
acknowledged is Available again.

`build_share_manager` takes the narrow dependencies it needs; the broker calls it once.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_records import StateBatch
from kcoord.server.group.share import partition as sp_mod
from kcoord.server.group.share.partition import (
    AckBatch,
    AckError,
    AckType,
    Acquired,
    RecordState,
    Run,
    SharePartition,
)
from kcoord.server.purgatory import DelayedOperation, Purgatory
from kcoord.server.share import records as batch_info
from kcoord.server.share.coordinator import ShareCoordinator
from kcoord.server.share.persister import Persister
from kcoord.server.share.sessions import ShareSessionCache
from kcoord.server.share.state import (
    Key,
    PersistedState,
    ShareStateRecords,
    ShareStateRuntime,
    ShareStateShard,
    StateRecord,
    state_partition,
)
from kcoord.storage.log import OffsetOutOfRangeError

log = logging.getLogger("kcoord.share")

RECORD_LIMIT = 1  # ShareAcquireMode (v2): exactly max_records; 0: whole batches (batch_optimized)

# broker settings (Kafka's names and defaults)
DEFAULTS: dict[str, int] = {
    "group.share.record.lock.duration.ms": sp_mod.RECORD_LOCK_DURATION_MS_DEFAULT,
    "group.share.delivery.count.limit": sp_mod.DELIVERY_COUNT_LIMIT_DEFAULT,
    "group.share.partition.max.record.locks": sp_mod.PARTITION_MAX_RECORD_LOCKS_DEFAULT,
    # share sessions the broker keeps: Kafka 4.0's group.share.max.groups (10) times
    # group.share.max.size (200); not a setting here
    "group.share.max.share.sessions": 2000,
    "share.coordinator.state.topic.num.partitions": 50,
    "share.coordinator.snapshot.update.records.per.snapshot": 500,
    "share.coordinator.write.timeout.ms": 5000,
    "share.coordinator.state.topic.segment.bytes": 104857600,
}


SETTINGS = tuple(k for k in DEFAULTS if k != "group.share.max.share.sessions")  # the broker's settings


def committed_reader(dp: Any) -> Callable[..., tuple[bytes, list[tuple[int, int]]]]:
    """read_committed over the data plane's transaction state: (data below the LSO, the
    aborted transactions it overlaps as (producer id, first offset))."""
    from kcoord.server.handlers import fetch_txn

    def read(topic: str, p: int, plog: Any, offset: int, data: bytes) -> tuple[bytes, list[tuple[int, int]]]:
        stable = fetch_txn.lso(dp, topic, p, plog)
        data, aborted = fetch_txn.committed_read(dp, topic, p, plog, offset, data, stable)
        return data, [(a.producer_id, a.first_offset) for a in aborted or ()]
    return read


@dataclass
class PartitionResult:
    """One partition's part of a ShareFetch / ShareAcknowledge response."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    ack_error: ErrorCode = ErrorCode.NONE
    ack_message: str | None = None
    records: bytes = b""
    acquired: list[Acquired] = field(default_factory=list)
    acked: bool = False  # the request acknowledged something here


TP = tuple[uuid.UUID, int]


class ShareManager:
    def __init__(self, *, runtime: ShareStateRuntime, shard: ShareStateShard, clock: Any, topics: Any,
                 partition_log: Callable[[str, int], Any], committed_read: Callable[..., tuple[bytes, Any]],
                 purgatory: Purgatory, settings: Mapping[str, int],
                 group_config: Callable[[str], Mapping[str, str]],
                 group_members: Callable[[str], int | None],
                 persister: Callable[[ShareCoordinator], Persister] | None = None,
                 state_partitions: Callable[[str], set[TP]] | None = None,
                 leader_epoch: Callable[[str, int], int | None] | None = None) -> None:
        """persister(coordinator): where share partitions' state is read and written
        (server/share/persister.py), given this node's share coordinator: that coordinator
        itself (None, one node), or on a cluster the leader of the key's __share_group_state
        partition; leader_epoch(topic, partition): this node's leader epoch of a data partition,
        None when it does not lead it (one node: 0, it leads everything)."""
        self.runtime = runtime
        self.shard = shard
        self.coordinator = ShareCoordinator(shard, runtime, clock)  # this node's share coordinator
        self.persister: Persister = self.coordinator if persister is None else persister(self.coordinator)
        self.leader_epoch = leader_epoch or (lambda topic, p: 0)
        # (leader epoch, state epoch) each live share partition was loaded at
        self.epochs: dict[Key, tuple[int, int]] = {}
        self.clock = clock
        self.topics = topics
        self.partition_log = partition_log
        self.committed_read = committed_read
        self.purgatory = purgatory
        self.settings = {**DEFAULTS, **settings}
        self.group_config = group_config
        self.group_members = group_members
        self.state_partitions = state_partitions or (lambda g: set())
        self.sessions = ShareSessionCache(self.settings["group.share.max.share.sessions"])
        self.partitions: dict[Key, SharePartition] = {}
        self._initializing: dict[Key, asyncio.Future[SharePartition]] = {}
        self._lock_timer: Any = None
        self._lock_timer_at: int | None = None
        self.loaded: asyncio.Future[None] | None = None

    # ------------------------------------------------------------------ configs

    def _gc(self, group: str) -> Mapping[str, str]:
        try:
            return self.group_config(group) or {}
        except Exception:  # noqa: BLE001 - a broken config source leaves Kafka's defaults
            log.exception("group_config(%r) failed", group)
            return {}

    def lock_duration_ms(self, group: str) -> int:
        v = self._gc(group).get("share.record.lock.duration.ms")
        return int(v) if v else self.settings["group.share.record.lock.duration.ms"]

    def _configure(self, group: str, sp: SharePartition) -> None:
        gc = self._gc(group)
        sp.lock_duration_ms = int(gc.get("share.record.lock.duration.ms") or
                                  self.settings["group.share.record.lock.duration.ms"])
        sp.delivery_count_limit = int(gc.get("share.delivery.count.limit") or
                                      self.settings["group.share.delivery.count.limit"])
        sp.max_record_locks = int(gc.get("share.partition.max.record.locks") or
                                  self.settings["group.share.partition.max.record.locks"])

    def read_committed(self, group: str) -> bool:
        return (self._gc(group).get("share.isolation.level") or "read_uncommitted") == "read_committed"

    # ------------------------------------------------------------------ share partitions

    async def ready(self) -> None:
        if self.loaded is not None:
            await asyncio.shield(self.loaded)

    def resolve(self, topic_id: uuid.UUID, partition: int) -> tuple[Any, ErrorCode]:
        topic = self.topics.by_id.get(topic_id)
        if topic is None:
            return None, ErrorCode.UNKNOWN_TOPIC_ID
        if partition < 0 or partition >= topic.partitions:
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return topic, ErrorCode.NONE

    def _current(self, key: Key, topic_name: str) -> tuple[SharePartition | None, int | None]:
        """The live share partition if this node still leads its data partition at the epoch it
        was loaded at (else it is dropped: a new leader epoch loads the persisted state again),
        and the leader epoch (None: not the leader)."""
        epoch = self.leader_epoch(topic_name, key[2])
        sp = self.partitions.get(key)
        if sp is not None and (epoch is None or self.epochs.get(key, (None,))[0] != epoch):
            self.drop(key)
            sp = None
        return sp, epoch

    def drop(self, key: Key) -> None:
        """This node no longer leads the data partition (or leads it at a new epoch): the share
        partition goes, with its locks; the persisted state is its next leader's to load."""
        if self.partitions.pop(key, None) is not None:
            log.info("Dropped share partition %s: no longer led here at its epoch", key)
        self.epochs.pop(key, None)

    def drop_unled(self) -> None:
        """Drop every live share partition whose data partition this node no longer leads at
        the epoch it was loaded at (called as leadership changes and before lock expiry)."""
        for key in list(self.partitions):
            topic = self.topics.by_id.get(key[1])
            if topic is None:
                self.drop(key)
            else:
                self._current(key, topic.name)

    async def partition(self, group: str, topic: Any, partition: int) -> SharePartition:
        """The live share partition, initialized (and its first snapshot durable) if new.
        Raises KafkaError-like AckError with the write's code when that snapshot fails, and
        NOT_LEADER_OR_FOLLOWER when this node does not lead the data partition."""
        key = (group, topic.topic_id, partition)
        sp, epoch = self._current(key, topic.name)
        if epoch is None:
            raise AckError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "this node does not lead the partition")
        if sp is not None:
            return sp
        fut = self._initializing.get(key)
        if fut is not None:
            return await asyncio.shield(fut)
        fut = self._initializing[key] = asyncio.get_running_loop().create_future()
        try:
            sp, state_epoch = await self._initialize(key, topic, partition, epoch)
            if self.leader_epoch(topic.name, partition) != epoch:
                raise AckError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "leadership moved while loading")
            self.partitions[key] = sp
            self.epochs[key] = (epoch, state_epoch)
            fut.set_result(sp)
            return sp
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: a waiter may not exist
            raise
        finally:
            self._initializing.pop(key, None)

    async def _initialize(self, key: Key, topic: Any, partition: int,
                          leader_epoch: int) -> tuple[SharePartition, int]:
        group = key[0]
        code, persisted = await self.persister.read(key, leader_epoch)
        if code is not None:
            raise AckError(code, f"could not read the share partition's state: {code.name}")
        if persisted is not None and persisted.start_offset >= 0:
            sp = SharePartition.from_snapshot(_snapshot(persisted))
            self._configure(group, sp)
            return sp, persisted.state_epoch
        plog = self.partition_log(topic.name, partition)
        reset = (self._gc(group).get("share.auto.offset.reset") or "latest").lower()
        if plog is None:
            start = 0
        elif reset == "earliest":
            start = plog.log_start_offset
        else:
            start = plog.log_end_offset
        state_epoch = 0 if persisted is None else persisted.state_epoch
        code = await self.persister.initialize(key, state_epoch, start, leader_epoch)
        if code is not None:
            raise AckError(code, f"could not persist the share partition's initial state: {code.name}")
        sp = SharePartition(start)
        self._configure(group, sp)
        return sp, state_epoch

    async def _write(self, records: list[StateRecord]) -> ErrorCode | None:
        """This node's own share-state writes (pruning, cleanup): through its coordinator."""
        return await self.coordinator.append(records)

    def _persist(self, key: Key, sp: SharePartition, changed: Iterable[Run]) -> Awaitable[ErrorCode | None]:
        """Persist the changed runs (an Acquired record as Available: locks do not survive)
        through the persister, at the epochs the partition was loaded at."""
        batches = []
        for r in changed:
            state = RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state
            batches.append(StateBatch(r.first, r.last, int(state), r.delivery_count))
        leader_epoch, state_epoch = self.epochs.get(key, (-1, -1))
        return asyncio.ensure_future(self.persister.write(key, state_epoch, leader_epoch, sp.start_offset, batches))

    def _persist_background(self, key: Key, sp: SharePartition, changed: list[Run]) -> None:
        """Expiries and releases: persisted without anyone waiting (as Kafka's)."""
        if not changed:
            return
        task = self._persist(key, sp, changed)

        def done(t: Any) -> None:
            code = None if t.cancelled() or t.exception() is not None else t.result()
            if code is not None or t.cancelled() or t.exception() is not None:
                log.warning("Could not persist share state of %s: %s", key,
                            code.name if code is not None else "cancelled or failed")
        task.add_done_callback(done)  # type: ignore[union-attr]

    async def _rebuild(self, key: Key, sp: SharePartition) -> None:
        """A write failed: the partition goes back to what is durable, keeping the records
        still held by their members (those are Available in the durable state); dropped when
        the durable state cannot be read (the next fetch loads it again)."""
        leader_epoch = self.epochs.get(key, (-1, -1))[0]
        code, persisted = await self.persister.read(key, leader_epoch)
        if code is not None or persisted is None or self.partitions.get(key) is not sp:
            if self.partitions.get(key) is sp:
                self.drop(key)
            return
        fresh = SharePartition.from_snapshot(_snapshot(persisted))
        self._configure(key[0], fresh)
        held = [r for r in sp.runs if r.state is RecordState.ACQUIRED]
        for r in held:
            for off in range(r.first, r.last + 1):
                cur = fresh.state_of(off)
                if off >= fresh.end_offset:
                    if off == fresh.end_offset:
                        fresh.runs.append(Run(off, off, RecordState.ACQUIRED, r.delivery_count, r.member,
                                              r.lock_deadline))
                        fresh.end_offset = off + 1
                elif cur is not None and cur.state is RecordState.AVAILABLE:
                    fresh._split_at(off)
                    fresh._split_at(off + 1)
                    fresh.runs = [Run(x.first, x.last, RecordState.ACQUIRED, r.delivery_count, r.member,
                                      r.lock_deadline) if x.first == off else x for x in fresh.runs]
        if fresh.end_offset < sp.end_offset:  # acquired-then-forgotten tail: Available again
            fresh.runs.append(Run(fresh.end_offset, sp.end_offset - 1, RecordState.AVAILABLE, 0))
            fresh.end_offset = sp.end_offset
        fresh._coalesce()
        self.partitions[key] = fresh

    # ------------------------------------------------------------------ acknowledging

    async def acknowledge(self, group: str, member: str, acks: Mapping[TP, list[AckBatch]], *,
                          allow_renew: bool) -> dict[TP, PartitionResult]:
        """Apply every partition's acknowledgements (each all or nothing) and wait until their
        records are durable. Returns the per-partition results."""
        out: dict[TP, PartitionResult] = {}
        writes: list[tuple[TP, Key, SharePartition, Awaitable[ErrorCode | None]]] = []
        now = self.clock.now_ms()
        for tp, batches in acks.items():
            res = out[tp] = PartitionResult(acked=True)
            topic, err = self.resolve(*tp)
            if err != ErrorCode.NONE:
                res.ack_error = err
                continue
            if not allow_renew and any(AckType.RENEW in b.types for b in batches):
                res.ack_error, res.ack_message = ErrorCode.INVALID_REQUEST, "RENEW needs version 2"
                continue
            key = (group, topic.topic_id, tp[1])
            sp, epoch = self._current(key, topic.name)
            if epoch is None:
                res.ack_error, res.ack_message = ErrorCode.NOT_LEADER_OR_FOLLOWER, "this node does not lead the partition"
                continue
            if sp is None:
                res.ack_error, res.ack_message = ErrorCode.INVALID_RECORD_STATE, "no records were acquired here"
                continue
            try:
                changed = sp.acknowledge(member, batches, now)
            except AckError as e:
                res.ack_error, res.ack_message = e.code, str(e)
                continue
            durable = [r for r in changed if r.state is not RecordState.ACQUIRED]  # RENEW needs no write
            if durable:
                writes.append((tp, key, sp, self._persist(key, sp, durable)))
            if any(r.state is RecordState.AVAILABLE or r.state is RecordState.ARCHIVED for r in changed):
                self.purgatory.check_and_complete((topic.name, tp[1]))
        for tp, key, sp, fut in writes:
            code = await fut
            if code is not None:
                out[tp].ack_error = code
                await self._rebuild(key, sp)
        self._arm_lock_timer()
        return out

    # ------------------------------------------------------------------ acquiring

    async def prepare(self, group: str, tps: Iterable[TP]) -> dict[TP, tuple[Any, SharePartition | None, ErrorCode]]:
        """Initialize the share partitions a fetch reads."""
        out = {}
        for tp in tps:
            topic, err = self.resolve(*tp)
            if err != ErrorCode.NONE:
                out[tp] = (None, None, err)
                continue
            try:
                out[tp] = (topic, await self.partition(group, topic, tp[1]), ErrorCode.NONE)
            except AckError as e:
                out[tp] = (topic, None, e.code)
        return out

    def available_bytes(self, group: str, parts: Mapping[TP, tuple[Any, SharePartition | None, ErrorCode]],
                        max_bytes: int) -> int:
        total = 0
        read_committed = self.read_committed(group)
        for (_, p), (topic, sp, _err) in parts.items():
            if sp is None:
                continue
            data, _ = self._read(topic, p, sp, max_bytes, read_committed)
            total += len(data)
        return total

    def _read(self, topic: Any, p: int, sp: SharePartition, max_bytes: int,
              read_committed: bool) -> tuple[bytes, Any]:
        plog = self.partition_log(topic.name, p)
        if plog is None or plog.deleted:
            return b"", None
        off = max(sp.next_fetch_offset(), plog.log_start_offset)
        if off >= plog.log_end_offset:
            return b"", None
        try:
            data = bytes(plog.read(off, max(max_bytes, 0), True))
        except (OffsetOutOfRangeError, OSError):
            return b"", None
        aborted = None
        if read_committed:
            data, aborted = self.committed_read(topic.name, p, plog, off, data)
        return data, aborted

    def acquire(self, group: str, member: str, parts: Mapping[TP, tuple[Any, SharePartition | None, ErrorCode]],
                max_bytes: int, max_records: int, mode: int) -> dict[TP, PartitionResult]:
        out: dict[TP, PartitionResult] = {}
        now = self.clock.now_ms()
        read_committed = self.read_committed(group)
        remaining_bytes, remaining_records = max(max_bytes, 0), max(max_records, 0)
        for tp, (topic, sp, err) in parts.items():
            res = out[tp] = PartitionResult(error=err)
            if sp is None or remaining_records <= 0:
                continue
            self._configure(group, sp)
            if remaining_bytes <= 0:
                continue  # max_bytes is used up (the first batch read may have been larger: KIP-74)
            data, aborted = self._read(topic, tp[1], sp, remaining_bytes, read_committed)
            infos = batch_info.batches(data)
            if not infos:
                continue
            bounds = [(b.base, b.last) for b in infos]
            if mode == RECORD_LIMIT:
                bounds = _limit(bounds, sp, remaining_records)
            got = sp.acquire(member, bounds, remaining_records, now)
            if not got:
                continue
            changed_back: list[Run] = []
            for first, last in batch_info.undeliverable(infos, aborted):
                changed_back += sp.archive_acquired(member, first, last, now)
            if changed_back:
                got = _subtract(got, [(r.first, r.last) for r in changed_back])
                self._persist_background((group, topic.topic_id, tp[1]), sp, changed_back)
            if not got:
                continue
            hi = got[-1].last_offset
            lo = got[0].first_offset
            kept = [b for b in infos if b.last >= lo and b.base <= hi]
            if kept:
                res.records = data[kept[0].start:kept[-1].end]
            res.acquired = got
            remaining_records -= sum(a.last_offset - a.first_offset + 1 for a in got)
            remaining_bytes = max(0, remaining_bytes - len(res.records))
        self._arm_lock_timer()
        return out

    # ------------------------------------------------------------------ locks, members, sessions

    def _arm_lock_timer(self) -> None:
        deadlines = [d for sp in self.partitions.values() if (d := sp.next_lock_deadline()) is not None]
        if not deadlines:
            return
        at = min(deadlines)
        if self._lock_timer is not None and self._lock_timer_at is not None and self._lock_timer_at <= at:
            return
        if self._lock_timer is not None:
            self._lock_timer.cancel()
        self._lock_timer_at = at
        self._lock_timer = self.clock.call_later(max(at - self.clock.now_ms(), 0) + 1, self.expire_locks)

    def expire_locks(self) -> None:
        self._lock_timer = self._lock_timer_at = None
        self.drop_unled()  # a former leader's expiries are not its to write
        now = self.clock.now_ms()
        for key, sp in list(self.partitions.items()):
            changed = sp.expire_locks(now)
            if changed:
                self._persist_background(key, sp, changed)
                self._wake(key)
        self._arm_lock_timer()

    def _wake(self, key: Key) -> None:
        topic = self.topics.by_id.get(key[1])
        if topic is not None:
            self.purgatory.check_and_complete((topic.name, key[2]))

    def release_member(self, group: str, member: str, only: Iterable[TP] | None = None) -> None:
        now = self.clock.now_ms()
        wanted = None if only is None else set(only)
        self.drop_unled()
        for key, sp in list(self.partitions.items()):
            if key[0] != group or (wanted is not None and (key[1], key[2]) not in wanted):
                continue
            changed = sp.release_member(member, now)
            if changed:
                self._persist_background(key, sp, changed)
                self._wake(key)

    def on_member_left(self, group_id: str, member_id: str) -> None:
        """The share group coordinator removed the member (left, fenced, expired): its
        acquired records go back and its share session is closed."""
        self.release_member(group_id, member_id)
        self.sessions.close(group_id, member_id)

    # ------------------------------------------------------------------ share offsets (APIs 90-92)

    def group_known(self, group: str) -> bool:
        return self.group_members(group) is not None or any(k[0] == group for k in self.shard.states)

    def known_partitions(self, group: str) -> set[TP]:
        """The group's share partitions that may have state: those this node's coordinator
        holds and those the group initialized (their state may be at another node's)."""
        return {(k[1], k[2]) for k in self.shard.states if k[0] == group} | set(self.state_partitions(group))

    async def states(self, group: str, tps: Iterable[TP]) -> dict[TP, tuple[ErrorCode | None, PersistedState | None]]:
        """The persisted state of each share partition, through the persister (this node's
        share coordinator, or another node's on a cluster)."""
        tps = list(tps)
        got = await asyncio.gather(*(self.persister.read((group, t, p), -1) for t, p in tps))
        return dict(zip(tps, got, strict=True))

    def lag(self, group: str, topic: Any, partition: int, s: PersistedState | None = None) -> int:
        if s is None:
            s = self.shard.get((group, topic.topic_id, partition))
        plog = self.partition_log(topic.name, partition)
        if s is None or plog is None or s.start_offset < 0:
            return -1
        done = sum(b.last_offset - b.first_offset + 1 for b in s.batches
                   if b.delivery_state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
                   and b.first_offset >= s.start_offset)
        return max(plog.log_end_offset - s.start_offset - done, 0)

    async def alter_start(self, group: str, topic: Any, partition: int, start: int) -> ErrorCode | None:
        key = (group, topic.topic_id, partition)
        code, old = await self.persister.read(key, -1)
        if code is not None:
            return code
        epoch = 0 if old is None else old.state_epoch + 1
        code = await self.persister.initialize(key, epoch, start, -1)
        if code is None:
            self.drop(key)
        return code

    async def delete_state(self, group: str, topic: Any) -> ErrorCode | None:
        keys = [(group, topic.topic_id, p) for p in range(topic.partitions)]
        codes = await self.persister.delete(keys)
        failed = next((c for c in codes.values() if c is not None), None)
        if failed is None:
            for k in keys:
                self.drop(k)
        return failed


PRUNE_INTERVAL_MS = 300_000  # Kafka's share.coordinator.state.topic.prune.interval.ms default
PRUNE_MIN_RECORDS = 1000  # a partition with fewer records than this (or 2 per key) is left alone


async def prune(manager: ShareManager, min_records: int = PRUNE_MIN_RECORDS) -> int:
    """Prune __share_group_state as Kafka's share coordinator does (DeleteRecords below what is
    still needed): for each partition holding more than max(min_records, 2 per key) records,
    write a ShareSnapshot of every key it holds, then move its log start to where those
    snapshots begin. Only when no write is in flight, so every record below that point is
    already replayed into the snapshots. Returns the number of partitions pruned."""
    shard, writer, logs = manager.shard, manager.runtime.writer, manager.runtime.logs
    topic = ShareStateRecords.topic
    pruned = 0
    if manager.loaded is not None and not manager.loaded.done():
        return 0  # a snapshot of a partly loaded state would drop the rest
    for p in range(shard.num_partitions):
        plog = logs.existing(topic, p)
        if plog is None or writer.pending or manager.runtime.state(p)[0] != "active":
            continue  # on a cluster only the partitions this node leads are its to prune
        keys = [k for k in shard.states if state_partition(k[0], k[1], k[2], shard.num_partitions) == p]
        if plog.log_end_offset - plog.log_start_offset <= max(min_records, 2 * len(keys)):
            continue
        end = plog.log_end_offset  # everything below is durable and replayed (nothing pending)
        now = manager.clock.now_ms()
        if keys and await manager._write([shard.snapshot_of(k, now) for k in keys]) is not None:
            continue
        before = plog.log_start_offset
        plog.increment_log_start_offset(end)
        try:
            logs.checkpoint_log_start_offsets()
        except OSError as e:  # not durable: nothing moves
            log.error("Writing log-start-offset-checkpoint failed: %s", e)
            plog.undo_log_start_offset(before)
            continue
        try:
            plog.delete_segments_before_start()
        except OSError as e:  # retried at the next start-up
            log.error("Deleting segments of %s-%d below its log start failed: %s", topic, p, e)
        pruned += 1
    return pruned


def _snapshot(persisted: PersistedState) -> sp_mod.Snapshot:
    return sp_mod.Snapshot(persisted.start_offset, tuple(
        sp_mod.StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
        for b in persisted.batches))


def _limit(bounds: list[tuple[int, int]], sp: SharePartition, n: int) -> list[tuple[int, int]]:
    """record_limit mode: new records past the window end are cut to `n` in all."""
    out = []
    end = sp.end_offset
    for base, last in bounds:
        if last < end:
            out.append((base, last))
            continue
        first = max(base, end)
        if n <= 0:
            break
        take = min(last - first + 1, n)
        out.append((base, first + take - 1))
        n -= take
        end = first + take
    return out


def _subtract(got: list[Acquired], cut: list[tuple[int, int]]) -> list[Acquired]:
    out = []
    for a in got:
        pieces = [(a.first_offset, a.last_offset)]
        for f, t in cut:
            nxt = []
            for x, y in pieces:
                if t < x or f > y:
                    nxt.append((x, y))
                    continue
                if x < f:
                    nxt.append((x, f - 1))
                if y > t:
                    nxt.append((t + 1, y))
            pieces = nxt
        out += [Acquired(x, y, a.delivery_count) for x, y in pieces]
    return out


class DelayedShareFetch(DelayedOperation):
    """A share fetch that found fewer than min_bytes: watched under each partition it reads
    (appends, releases and lock expiries retry it); on completion or expiry it acquires what
    is there."""

    __slots__ = ("manager", "group", "member", "parts", "max_bytes", "max_records", "mode", "min_bytes",
                 "future")

    def __init__(self, manager: ShareManager, group: str, member: str, parts: Any, max_wait_ms: int,
                 min_bytes: int, max_bytes: int, max_records: int, mode: int) -> None:
        super().__init__(max_wait_ms)
        self.manager, self.group, self.member, self.parts = manager, group, member, parts
        self.min_bytes, self.max_bytes, self.max_records, self.mode = min_bytes, max_bytes, max_records, mode
        self.future: asyncio.Future[dict[TP, PartitionResult]] = asyncio.get_running_loop().create_future()

    def try_complete(self) -> bool:
        if self.manager.available_bytes(self.group, self.parts, self.max_bytes) >= max(self.min_bytes, 1):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        if not self.future.done():
            self.future.set_result(self.manager.acquire(self.group, self.member, self.parts, self.max_bytes,
                                                        self.max_records, self.mode))


async def fetch(manager: ShareManager, group: str, member: str, parts: Any, *, max_wait_ms: int, min_bytes: int,
                max_bytes: int, max_records: int, mode: int) -> dict[TP, PartitionResult]:
    """Acquire now if min_bytes are there, else wait up to max_wait_ms (a delayed operation
    like Fetch's long poll)."""
    live = {tp: v for tp, v in parts.items() if v[1] is not None}
    if max_wait_ms <= 0 or not live or manager.available_bytes(group, live, max_bytes) >= max(min_bytes, 1):
        return manager.acquire(group, member, parts, max_bytes, max_records, mode)
    op = DelayedShareFetch(manager, group, member, parts, max_wait_ms, min_bytes, max_bytes, max_records, mode)
    keys = [(v[0].name, tp[1]) for tp, v in live.items()]
    manager.purgatory.try_complete_else_watch(op, keys)
    return await op.future


def build_share_manager(*, logs: Any, topics: Any, clock: Any, settings: Mapping[str, int],
                        partition_log: Callable[[str, int], Any], committed_read: Callable[..., Any],
                        purgatory: Purgatory, create_state_topic: Callable[[int, int], Any] | None,
                        group_config: Callable[[str], Mapping[str, str]] | None = None,
                        group_members: Callable[[str], int | None] | None = None,
                        state_partitions: Callable[[str], set[TP]] | None = None,
                        max_message_bytes: int = 1048588,
                        persister: Callable[[ShareCoordinator], Persister] | None = None,
                        leader_epoch: Callable[[str, int], int | None] | None = None,
                        on_append: Callable[[int], None] | None = None) -> ShareManager:
    """The share manager and its runtime over __share_group_state (created if missing, with
    `create_state_topic(partitions, segment_bytes)`; None on a cluster node, where the cluster
    creates it, server/share/cluster.py); its state loads in the background (manager.loaded)
    when the topic has records (on a cluster, partition by partition as this node leads them).
    `persister` and `leader_epoch`: a cluster node's (server/share/cluster.py placement), see
    ShareManager. `on_append(partition)`: after each append to __share_group_state (fetches
    waiting on it, a follower's fetch session among them, learn of the records)."""
    s = {**DEFAULTS, **settings}
    existing = topics.get(ShareStateRecords.topic)
    n = existing.partitions if existing is not None else s["share.coordinator.state.topic.num.partitions"]
    if existing is None and create_state_topic is not None:
        create_state_topic(n, s["share.coordinator.state.topic.segment.bytes"])
    shard = ShareStateShard(n, s["share.coordinator.snapshot.update.records.per.snapshot"])
    runtime = ShareStateRuntime(lambda _rt: shard, ShareStateRecords(n), logs, clock,
                                s["share.coordinator.write.timeout.ms"], max_message_bytes, on_append=on_append)
    manager = ShareManager(runtime=runtime, shard=shard, clock=clock, topics=topics, partition_log=partition_log,
                           committed_read=committed_read, purgatory=purgatory, settings=s,
                           group_config=group_config or (lambda g: {}),
                           group_members=group_members or (lambda g: None), state_partitions=state_partitions,
                           persister=persister, leader_epoch=leader_epoch)
    if existing is not None and any(logs.existing(ShareStateRecords.topic, p) is not None for p in range(n)):
        manager.loaded = asyncio.ensure_future(runtime.load_all())
    runtime.every(PRUNE_INTERVAL_MS, lambda: prune(manager))
    return manager

