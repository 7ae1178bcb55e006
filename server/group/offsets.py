"""Committed offsets of one group, stored compactly.

A million committed offsets must fit in a few hundred MB for the whole server, so an offset is
not a Python object: each topic keeps parallel typed arrays indexed directly by partition
number (offset, commit timestamp, expire timestamp, leader epoch: 28 bytes) plus a shared
metadata string slot (8 bytes; "" for nearly every commit). Partitions are small dense ints in
practice; the rare huge partition number goes to a small dict instead of growing the arrays.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterator

from kcoord.protocol.coordinator_records import OffsetValue

_NO_EXPIRE = -1  # OffsetValue.expire_timestamp None is stored as -1 (Kafka's DEFAULT_TIMESTAMP)
_ABSENT = -(2**63)  # offset slot value meaning "no committed offset for this partition"
_DENSE_LIMIT = 1 << 16  # partitions below this are array-indexed


class _TopicOffsets:
    __slots__ = ("offset", "commit_ts", "expire_ts", "epoch", "metadata", "sparse", "count")

    def __init__(self) -> None:
        self.offset = array("q")
        self.commit_ts = array("q")
        self.expire_ts = array("q")
        self.epoch = array("i")
        self.metadata: list[str] = []
        self.sparse: dict[int, OffsetValue] = {}
        self.count = 0

    def get(self, partition: int) -> OffsetValue | None:
        if not 0 <= partition < len(self.offset):
            v = self.sparse.get(partition)
            return None if v is None else OffsetValue(v.offset, v.metadata, v.commit_timestamp,
                                                       v.leader_epoch, v.expire_timestamp)
        o = self.offset[partition]
        if o == _ABSENT:
            return None
        exp = self.expire_ts[partition]
        # positional: every commit reads the value it replaces (what reverts it)
        return OffsetValue(o, self.metadata[partition], self.commit_ts[partition], self.epoch[partition],
                           None if exp == _NO_EXPIRE else exp)

    def contains(self, partition: int) -> bool:
        if 0 <= partition < len(self.offset):
            return self.offset[partition] != _ABSENT
        return partition in self.sparse

    def put(self, partition: int, v: OffsetValue) -> bool:
        """Store the partition's offset; True if it had none."""
        if not 0 <= partition < _DENSE_LIMIT:
            added = partition not in self.sparse
            if added:
                self.count += 1
            self.sparse[partition] = OffsetValue(v.offset, v.metadata or "", v.commit_timestamp,
                                                 v.leader_epoch, v.expire_timestamp)
            return added
        n = len(self.offset)
        if partition >= n:
            grow = partition + 1 - n
            self.offset.extend(array("q", [_ABSENT]) * grow)
            self.commit_ts.extend(array("q", [0]) * grow)
            self.expire_ts.extend(array("q", [_NO_EXPIRE]) * grow)
            self.epoch.extend(array("i", [-1]) * grow)
            self.metadata.extend([""] * grow)
        added = self.offset[partition] == _ABSENT
        if added:
            self.count += 1
        self.offset[partition] = v.offset
        self.commit_ts[partition] = v.commit_timestamp
        self.expire_ts[partition] = _NO_EXPIRE if v.expire_timestamp is None else v.expire_timestamp
        self.epoch[partition] = v.leader_epoch
        self.metadata[partition] = v.metadata or ""  # share the one empty string
        return added

    def remove(self, partition: int) -> bool:
        if not 0 <= partition < len(self.offset):
            if self.sparse.pop(partition, None) is None:
                return False
            self.count -= 1
            return True
        if self.offset[partition] == _ABSENT:
            return False
        self.offset[partition] = _ABSENT
        self.metadata[partition] = ""
        self.count -= 1
        return True

    def partitions(self) -> list[int]:
        out = [p for p, o in enumerate(self.offset) if o != _ABSENT]
        out.extend(self.sparse)
        return out

    def expired(self, now: int, retention_ms: int, base_ts: int | None, skip) -> Iterator[int]:
        for p, o in enumerate(self.offset):
            if o == _ABSENT or p in skip:
                continue
            exp = self.expire_ts[p]
            if exp != _NO_EXPIRE:
                if now >= exp:
                    yield p
            elif now - (self.commit_ts[p] if base_ts is None else base_ts) >= retention_ms:
                yield p
        for p, v in self.sparse.items():
            if p in skip:
                continue
            if v.expire_timestamp is not None:
                if now >= v.expire_timestamp:
                    yield p
            elif now - (v.commit_timestamp if base_ts is None else base_ts) >= retention_ms:
                yield p

    def __len__(self) -> int:
        return self.count


class OffsetStore:
    """topic -> partition -> committed offset, for one group: what its replayed records hold,
    a commit in flight included (the runtime knows which are in flight and what they replaced,
    server/coordinator/changes.py)."""

    __slots__ = ("_topics", "_count")

    def __init__(self) -> None:
        self._topics: dict[str, _TopicOffsets] = {}
        self._count = 0

    def is_unused(self) -> bool:
        """No offset stored."""
        return not self._count

    def get(self, topic: str, partition: int) -> OffsetValue | None:
        t = self._topics.get(topic)
        return None if t is None else t.get(partition)

    def put(self, topic: str, partition: int, value: OffsetValue) -> None:
        t = self._topics.get(topic)
        if t is None:
            t = self._topics[topic] = _TopicOffsets()
        if t.put(partition, value):
            self._count += 1

    def remove(self, topic: str, partition: int) -> bool:
        t = self._topics.get(topic)
        if t is None or not t.remove(partition):
            return False
        self._count -= 1
        if not len(t):
            del self._topics[topic]
        return True

    def __len__(self) -> int:
        return self._count

    def __contains__(self, tp: tuple[str, int]) -> bool:
        t = self._topics.get(tp[0])
        return t is not None and t.contains(tp[1])

    def topics(self) -> list[str]:
        return list(self._topics)

    def partitions(self, topic: str) -> list[int]:
        t = self._topics.get(topic)
        return [] if t is None else t.partitions()

    def keys(self) -> list[tuple[str, int]]:
        return [(topic, p) for topic, t in self._topics.items() for p in t.partitions()]

    def items(self) -> Iterator[tuple[str, int, OffsetValue]]:
        for topic, t in list(self._topics.items()):
            for p in t.partitions():
                v = t.get(p)
                if v is not None:
                    yield topic, p, v

    def expired(
        self, now: int, retention_ms: int, base_ts: int | None, skip_topics: set[str], pending: set
    ) -> list[tuple[str, int]]:
        """Partitions whose offset expired (KIP-211), without building OffsetValue objects.

        An explicit expire timestamp (OffsetCommit v2-v4 retention_time) wins; otherwise the
        offset expires `retention_ms` after `base_ts` (when the group became Empty) or, when
        base_ts is None, after its own commit timestamp.
        """
        out: list[tuple[str, int]] = []
        pending_by_topic: dict[str, set[int]] = {}
        for topic, p in pending:
            pending_by_topic.setdefault(topic, set()).add(p)
        for topic, t in self._topics.items():
            if topic in skip_topics:
                continue
            out.extend((topic, p) for p in t.expired(now, retention_ms, base_ts, pending_by_topic.get(topic, ())))
        return out
