"""Committed offsets of one group, stored compactly.

A million committed offsets must fit in a few hundred MB for the whole server, so an offset is
not a Python object: each topic keeps parallel typed arrays (offset, commit timestamp, expire
timestamp, leader epoch) plus a partition -> slot dict; metadata strings are shared ("" for
nearly all commits). That is ~60-80 bytes per offset instead of ~300 for a dict of dataclasses.
Removal swaps the last slot into the hole, so slots stay dense.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterator

from protocol.coordinator_records import OffsetValue

_NO_EXPIRE = -1  # OffsetValue.expire_timestamp None is stored as -1 (Kafka's DEFAULT_TIMESTAMP)


class _TopicOffsets:
    __slots__ = ("slot", "partition", "offset", "commit_ts", "expire_ts", "epoch", "metadata")

    def __init__(self) -> None:
        self.slot: dict[int, int] = {}
        self.partition = array("i")
        self.offset = array("q")
        self.commit_ts = array("q")
        self.expire_ts = array("q")
        self.epoch = array("i")
        self.metadata: list[str] = []

    def get(self, partition: int) -> OffsetValue | None:
        i = self.slot.get(partition)
        if i is None:
            return None
        exp = self.expire_ts[i]
        return OffsetValue(
            offset=self.offset[i],
            metadata=self.metadata[i],
            commit_timestamp=self.commit_ts[i],
            leader_epoch=self.epoch[i],
            expire_timestamp=None if exp == _NO_EXPIRE else exp,
        )

    def put(self, partition: int, v: OffsetValue) -> None:
        meta = v.metadata or ""
        if not meta:
            meta = ""  # share the one empty string
        exp = _NO_EXPIRE if v.expire_timestamp is None else v.expire_timestamp
        i = self.slot.get(partition)
        if i is None:
            self.slot[partition] = len(self.partition)
            self.partition.append(partition)
            self.offset.append(v.offset)
            self.commit_ts.append(v.commit_timestamp)
            self.expire_ts.append(exp)
            self.epoch.append(v.leader_epoch)
            self.metadata.append(meta)
        else:
            self.offset[i] = v.offset
            self.commit_ts[i] = v.commit_timestamp
            self.expire_ts[i] = exp
            self.epoch[i] = v.leader_epoch
            self.metadata[i] = meta

    def remove(self, partition: int) -> bool:
        i = self.slot.pop(partition, None)
        if i is None:
            return False
        last = len(self.partition) - 1
        if i != last:
            moved = self.partition[last]
            self.partition[i] = moved
            self.offset[i] = self.offset[last]
            self.commit_ts[i] = self.commit_ts[last]
            self.expire_ts[i] = self.expire_ts[last]
            self.epoch[i] = self.epoch[last]
            self.metadata[i] = self.metadata[last]
            self.slot[moved] = i
        for arr in (self.partition, self.offset, self.commit_ts, self.expire_ts, self.epoch):
            arr.pop()
        self.metadata.pop()
        return True

    def __len__(self) -> int:
        return len(self.partition)


class OffsetStore:
    """topic -> partition -> committed offset, for one group."""

    __slots__ = ("_topics", "_count")

    def __init__(self) -> None:
        self._topics: dict[str, _TopicOffsets] = {}
        self._count = 0

    def get(self, topic: str, partition: int) -> OffsetValue | None:
        t = self._topics.get(topic)
        return None if t is None else t.get(partition)

    def put(self, topic: str, partition: int, value: OffsetValue) -> None:
        t = self._topics.get(topic)
        if t is None:
            t = self._topics[topic] = _TopicOffsets()
        before = len(t)
        t.put(partition, value)
        self._count += len(t) - before

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
        return t is not None and tp[1] in t.slot

    def topics(self) -> list[str]:
        return list(self._topics)

    def partitions(self, topic: str) -> list[int]:
        t = self._topics.get(topic)
        return [] if t is None else list(t.partition)

    def keys(self) -> list[tuple[str, int]]:
        return [(topic, p) for topic, t in self._topics.items() for p in t.partition]

    def items(self) -> Iterator[tuple[str, int, OffsetValue]]:
        for topic, t in list(self._topics.items()):
            for p in list(t.partition):
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
        for topic, t in self._topics.items():
            if topic in skip_topics:
                continue
            for i, p in enumerate(t.partition):
                if (topic, p) in pending:
                    continue
                exp = t.expire_ts[i]
                if exp != _NO_EXPIRE:
                    if now >= exp:
                        out.append((topic, p))
                else:
                    base = t.commit_ts[i] if base_ts is None else base_ts
                    if now - base >= retention_ms:
                        out.append((topic, p))
        return out
