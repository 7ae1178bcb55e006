"""Pending transactional offsets: what TxnOffsetCommit wrote to __consumer_offsets inside a
producer's transaction, kept aside from the groups' committed offsets until the transaction's
marker (Kafka's OffsetMetadataManager.pendingTransactionalOffsets).

- `add` (replay of a transactional offset record) keeps the offset under its producer id.
- A COMMIT marker (`end(pid, commit=True)`) hands back the producer's offsets as plain offset
  records for the group coordinator to replay: they become committed offsets, except one that
  a later commit of the same partition already superseded (Kafka compares the records' log
  offsets; replay order here is log order, so a sequence number stands for it). ABORT drops
  them.
- While a group partition has a pending offset, OffsetFetch with require_stable answers
  UNSTABLE_OFFSET_COMMIT for it and retention leaves its committed offset alone.

Only replay touches this store, so start-up loading rebuilds it from the log: the records of
transactions still open at the end of a partition are replayed through `add` (their COMMIT or
ABORT marker comes later, from the transaction coordinator's recovery).
"""
from __future__ import annotations

from collections.abc import Callable

from kcoord.protocol.coordinator_records import CoordinatorRecord, OffsetKey, OffsetValue


class _Pending:
    __slots__ = ("value", "seq", "superseded")

    def __init__(self, value: OffsetValue, seq: int) -> None:
        self.value = value
        self.seq = seq
        self.superseded = False


class PendingTxnOffsets:
    def __init__(self) -> None:
        self._seq = 0
        # producer id -> offset key -> pending offset
        self._by_producer: dict[int, dict[OffsetKey, _Pending]] = {}
        # offset key -> producer ids with a pending offset for it
        self._by_key: dict[OffsetKey, set[int]] = {}
        # group -> number of pending offsets (cheap "does this group have any")
        self._by_group: dict[str, int] = {}
        self._materializing = False

    def __len__(self) -> int:
        return len(self._by_key)

    def producers(self) -> list[int]:
        return list(self._by_producer)

    def add(self, producer_id: int, key: OffsetKey, value: OffsetValue) -> None:
        """Replay of a transactional offset record of `producer_id`."""
        self._seq += 1
        entries = self._by_producer.setdefault(producer_id, {})
        if key not in entries:
            self._by_key.setdefault(key, set()).add(producer_id)
            self._by_group[key.group] = self._by_group.get(key.group, 0) + 1
        entries[key] = _Pending(value, self._seq)

    def committed(self, key: OffsetKey) -> None:
        """A plain commit of `key` was replayed: pending offsets written before it lose to it
        if their transaction commits (the group coordinator calls this on every replayed
        commit; it costs one dict lookup when nothing is pending)."""
        if self._materializing or not self._by_key:
            return
        pids = self._by_key.get(key)
        if pids:
            for pid in pids:
                self._by_producer[pid][key].superseded = True

    def supersede(self, producer_id: int, key: OffsetKey) -> None:
        """Loading found a plain commit of `key` after this pending offset in the log."""
        entry = self._by_producer.get(producer_id, {}).get(key)
        if entry is not None:
            entry.superseded = True

    def end(self, producer_id: int, commit: bool, owns: Callable[[str], bool]) -> list[CoordinatorRecord]:
        """Replay of a marker in one __consumer_offsets partition: the producer's pending
        offsets of the groups that partition `owns` leave the store; with COMMIT the records to
        replay as committed offsets are returned (call `materialize` around them)."""
        entries = self._by_producer.get(producer_id)
        if not entries:
            return []
        mine = [(k, e) for k, e in entries.items() if owns(k.group)]
        for key, _ in mine:
            del entries[key]
        if not entries:
            del self._by_producer[producer_id]
        out = []
        for key, entry in mine:
            pids = self._by_key.get(key)
            if pids is not None:
                pids.discard(producer_id)
                if not pids:
                    del self._by_key[key]
            n = self._by_group.get(key.group, 0) - 1
            if n > 0:
                self._by_group[key.group] = n
            else:
                self._by_group.pop(key.group, None)
            if commit and not entry.superseded:
                out.append(CoordinatorRecord(key, entry.value))
                # other producers' offsets written before this one lose to it (Kafka compares
                # record offsets when their transactions commit)
                for other in self._by_key.get(key, ()):
                    o = self._by_producer[other][key]
                    if o.seq < entry.seq:
                        o.superseded = True
        return out

    def materialize(self, active: bool) -> None:
        """While replaying committed transactional offsets, `committed` must not treat them
        as plain commits (that would supersede later pending offsets)."""
        self._materializing = active

    def has_pending(self, group: str, topic: str, partition: int) -> bool:
        return bool(self._by_group) and bool(self._by_key.get(OffsetKey(group, topic, partition)))

    def pending_partitions(self, group: str) -> set[tuple[str, int]]:
        if group not in self._by_group:
            return set()
        return {(k.topic, k.partition) for k in self._by_key if k.group == group}

    def has_group(self, group: str) -> bool:
        return group in self._by_group
