"""Transactions as a partition leader sees them (the transactional half of Kafka's
ProducerStateManager): which producers have a transaction open in the partition and from which
offset, the last stable offset (LSO) that read_committed consumers stop at, and the aborted
transactions a read_committed fetch must report (also kept in each segment's `.txnindex`,
storage/txn_index.py).

- A producer's first transactional batch opens its transaction at that batch's base offset;
  its COMMIT or ABORT marker closes it. LSO = the first offset of the oldest open transaction,
  or the log end offset when none is open.
- An ABORT marker records AbortedTxn(producer, first offset, marker offset, LSO once it is
  closed) in the index of the marker's segment, as Kafka does (a marker with no open
  transaction records first offset = its own offset).

State is rebuilt lazily, the first time a partition is asked, from the batches of the segments
that hold transactional batches; a log that never saw a transaction costs nothing.
"""
from __future__ import annotations

import logging
from bisect import bisect_left

from kcoord.storage.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL
from kcoord.storage.log import PartitionLog
from kcoord.storage.segment import scan_batches
from kcoord.storage.transactions import COMMIT, control_type
from kcoord.storage.txn_index import AbortedTxn, append_entry, sync_txn_index, txn_index_path

log = logging.getLogger("kcoord.txn")


class PartitionTxns:
    __slots__ = ("topic", "partition", "ongoing", "aborted", "_last_offsets")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.ongoing: dict[int, int] = {}  # producer id -> first offset, oldest first
        self.aborted: list[AbortedTxn] = []  # in marker (last offset) order
        self._last_offsets: list[int] = []  # aborted[i].last_offset, for bisecting

    # ---------------------------------------------------------------- queries

    def lso(self, plog: PartitionLog) -> int:
        for first in self.ongoing.values():
            return first
        return plog.log_end_offset

    def has_ongoing(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    def collect_aborted(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound): Kafka's
        collectAbortedTxns (it stops at the first entry whose LSO reaches the upper bound)."""
        out = []
        for e in self.aborted[bisect_left(self._last_offsets, fetch_offset):]:
            if e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                break
        return out

    # ---------------------------------------------------------------- updates

    def on_data(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch of `producer_id` was appended at base_offset."""
        if producer_id not in self.ongoing:
            self.ongoing[producer_id] = base_offset

    def on_marker(self, plog: PartitionLog | None, producer_id: int, commit: bool, offset: int) -> AbortedTxn | None:
        """A COMMIT / ABORT marker of `producer_id` was appended at `offset`. With a log, an
        abort is also appended to the .txnindex of the segment holding the marker."""
        first = self.ongoing.pop(producer_id, offset)
        if commit:
            return None
        lso = next(iter(self.ongoing.values()), offset + 1)
        entry = AbortedTxn(producer_id, first, offset, lso)
        self.aborted.append(entry)
        self._last_offsets.append(offset)
        if plog is not None:
            seg = plog.segments[-1]
            for s in reversed(plog.segments):
                if s.base_offset <= offset:
                    seg = s
                    break
            try:
                append_entry(txn_index_path(plog.path, seg.base_offset), entry)
            except OSError as e:  # derived data: rebuilt from the log at the next load
                log.warning("Could not append to the transaction index of %s: %s", plog.path, e)
        return entry

    def evict_before(self, log_start_offset: int) -> None:
        """Retention deleted everything below log_start_offset: aborted transactions that
        ended there cannot overlap a fetch any more (their .txnindex went with the segments)."""
        i = bisect_left(self._last_offsets, log_start_offset)
        if i:
            del self.aborted[:i]
            del self._last_offsets[:i]

    # ---------------------------------------------------------------- loading

    def load(self, plog: PartitionLog) -> None:
        """Rebuild from the log and make every segment's .txnindex match."""
        self.ongoing.clear()
        self.aborted.clear()
        self._last_offsets.clear()
        by_segment: dict[int, list[AbortedTxn]] = {}
        for seg in list(plog.segments):
            if not seg.has_transactions:
                continue
            for h, body in scan_batches(seg.fd, 0, seg.size, verify_crc=False):
                if not h.attributes & ATTR_TRANSACTIONAL:
                    continue
                if h.attributes & ATTR_CONTROL:
                    entry = self.on_marker(None, h.producer_id, control_type(body) == COMMIT, h.base_offset)
                    if entry is not None:
                        by_segment.setdefault(seg.base_offset, []).append(entry)
                else:
                    self.on_data(h.producer_id, h.base_offset)
        for seg in plog.segments:
            try:
                sync_txn_index(txn_index_path(plog.path, seg.base_offset), by_segment.get(seg.base_offset, []))
            except OSError as e:
                log.warning("Could not write the transaction index of %s: %s", plog.path, e)
        if self.ongoing or self.aborted:
            log.info("Loaded transaction state of %s-%d: %d open, %d aborted", self.topic, self.partition,
                     len(self.ongoing), len(self.aborted))


class PartitionTxnStates:
    """Every partition's transaction state, loaded on first use."""

    def __init__(self) -> None:
        self._partitions: dict[tuple[str, int], PartitionTxns] = {}

    def get(self, topic: str, partition: int, plog: PartitionLog) -> PartitionTxns:
        key = (topic, partition)
        state = self._partitions.get(key)
        if state is None:
            state = PartitionTxns(topic, partition)
            if any(seg.has_transactions for seg in plog.segments):
                state.load(plog)
            self._partitions[key] = state
        return state

    def loaded(self, topic: str, partition: int) -> PartitionTxns | None:
        return self._partitions.get((topic, partition))

    def forget_partition(self, topic: str, partition: int) -> None:
        """The log changed under this state (a replica's truncation or append): reloaded
        from the log at next use."""
        self._partitions.pop((topic, partition), None)

    def lso(self, topic: str, partition: int, plog: PartitionLog) -> int:
        """The last stable offset; the log end offset for a partition without transactions
        (no state is built for it)."""
        state = self._partitions.get((topic, partition))
        if state is None:
            if not any(seg.has_transactions for seg in plog.segments):
                return plog.log_end_offset
            state = self.get(topic, partition, plog)
        return state.lso(plog)

    def forget(self, topic: str) -> None:
        """A deleted topic's state goes with it."""
        for key in [k for k in self._partitions if k[0] == topic]:
            del self._partitions[key]

    def items(self):
        return self._partitions.items()
