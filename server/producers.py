"""Idempotent producers: producer id allocation and per-partition sequence state.

Follows Kafka's ProducerIdManager / ProducerStateManager / ProducerAppendInfo:

- Producer ids are handed out from blocks of PID_BLOCK_SIZE. Before the first id of a block is
  used, the end of the block is written (atomically, fsynced) to `kcoord-producer-ids.json` in
  the log directory, so ids are never reused across restarts, crashes included.
- Per partition, each producer id has an entry: its epoch and the metadata of its last 5 batches
  (NUM_BATCHES_TO_RETAIN). A batch whose epoch and exact sequence range match one of them is a
  duplicate (answered with the original offsets, not appended again); otherwise the first
  sequence must follow the last one (with wraparound at Int32.MAX back to 0), a smaller epoch is
  fenced (INVALID_PRODUCER_EPOCH), and a new, larger epoch must start at sequence 0.
- Like Kafka 2.5+ (KIP-360), a producer id the partition has no state for (never seen, expired,
  or not found in the log when the state was rebuilt) is accepted at any sequence: there is no
  UNKNOWN_PRODUCER_ID from the broker any more.
- A producer's state lives until it expires (producer.id.expiration.ms), not until its batches
  leave the log: as Kafka's ProducerStateManager (onLogStartOffsetIncremented keeps the map),
  DeleteRecords and retention moving the log start past a producer's batches keep its sequence,
  so a transaction marker written after the deletion finds it and the producer's next batch
  follows its last sequence.
- State is rebuilt lazily from the log (batch headers carry producerId, epoch and baseSequence)
  the first time a partition sees an idempotent batch, so duplicates are caught across restarts.
  Only segments that can hold unexpired producers (largest timestamp within
  producer.id.expiration.ms) are scanned.
"""
from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.batch import BatchHeader
from kcoord.storage.log import PartitionLog
from kcoord.storage.segment import scan_batches
from kcoord.storage.txn_batches import marker_coordinator_epoch

log = logging.getLogger("kcoord.producers")

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
INT16_MAX = 2**15 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
PID_BLOCK_SIZE = 1000
PRODUCER_ID_FILE = "kcoord-producer-ids.json"
# Kafka's producer.id.expiration.ms default (1 day).
PRODUCER_ID_EXPIRATION_MS = 86_400_000


def increment_sequence(seq: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap from Int32.MAX to 0."""
    if seq > INT32_MAX - increment:
        return increment - (INT32_MAX - seq) - 1
    return seq + increment


def decrement_sequence(seq: int, decrement: int) -> int:
    if seq < decrement:
        return INT32_MAX - (decrement - seq) + 1
    return seq - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


# ---------------------------------------------------------------------------- id allocation


class ProducerIdManager:
    """Allocates producer ids in persisted blocks; remembers the latest epoch it issued."""

    def __init__(self, log_dir: Path | str, block_size: int = PID_BLOCK_SIZE) -> None:
        self.path = Path(log_dir) / PRODUCER_ID_FILE
        self.block_size = block_size
        self._next = 0
        self._block_end = 0  # ids below this are reserved on disk
        self.epochs: dict[int, int] = {}  # producer id -> latest epoch handed out (this run)
        self._take: Callable[[], int] | None = None  # a cluster node's ids (use_blocks)
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text())
                self._next = self._block_end = int(data["next_block_start"])
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{self.path} is unreadable: {e!r}") from None

    @property
    def next_id(self) -> int:
        return self._next

    def use_blocks(self, take: Callable[[], int]) -> None:
        """A cluster node: ids come from `take`, the blocks the cluster hands out
        (server/cluster/producer_ids.py), not from this node's file; ids found in logs, which
        other nodes may have handed out, no longer move the next one."""
        self._take = take

    def ensure_above(self, producer_id: int) -> None:
        """Never hand out ids at or below one found in the logs (e.g. a lost id file)."""
        if self._take is not None:
            return
        if producer_id >= self._next:
            self._next = producer_id + 1
            if self._next > self._block_end:
                self._block_end = self._next  # next generate() persists a new block

    def generate(self) -> int:
        if self._take is not None:
            pid = self._take()
            self._next = max(self._next, pid + 1)
            return pid
        if self._next >= self._block_end:
            end = self._next + self.block_size
            self._persist(end)
            self._block_end = end
        pid = self._next
        self._next += 1
        return pid

    def _persist(self, next_block_start: int) -> None:
        from kcoord.server.topics import atomic_write  # the topic registry's write-fsync-rename

        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps({"version": 1, "next_block_start": next_block_start}).encode())

    def init_producer(self, producer_id: int, producer_epoch: int) -> tuple[int, int]:
        """InitProducerId without a transactional id: (id, epoch) to hand out.

        A fresh producer gets a new id at epoch 0. A producer re-initialising with the id and
        epoch it holds (KIP-360, v3+) gets the same id with the epoch bumped, so its sequences
        restart at 0; on epoch exhaustion, or for an id/epoch we did not issue, it gets a new
        id (Kafka always hands non-transactional producers a new id; both are fine for clients).
        """
        if producer_id >= 0 and producer_epoch >= 0 and producer_id < self._next:
            latest = self.epochs.get(producer_id)
            if (latest is None or latest == producer_epoch) and producer_epoch < INT16_MAX - 1:
                epoch = producer_epoch + 1
                self.epochs[producer_id] = epoch
                return producer_id, epoch
        pid = self.generate()
        self.epochs[pid] = 0
        return pid, 0


# ---------------------------------------------------------------------------- partition state


@dataclass(slots=True)
class BatchMetadata:
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    coordinator_epoch: int = -1  # of its last transaction marker (-1: none)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.last_seq == last_seq and b.first_seq == first_seq:
                return b
        return None


def batch_last_sequence(h: BatchHeader) -> int:
    return increment_sequence(h.base_sequence, h.last_offset_delta)


class PartitionProducerState:
    """The producers of one partition: sequences and epochs (Kafka's ProducerStateManager; the
    open transactions are server/partition_txns.py's)."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.entries: dict[int, ProducerEntry] = {}

    def check(self, h: BatchHeader) -> BatchMetadata | None:
        """Validate an incoming client batch of an idempotent producer (before the append).

        Returns the original batch if `h` duplicates one of the last 5; raises KafkaError with
        INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER; None means append it.
        """
        entry = self.entries.get(h.producer_id)
        if entry is None:
            return None  # unknown producer: any sequence is accepted (Kafka 2.5+)
        last_seq = batch_last_sequence(h)
        dup = entry.find_duplicate(h.producer_epoch, h.base_sequence, last_seq)
        if dup is not None:
            return dup
        where = f"producer {h.producer_id} in {self.topic}-{self.partition}"
        if h.producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"Epoch of {where} is {h.producer_epoch}, which is smaller than the last seen epoch {entry.epoch}",
            )
        if h.producer_epoch != entry.epoch:
            if h.base_sequence != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"Invalid sequence number for new epoch of {where}: {h.producer_epoch} (request epoch), "
                    f"{h.base_sequence} (seq. number), {entry.epoch} (current producer epoch)",
                )
        elif entry.batches and not in_sequence(entry.last_seq, h.base_sequence):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for {where}: {h.base_sequence} (incoming seq. number), "
                f"{entry.last_seq} (current end sequence number)",
            )
        elif not entry.batches and entry.epoch != NO_PRODUCER_EPOCH and h.base_sequence != 0:
            # a known producer with no batch at this epoch (a marker bumped it to this epoch,
            # transactions v2): its first batch starts at 0, as Kafka's checkSequence wants; a
            # later batch arriving before a retried first one must wait for it
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"Out of order sequence number for {where}: {h.base_sequence} (incoming seq. number), "
                f"0 expected at epoch {entry.epoch}",
            )
        return None

    def update(self, h: BatchHeader, base_offset: int) -> None:
        """Record an appended batch (offsets assigned) of producer h.producer_id."""
        entry = self.entries.get(h.producer_id)
        if entry is None:
            entry = self.entries[h.producer_id] = ProducerEntry(h.producer_id)
        entry.add_batch(h.producer_epoch, batch_last_sequence(h), base_offset + h.last_offset_delta,
                        h.last_offset_delta, h.max_timestamp)

    def check_marker(self, producer_id: int, coordinator_epoch: int) -> None:
        """Before a transaction coordinator's marker is appended (Kafka's ProducerAppendInfo
        checkCoordinatorEpoch): TRANSACTION_COORDINATOR_FENCED (KafkaError) when the last
        marker of `producer_id` here came from a newer coordinator epoch: this one was
        replaced (its partition of __transaction_state moved) and must not end the
        transaction. A follower's replicated markers are not checked."""
        entry = self.entries.get(producer_id)
        if entry is not None and entry.coordinator_epoch > coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"Invalid coordinator epoch for producer {producer_id} in {self.topic}-{self.partition}: "
                f"{coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)")

    def apply_marker(self, producer_id: int, producer_epoch: int, timestamp: int, coordinator_epoch: int = -1) -> None:
        """A transaction marker of `producer_id` was written: its epoch is the producer's
        current one from now on (a coordinator's fencing bump included), as Kafka's
        ProducerStateManager does; the sequence state of an older epoch is dropped. Its
        coordinator epoch is the producer's last (-1: not known, the last one stays)."""
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(producer_id)
        if producer_epoch > entry.epoch:
            entry.batches.clear()
            entry.epoch = producer_epoch
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        if coordinator_epoch >= 0:
            entry.coordinator_epoch = coordinator_epoch

    def evict_before(self, log_start_offset: int) -> int:
        """Drop producers whose last batch is below the log start: only when the state is
        rebuilt from the log (load), whose segments below the start may be gone. A live log
        start increment (DeleteRecords, retention) keeps them, as Kafka does."""
        gone = [pid for pid, e in self.entries.items() if e.last_data_offset < log_start_offset]
        for pid in gone:
            del self.entries[pid]
        return len(gone)

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        gone = [pid for pid, e in self.entries.items() if now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.entries[pid]
        return len(gone)

    def load(self, plog: PartitionLog, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """Rebuild from the log's batch headers; returns the largest producer id seen (or -1)."""
        max_pid = -1
        segments = list(plog.segments)
        for i, seg in enumerate(segments):
            if i < len(segments) - 1 and seg.max_timestamp >= 0 and now_ms - seg.max_timestamp >= expiration_ms:
                continue  # every producer last seen here has expired
            for h, body in scan_batches(seg.fd, 0, seg.size, verify_crc=False):
                if h.producer_id < 0:
                    continue
                max_pid = max(max_pid, h.producer_id)
                if h.is_control:
                    self.apply_marker(h.producer_id, h.producer_epoch, h.max_timestamp, marker_coordinator_epoch(body))
                    continue
                self.update(h, h.base_offset)
        self.evict_before(plog.log_start_offset)
        self.expire(now_ms, expiration_ms)
        return max_pid


class ProducerStates:
    """Every partition's producer state, loaded on first use."""

    def __init__(self, id_manager: ProducerIdManager) -> None:
        self.ids = id_manager
        self._partitions: dict[tuple[str, int], PartitionProducerState] = {}

    def get(self, topic: str, partition: int, plog: PartitionLog, now_ms: int) -> PartitionProducerState:
        key = (topic, partition)
        state = self._partitions.get(key)
        if state is None:
            state = PartitionProducerState(topic, partition)
            max_pid = state.load(plog, now_ms)
            if max_pid >= 0:
                self.ids.ensure_above(max_pid)
            if state.entries:
                log.info("Loaded %d producer(s) for %s-%d from its log", len(state.entries), topic, partition)
            self._partitions[key] = state
        return state

    def drop_topic(self, topic: str) -> int:
        """Forget a deleted topic's producers (a topic created later under its name starts
        with none). Returns how many partitions had state."""
        gone = [key for key in self._partitions if key[0] == topic]
        for key in gone:
            del self._partitions[key]
        return len(gone)

    def loaded(self, topic: str, partition: int) -> PartitionProducerState | None:
        return self._partitions.get((topic, partition))

    def forget_partition(self, topic: str, partition: int) -> None:
        """The log changed under this state (a replica's truncation): reloaded at next use."""
        self._partitions.pop((topic, partition), None)

    def items(self):
        return self._partitions.items()
