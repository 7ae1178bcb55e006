"""Transactions in __consumer_offsets: TxnOffsetCommit's transactional batches, the markers
that end them, and what loading does with transactions still open.

- `write_offsets`: the offset records of one TxnOffsetCommit go to the group's partition as
  one transactional batch (the producer's id and epoch, baseSequence -1, as Kafka's group
  coordinator writes them). Once durable they are replayed into the pending store
  (server/group/txn_offsets.py), not into the group: they count only after a COMMIT marker.
- `write_marker`: the transaction coordinator's COMMIT / ABORT control batch for one
  partition. Once durable it is replayed: with COMMIT the producer's pending offsets of the
  groups that partition owns are replayed as committed offsets through the group
  coordinator's own replay (so a restart, which loads committed transactional records as
  plain ones, ends in the same state); with ABORT they are dropped.
- `on_partition_loaded`: the group loader replays only committed records
  (storage/transactions.py); the records of transactions still open at the end of the log are
  replayed into the pending store here, before the partition's groups are served, and one
  that a later commit of the same partition superseded is marked so.

Every append first flushes what the group writer has staged, and replays from the durability
callback of its flush round, so replay order is log order (a later plain commit beats an
earlier transactional offset, as Kafka decides by record offsets).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiokafka.record.default_records import DefaultRecordBatch

from kcoord.protocol.coordinator_codec import CodecError, decode_record, encode_key, encode_value
from kcoord.protocol.coordinator_records import CoordinatorRecord, OffsetKey
from kcoord.protocol.errors import ErrorCode, coordinator_append_error, error_code_of
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.deferred import Deferred
from kcoord.server.group.txn_offsets import PendingTxnOffsets
from kcoord.server.txn.leader_append import append_as_leader, when_written
from kcoord.storage.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
from kcoord.storage.log import PartitionLog
from kcoord.storage.segment import scan_batches
from kcoord.storage.transactions import transaction_outcomes
from kcoord.storage.txn_batches import build_marker, build_transactional_batch

if TYPE_CHECKING:
    from kcoord.server.clock import Clock
    from kcoord.server.config import Config
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.metrics import Metrics
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.txn")



class GroupTxnLog:
    def __init__(self, config: Config, clock: Clock, metrics: Metrics, logs: LogManager, data_plane: DataPlane,
                 group_runtime: CoordinatorRuntime[CoordinatorRecord], coordinator: GroupCoordinator,
                 pending: PendingTxnOffsets, replicas: Callable[[], Any] = lambda: None) -> None:
        """replicas: the node's replica manager on a cluster node (None on one node): appends
        are made as the partition's leader and wait for its ISR (server/txn/leader_append.py)."""
        self.clock = clock
        self.metrics = metrics
        self.logs = logs
        self.data_plane = data_plane
        self.group_runtime = group_runtime
        self.coordinator = coordinator
        self.pending = pending
        self.replicas = replicas
        self.commit_timeout_s = config["offsets.commit.timeout.ms"] / 1000.0
        self.max_message_bytes = config["message.max.bytes"]

    # ---------------------------------------------------------------- appends

    def _append(self, partition: int, data: bytearray, what: str) -> tuple[PartitionLog, int, int]:
        self.group_runtime.writer.flush()  # plain commits staged before this go first
        plog = self.logs.get(OFFSETS_TOPIC, partition)
        if plog is None:
            raise OSError(f"{OFFSETS_TOPIC}-{partition} has no log")
        # the partition's transaction state sees the log as it was before this append
        self.data_plane.txns.get(OFFSETS_TOPIC, partition, plog)
        base, last = append_as_leader(plog, data, self.replicas())
        log.debug("Appended %s to %s-%d at %d", what, OFFSETS_TOPIC, partition, base)
        self.data_plane.appended(OFFSETS_TOPIC, partition)
        return plog, base, last

    def _when_durable(self, plog: PartitionLog, last: int, replay, done) -> None:  # noqa: ANN001
        """replay() then done(None) once `last` is durable; done(code) on failure or timeout."""
        timeout_s = self.commit_timeout_s
        finished = False

        def finish(code: ErrorCode | None) -> None:
            nonlocal finished
            if not finished:
                finished = True
                done(code)

        timer = asyncio.get_running_loop().call_later(
            timeout_s, lambda: finish(coordinator_append_error(ErrorCode.REQUEST_TIMED_OUT)))

        def on_written(code: ErrorCode | None) -> None:
            timer.cancel()
            if code is not None:
                log.error("The batch ending at %d in %s is not written: %s", last, plog.path, code.name)
                finish(coordinator_append_error(code))
                return
            replay()  # the log has it, whoever still waits for the answer
            finish(None)

        when_written(plog, last, self.replicas(), int(timeout_s * 1000), on_written)

    def write_offsets(self, partition: int, producer_id: int, producer_epoch: int,
                      records: list[CoordinatorRecord]) -> Deferred[ErrorCode | None]:
        """Append one TxnOffsetCommit's records; the Deferred completes with None once they are
        durable and pending, or with the code the client should see."""
        out: Deferred[ErrorCode | None] = Deferred()
        try:
            kvs = [(encode_key(r.key), encode_value(r.value)) for r in records]
            data = build_transactional_batch(kvs, producer_id, producer_epoch, self.clock.now_ms())
            if len(data) > self.max_message_bytes:
                out.complete(ErrorCode.INVALID_COMMIT_OFFSET_SIZE)
                return out
            plog, base, last = self._append(partition, data, f"{len(records)} transactional offsets")
        except Exception as e:  # noqa: BLE001 - every failure is the client's error code
            log.error("Appending transactional offsets to %s-%d failed: %r", OFFSETS_TOPIC, partition, e)
            out.complete(coordinator_append_error(error_code_of(e)))
            return out
        self.data_plane.txns.get(OFFSETS_TOPIC, partition, plog).on_data(producer_id, base)

        def replay() -> None:
            for r in records:
                self._add_pending(producer_id, r)

        self._when_durable(plog, last, replay, out.complete)
        return out

    def write_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int = 0) -> Deferred[ErrorCode | None]:
        """The marker of one transaction in one partition; the Deferred completes with None
        once it is written and replayed. On a cluster node only the group coordinator that
        holds the partition writes it (NOT_LEADER_OR_FOLLOWER elsewhere,
        COORDINATOR_LOAD_IN_PROGRESS while it loads: the sender retries)."""
        out: Deferred[ErrorCode | None] = Deferred()
        state, epoch = self.group_runtime.state(partition)
        if state == "unloaded" or (state == "loading" and epoch >= 0):
            out.complete(ErrorCode.NOT_LEADER_OR_FOLLOWER if state == "unloaded"
                         else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            return out
        try:
            data = build_marker(producer_id, producer_epoch, commit, coordinator_epoch, self.clock.now_ms())
            plog, base, last = self._append(partition, data, "COMMIT marker" if commit else "ABORT marker")
        except Exception as e:  # noqa: BLE001 - the marker writer retries
            log.error("Appending a marker to %s-%d failed: %r", OFFSETS_TOPIC, partition, e)
            out.complete(error_code_of(e))
            return out
        self.data_plane.txns.get(OFFSETS_TOPIC, partition, plog).on_marker(plog, producer_id, commit, base)
        self._when_durable(plog, last, lambda: self.replay_marker(partition, producer_id, commit), out.complete)
        return out

    # ---------------------------------------------------------------- replay

    def _add_pending(self, producer_id: int, record: CoordinatorRecord) -> None:
        """Replay of a transactional offset record. Its group exists from now on (an Empty
        simple group if it had none), as Kafka's replay of an offset record creates it."""
        self.coordinator.group_manager.classic_group_for_offsets(record.key.group)  # type: ignore[union-attr]
        self.pending.add(producer_id, record.key, record.value)  # type: ignore[arg-type]

    def replay_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        coordinator = self.coordinator
        records = self.pending.end(producer_id, commit, lambda g: coordinator.partition_of(g) == partition)
        if not records:
            return
        self.pending.materialize(True)
        try:
            for r in records:
                coordinator.replay(r)
        finally:
            self.pending.materialize(False)
        self.metrics.records_applied(records)

    def on_partition_loaded(self, partition: int, plog: PartitionLog | None) -> None:
        """Replay the records of transactions still open at the end of `plog` into the
        pending store (called before the partition's groups are served)."""
        if plog is None or not any(seg.has_transactions for seg in plog.segments):
            return
        batches = [(h, bytes(body)) for seg in list(plog.segments) if seg.has_transactions
                   for h, body in scan_batches(seg.fd, 0, seg.size, verify_crc=False)
                   if h.attributes & ATTR_TRANSACTIONAL]
        _, still_open = transaction_outcomes(batches)
        if not still_open:
            return
        written: dict[tuple[int, OffsetKey], int] = {}  # (producer, key) -> offset of its record
        for h, body in batches:
            if h.base_offset not in still_open or h.attributes & ATTR_CONTROL:
                continue
            for r in DefaultRecordBatch(body):
                try:
                    record = decode_record(r.key, r.value)
                except CodecError as e:
                    log.warning("Skipping undecodable record in %s-%d: %s", OFFSETS_TOPIC, partition, e)
                    continue
                if record is None or not isinstance(record.key, OffsetKey) or record.value is None:
                    continue
                self._add_pending(h.producer_id, record)
                written[(h.producer_id, record.key)] = r.offset
        # a commit (plain, or of a committed transaction) after a pending record beats it
        latest: dict[OffsetKey, int] = {}
        for offset, key, _ in plog.iter_records(start_offset=min(still_open)):
            if key is None:
                continue
            try:
                record = decode_record(key, None)
            except CodecError:
                continue
            if record is not None and isinstance(record.key, OffsetKey):
                latest[record.key] = offset
        for (pid, key), offset in written.items():
            if latest.get(key, -1) > offset:
                self.pending.supersede(pid, key)
        log.info("%s-%d: %d offsets of %d open transactions are pending", OFFSETS_TOPIC, partition, len(written),
                 len({pid for pid, _ in written}))
