"""The replica manager: which partitions this node hosts, as leader or follower (Kafka's
ReplicaManager.becomeLeaderOrFollower / stopReplicas), the ISR changes its leaders propose,
the acks=all purgatory, and the fetchers that make followers copy their leaders.

The controller side calls:
    apply(states, endpoints)        every time the partitions this node hosts change;
    stop_replicas(partitions, delete)
and gives, at construction, alter_isr(state, new_isr) -> the accepted PartitionState, or None
when the proposal was fenced (a newer controller epoch or znode version).

A state older than the one held (smaller leader epoch) is refused with FENCED_LEADER_EPOCH;
one that makes this node a follower in a newer epoch takes effect before apply returns: from
then on it answers NOT_LEADER_OR_FOLLOWER and its parked acks=all produces are answered so.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.clock import Clock
from kcoord.server.cluster.partition_state import NO_LEADER, PartitionState
from kcoord.server.purgatory import Purgatory
from kcoord.server.replication.hw_checkpoint import HighWatermarkCheckpoint
from kcoord.server.replication.partition import PartitionReplica
from kcoord.storage.leader_epoch import LeaderEpochCache
from kcoord.storage.log import PartitionLog

log = logging.getLogger("kcoord.replication")

AlterIsr = Callable[[PartitionState, tuple[int, ...]], Awaitable[PartitionState | None]]
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ReplicationSettings:
    """Kafka's broker configs of the same names, with its defaults."""

    replica_lag_time_max_ms: int = 30000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30000
    replica_high_watermark_checkpoint_interval_ms: int = 5000

    @classmethod
    def from_config(cls, config: Any) -> ReplicationSettings:
        """The broker's values of the same names (server/config_catalogue.py)."""
        return cls(**{name: config[name.replace("_", ".")] for name in cls.__dataclass_fields__})


@dataclass(slots=True)
class DataHooks:
    """What the data plane does when replication changes a log under it."""

    log_for: Callable[[str, int], PartitionLog | None]  # the partition's log, created if need be
    woken: Callable[[str, int], None]  # data became readable (high watermark moved, follower append)
    truncated: Callable[[str, int], None]  # the log was cut: state derived from it is rebuilt
    replicated: Callable[[str, int, PartitionLog, list, int], None]  # follower appended (headers, base)
    deleted: Callable[[str, int], None] = lambda t, p: None  # stop_replicas(delete=True)


class ReplicaManager:
    def __init__(self, broker_id: int, clock: Clock, alter_isr: AlterIsr, hooks: DataHooks,
                 settings: ReplicationSettings | None = None, hw_checkpoint: HighWatermarkCheckpoint | None = None,
                 ) -> None:
        self.broker_id = broker_id
        self.hw_checkpoint = hw_checkpoint  # replication-offset-checkpoint (hw_checkpoint.py)
        self._hw_task: asyncio.Task | None = None
        self.clock = clock
        self.alter_isr = alter_isr
        self.hooks = hooks
        self.settings = settings or ReplicationSettings()
        self.replicas: dict[TopicPartition, PartitionReplica] = {}
        self.produce_purgatory = Purgatory(clock, "produce")
        self.endpoints: dict[int, tuple[str, int]] = {}
        from kcoord.server.replication.fetcher import FetcherManager

        self.fetchers = FetcherManager(self)
        self._tasks: set[asyncio.Task] = set()
        self._isr_task: asyncio.Task | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """The periodic ISR shrink check (every replica.lag.time.max.ms / 2, as Kafka)."""
        if self._isr_task is None:
            self._isr_task = asyncio.ensure_future(self._isr_loop())
        if self._hw_task is None and self.hw_checkpoint is not None:
            self._hw_task = asyncio.ensure_future(self._hw_loop())

    async def stop(self) -> None:
        if self._isr_task is not None:
            self._isr_task.cancel()
            self._isr_task = None
        if self._hw_task is not None:
            self._hw_task.cancel()
            self._hw_task = None
        await self.fetchers.stop_all()
        for t in list(self._tasks):
            t.cancel()
        self.checkpoint_high_watermarks()  # Kafka's last checkpoint at shutdown
        for r in self.replicas.values():  # parked acks=all produces answer NOT_LEADER_OR_FOLLOWER
            r.stopped = True
            self._answer_waiting(r)

    async def _hw_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.replica_high_watermark_checkpoint_interval_ms / 1000.0)
            self.checkpoint_high_watermarks()

    def checkpoint_high_watermarks(self) -> None:
        if self.hw_checkpoint is None:
            return
        try:
            self.hw_checkpoint.write({k: r.hw for k, r in self.replicas.items()})
        except OSError as e:  # Kafka marks the log directory offline; the next interval tries again
            log.error("Writing the high watermark checkpoint failed: %s", e)

    async def _isr_loop(self) -> None:
        interval = self.settings.replica_lag_time_max_ms / 2000.0
        while True:
            await asyncio.sleep(interval)
            try:
                self.maybe_shrink_isrs()
            except Exception:  # noqa: BLE001 - retried at the next interval
                log.exception("ISR shrink check failed")

    # ------------------------------------------------------------------ the controller's calls

    def apply(self, states: Iterable[PartitionState],
              endpoints: Mapping[int, tuple[str, int]]) -> dict[TopicPartition, ErrorCode]:
        """Become leader or follower of each partition in `states` that lists this node among
        its replicas (Kafka's becomeLeaderOrFollower). Returns an error per refused partition."""
        self.endpoints.update(endpoints)
        errors: dict[TopicPartition, ErrorCode] = {}
        now = self.clock.now_ms()
        for st in states:
            key = (st.topic, st.partition)
            if self.broker_id not in st.replicas:
                continue
            current = self.replicas.get(key)
            if current is not None and st.leader_epoch < current.leader_epoch:
                log.warning("Ignoring state of %s-%d at leader epoch %d: epoch %d is current", st.topic,
                            st.partition, st.leader_epoch, current.leader_epoch)
                errors[key] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            if current is None:
                plog = self.hooks.log_for(st.topic, st.partition)
                if plog is None:
                    errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
                    continue
                current = PartitionReplica(self.broker_id, plog, _epoch_cache(plog), st)
                # Kafka's Partition.createLog: the checkpointed high watermark, within the log
                start = self.hw_checkpoint.initial(key) if self.hw_checkpoint is not None else 0
                current.hw = max(plog.log_start_offset, min(start, plog.log_end_offset)) if start else 0
                plog.replica = current
                self.replicas[key] = current
            current.stopped = False
            same_epoch = current.leader_epoch == st.leader_epoch and current.state is not st
            if st.leader == self.broker_id:
                self.fetchers.remove(key)
                if same_epoch and current.is_leader:
                    current.update_state(st)
                else:
                    current.become_leader(st, now)
                    self.hooks.truncated(st.topic, st.partition)  # producer/txn state: from the log
                    log.info("Leader of %s-%d at epoch %d, ISR %s, log end %d", st.topic, st.partition,
                             st.leader_epoch, st.isr, current.log_end_offset)
                self._hw_maybe_moved(current, True)
            else:
                was_leader = current.is_leader
                leader_changed = was_leader or current.state.leader != st.leader or not same_epoch
                current.become_follower(st)
                if was_leader:
                    self._answer_waiting(current)
                    self.hooks.woken(st.topic, st.partition)  # parked consumer fetches answer now
                if st.leader == NO_LEADER:
                    self.fetchers.remove(key)
                elif leader_changed or not self.fetchers.has(key):
                    self.fetchers.add(key, st.leader)
                log.info("Follower of %s-%d at epoch %d (leader %d)", st.topic, st.partition, st.leader_epoch,
                         st.leader)
        return errors

    def stop_replicas(self, topic_partitions: Iterable[TopicPartition], delete: bool) -> None:
        """Stop hosting these partitions (Kafka's StopReplica): no fetching, no serving;
        with delete the hooks remove the log."""
        for key in topic_partitions:
            self.fetchers.remove(key)
            r = self.replicas.pop(key, None)
            if r is None:
                continue
            r.stopped = True
            r.is_leader = False
            self._answer_waiting(r)
            # the log keeps its stopped replica: this node answers NOT_LEADER_OR_FOLLOWER for it
            # (a log without one would be served as a single node's)
            if delete:
                self.hooks.deleted(*key)
                if self.hw_checkpoint is not None:
                    self.hw_checkpoint.forget(key)

    # ------------------------------------------------------------------ serving (handlers)

    def get(self, topic: str, partition: int) -> PartitionReplica | None:
        return self.replicas.get((topic, partition))

    def leader_appended(self, r: PartitionReplica, base_offset: int) -> None:
        self._hw_maybe_moved(r, r.appended_as_leader(base_offset))

    def follower_fetched(self, r: PartitionReplica, replica_id: int, fetch_offset: int) -> None:
        """A follower's Fetch reached the leader: its log end offset, the high watermark, and
        whether it may rejoin the ISR."""
        moved = r.update_follower(replica_id, fetch_offset, self.clock.now_ms())
        self._hw_maybe_moved(r, moved)
        if not r.isr_change_pending and replica_id in r.catching_up():
            self._propose_isr(r, tuple(r.isr) + (replica_id,))

    def maybe_shrink_isrs(self) -> None:
        now = self.clock.now_ms()
        for r in list(self.replicas.values()):
            if not r.is_leader or r.isr_change_pending:
                continue
            out = r.out_of_sync(now, self.settings.replica_lag_time_max_ms)
            if out:
                log.info("Shrinking the ISR of %s-%d from %s: %s not caught up for %d ms", r.topic, r.partition,
                         r.isr, out, self.settings.replica_lag_time_max_ms)
                self._propose_isr(r, tuple(b for b in r.isr if b not in out))

    # ------------------------------------------------------------------ ISR changes

    def _propose_isr(self, r: PartitionReplica, new_isr: tuple[int, ...]) -> None:
        r.isr_change_pending = True
        task = asyncio.ensure_future(self._alter(r, r.state, new_isr))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _alter(self, r: PartitionReplica, sent: PartitionState, new_isr: tuple[int, ...]) -> None:
        try:
            accepted = await self.alter_isr(sent, new_isr)
        except Exception:  # noqa: BLE001 - proposed again at the next check
            log.exception("Proposing ISR %s for %s-%d failed", new_isr, r.topic, r.partition)
            accepted = None
        if r.state is not sent:  # the controller moved on meanwhile: its state stands
            r.isr_change_pending = False
            return
        r.isr_change_pending = False
        if accepted is None:
            log.info("ISR change of %s-%d to %s was fenced", r.topic, r.partition, new_isr)
            return
        if accepted.leader_epoch < r.leader_epoch:
            return
        r.update_state(accepted)
        log.info("ISR of %s-%d is now %s", r.topic, r.partition, accepted.isr)
        self._hw_maybe_moved(r, True)

    # ------------------------------------------------------------------ acks=all

    def _hw_maybe_moved(self, r: PartitionReplica, moved: bool) -> None:
        if moved:
            key = (r.topic, r.partition)
            self.produce_purgatory.check_and_complete(key)
            self.hooks.woken(*key)

    def _answer_waiting(self, r: PartitionReplica) -> None:
        """Parked acks=all produces of a partition this node no longer leads answer now
        (Partition.replicated tells them NOT_LEADER_OR_FOLLOWER)."""
        self.produce_purgatory.check_and_complete((r.topic, r.partition))

    # ------------------------------------------------------------------ OffsetsForLeaderEpoch

    def end_offset_for(self, r: PartitionReplica, epoch: int) -> tuple[int, int]:
        return r.cache.end_offset_for(epoch, r.log_end_offset)


def _epoch_cache(plog: PartitionLog) -> LeaderEpochCache:
    """The partition's leader-epoch cache; a log without a checkpoint (written on a single
    node, or before this feature) gets one built from its batches' epochs."""
    cache = LeaderEpochCache.open(plog.path)
    if not cache.exists and plog.log_end_offset > plog.log_start_offset:
        from kcoord.storage.segment import scan_batches

        for seg in plog.segments:
            for h, _ in scan_batches(seg.fd, 0, seg.size, verify_crc=False):
                if h.partition_leader_epoch > cache.latest_epoch:
                    cache.assign(h.partition_leader_epoch, h.base_offset)
    cache.truncate_from_end(plog.log_end_offset)
    cache.truncate_from_start(plog.log_start_offset)
    return cache
