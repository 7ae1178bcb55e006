"""Fetch v4-v17: read whole batches from the partition logs, long polling in the purgatory.

- Partitions are read in request order. KIP-74: until the first non-empty partition, the first
  batch is returned even if it is larger than max_bytes / partition_max_bytes; after it, both
  limits are hard.
- If fewer than min_bytes are available (and max_wait_ms > 0 and nothing failed), the request
  parks as a DelayedFetch watched under each (topic, partition); Produce appends retry it. It
  completes when the bytes appended since cover min_bytes (each partition counting at most its
  partition_max_bytes), when a partition rolls a segment or its log start passes the fetch
  offset, when its topic is deleted (that partition answers UNKNOWN_TOPIC_OR_PARTITION, as
  Kafka's re-read does), or when max_wait_ms expires; either way it reads again and answers
  what is there.
- high watermark = log end offset (one replica); last stable offset and isolation_level=1
  (read_committed: batches below the LSO, with the aborted transactions they overlap) are
  server/handlers/fetch_txn.py; aborted_transactions is null for read_uncommitted;
  preferred_read_replica -1.
- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID (v13+ topic ids),
  OFFSET_OUT_OF_RANGE, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (current_leader_epoch v9+).
- Fetch sessions (KIP-227) are declined, as Kafka does when its session cache is full: a full
  request (epoch 0 or -1) is served sessionless and answered with session_id 0, which tells
  the client there is no session, so it keeps sending full requests; an incremental request
  (epoch > 0) names a session we never created: FETCH_SESSION_ID_NOT_FOUND.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kcoord.protocol.data_fastpath import FetchResponseData
from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import leader_epoch_error, log_of
from kcoord.server.deferred import Deferred
from kcoord.server.handlers import fetch_txn
from kcoord.server.purgatory import DelayedOperation
from kcoord.storage.log import OffsetOutOfRangeError, PartitionLog

if TYPE_CHECKING:
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

READ_COMMITTED = 1
ZERO_UUID = uuid.UUID(int=0)


class _Part:
    """One requested partition, resolved."""

    __slots__ = ("topic", "index", "offset", "max_bytes", "plog", "error", "start_seg", "start_pos", "available")

    def __init__(self, topic: str | None, index: int, offset: int, max_bytes: int, plog: PartitionLog | None,
                 error: ErrorCode) -> None:
        self.topic = topic
        self.index = index
        self.offset = offset
        self.max_bytes = max_bytes
        self.plog = plog
        self.error = error
        self.start_seg: Any = None
        self.start_pos = 0
        self.available = 0  # bytes counted toward min_bytes at the last check (DelayedFetch)


def _read(resolved: list[tuple[Any, list[_Part]]], max_bytes: int, dp: Any,
          isolation: int) -> tuple[list[list[tuple]], int, bool]:
    """Read every partition; returns per-partition (error, hw, log_start, records, lso,
    aborted transactions), the total bytes read and whether any partition failed."""
    remaining = max(max_bytes, 0)
    min_one = True
    total = 0
    failed = False
    out = []
    for _, parts in resolved:
        rows = []
        for part in parts:
            plog = part.plog
            if plog is None or plog.deleted:  # deleted while the fetch was parked
                rows.append((part.error if plog is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, b"", -1,
                             None))
                failed = True
                continue
            try:
                data = plog.read(part.offset, min(max(part.max_bytes, 0), remaining), min_one)
            except OffsetOutOfRangeError:
                rows.append((ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, b"", -1, None))
                failed = True
                continue
            except OSError:
                rows.append((ErrorCode.KAFKA_STORAGE_ERROR, -1, -1, b"", -1, None))
                failed = True
                continue
            stable = fetch_txn.lso(dp, part.topic, part.index, plog)
            aborted = None
            if isolation == READ_COMMITTED:
                data, aborted = fetch_txn.committed_read(dp, part.topic, part.index, plog, part.offset, data, stable)
            n = len(data)
            if n:
                min_one = False
                total += n
                remaining = max(0, remaining - n)
            rows.append((ErrorCode.NONE, plog.log_end_offset, plog.log_start_offset, data, stable, aborted))
        out.append(rows)
    return out, total, failed


def _response(version: int, req: Any, resolved: list[tuple[Any, list[_Part]]],
              rows: list[list[tuple]]) -> FetchResponseData:
    """The response (encoded by protocol/data_fastpath.py)."""
    topics = []
    for (t, parts), trows in zip(resolved, rows, strict=True):
        partitions = []
        for part, (err, hw, log_start, data, stable, aborted) in zip(parts, trows, strict=True):
            if aborted is not None:
                aborted = [(a.producer_id, a.first_offset) for a in aborted] if err == ErrorCode.NONE else None
            partitions.append((part.index, err, hw, stable, log_start, aborted, data))
        topics.append((t.topic_id if version >= 13 else t.topic, partitions))
    return FetchResponseData(version, ErrorCode.NONE, 0, topics)


class DelayedFetch(DelayedOperation):
    """A parked fetch. try_complete checks every partition; an append wakes it through
    try_complete_key, which looks again only at the partition that grew and keeps the running
    total of available bytes (each partition's share is remembered in _Part.available)."""

    __slots__ = ("version", "req", "resolved", "min_bytes", "max_bytes", "deferred", "dp", "read_committed",
                 "by_key", "acc")

    def __init__(self, version: int, req: Any, resolved: list[tuple[Any, list[_Part]]], dp: Any) -> None:
        super().__init__(req.max_wait_ms)
        self.dp = dp
        self.version = version
        self.req = req
        self.resolved = resolved
        self.min_bytes = req.min_bytes
        self.max_bytes = req.max_bytes
        self.read_committed = req.isolation_level == READ_COMMITTED
        self.deferred: Deferred[Any] = Deferred()
        self.by_key: dict[tuple[str, int], list[_Part]] = {}
        self.acc = 0
        for _, parts in resolved:
            for part in parts:
                plog = part.plog
                if plog is None:
                    continue
                self.by_key.setdefault((part.topic, part.index), []).append(part)
                seg = plog.active
                part.start_seg = seg
                if part.offset >= plog.log_end_offset:
                    part.start_pos = seg.size
                elif part.offset >= seg.base_offset:
                    pos = seg.batch_start(part.offset)
                    part.start_pos = pos if pos is not None else seg.size
                else:
                    part.start_seg = None  # on an older segment: answer at the first check

    def _available(self, part: _Part) -> int:
        """Bytes `part` adds toward min_bytes now; -1: answer at once (deleted, out of range,
        rolled past the fetch offset)."""
        plog = part.plog
        if plog.deleted or part.offset < plog.log_start_offset or part.offset > plog.log_end_offset:
            return -1
        if self.read_committed and fetch_txn.lso(self.dp, part.topic, part.index, plog) <= part.offset:
            return 0  # nothing committed to read yet (a marker will retry this)
        seg = plog.active
        if part.start_seg is not seg:
            if part.offset < plog.log_end_offset:
                return -1  # rolled (Kafka's case F)
            return 0
        return min(seg.size - part.start_pos, max(part.max_bytes, 0))

    def try_complete(self) -> bool:
        acc = 0
        for parts in self.by_key.values():
            for part in parts:
                n = self._available(part)
                if n < 0:
                    return self.force_complete()
                part.available = n
                acc += n
        self.acc = acc
        if acc >= self.min_bytes:
            return self.force_complete()
        return False

    def try_complete_key(self, key: tuple[str, int]) -> bool:  # type: ignore[override]
        parts = self.by_key.get(key)
        if parts is None:
            return self.try_complete()
        for part in parts:
            n = self._available(part)
            if n < 0:
                return self.force_complete()
            self.acc += n - part.available
            part.available = n
        if self.acc >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.dp.parked.discard(self)
        rows, _, _ = _read(self.resolved, self.max_bytes, self.dp, self.req.isolation_level)
        self.deferred.complete(_response(self.version, self.req, self.resolved, rows))


class FetchApi:
    """Fetch's handler, built by the composition root (server/node.py) with the topic registry,
    the logs and the data plane (its fetch purgatory, transaction state)."""

    def __init__(self, topics: TopicRegistry, logs: LogManager, data_plane: DataPlane) -> None:
        self.topics = topics
        self.logs = logs
        self.data_plane = data_plane

    def handle_fetch(self, ctx: RequestContext, req: Any, version: int) -> Any:
        if version >= 7 and req.session_epoch not in (0, -1):
            return FetchResponseData(version, ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
        resolved = self._resolve(req, version)
        dp = self.data_plane
        rows, total, failed = _read(resolved, req.max_bytes, dp, req.isolation_level)
        keys = [(part.topic, part.index) for _, parts in resolved for part in parts if part.plog is not None]
        if req.max_wait_ms <= 0 or not keys or total >= req.min_bytes or failed:
            return _response(version, req, resolved, rows)
        op = DelayedFetch(version, req, resolved, dp)
        if not dp.fetch_purgatory.try_complete_else_watch(op, keys):
            dp.parked.add(op)
        return op.deferred

    def _resolve(self, req: Any, version: int) -> list[tuple[Any, list[_Part]]]:
        out = []
        for t in req.topics:
            if version >= 13:
                topic = self.topics.by_id.get(t.topic_id)
                missing = ErrorCode.UNKNOWN_TOPIC_ID
            else:
                topic = self.topics.get(t.topic)
                missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            parts = []
            for p in t.partitions:
                if topic is None:
                    parts.append(_Part(None, p.partition, p.fetch_offset, p.partition_max_bytes, None, missing))
                    continue
                plog = log_of(self.logs, topic, p.partition)
                err = ErrorCode.NONE if plog is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if plog is not None and version >= 9:
                    err = leader_epoch_error(p.current_leader_epoch) or ErrorCode.NONE
                parts.append(_Part(topic.name, p.partition, p.fetch_offset, p.partition_max_bytes,
                                   plog if err == ErrorCode.NONE else None, err))
            out.append((t, parts))
        return out
