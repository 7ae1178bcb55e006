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
- high watermark = log end offset on a single node. A replicated partition (plog.replica,
  server/replication/) is served by its leader only (NOT_LEADER_OR_FOLLOWER elsewhere, its
  leader epoch checked against current_leader_epoch): a consumer (replica id -1) reads below
  the high watermark (KIP-392: a consumer's v11+ Fetch from a follower too, below the high
  watermark the follower knows; with replica.selector.class the leader may answer a
  preferred_read_replica instead, server/replication/read_replica.py), a follower (replica id >= 0: replica_id, or ReplicaState v15+) up to
  the log end, and its fetch offset tells the leader how far it has copied. Last stable offset and isolation_level=1
  (read_committed: batches below the LSO, with the aborted transactions they overlap) are
  server/handlers/fetch_txn.py; aborted_transactions is null for read_uncommitted.
- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID (v13+ topic ids),
  OFFSET_OUT_OF_RANGE, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (current_leader_epoch v9+).
- Fetch sessions (KIP-227): server/handlers/fetch_session.py picks the request's context; a
  full request with epoch 0 is read here and makes a session when it is answered (its id in
  the response); incremental requests are served there.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.protocol.data_fastpath import FetchResponseData
from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import leader_epoch_error, log_of, not_leader
from kcoord.server.deferred import Deferred
from kcoord.server.handlers import fetch_session, fetch_txn
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

    __slots__ = ("topic", "index", "offset", "max_bytes", "plog", "error", "start_seg", "start_pos", "available",
                 "replica", "consumer", "any_replica", "preferred")

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
        self.replica: Any = None  # the partition's replica when replicated (server/replication/)
        self.consumer = True  # not a follower: reads below the high watermark
        self.any_replica = False  # a consumer's Fetch v11+ (KIP-392): a follower may serve it
        self.preferred: int | None = None  # the leader names this replica instead of reading (KIP-392)


def replica_id_of(req: Any, version: int) -> int:
    """The fetching broker's id (-1: a consumer): replica_id, or ReplicaState from v15."""
    if version >= 15:
        state = getattr(req, "replica_state", None)
        return state.replica_id if state is not None and state.replica_id is not None else -1
    rid = req.replica_id
    return -1 if rid is None else rid


def _below(data: bytes, hw: int) -> bytes:
    """The whole batches of `data` that start below the high watermark."""
    pos, n = 0, len(data)
    while n - pos >= 12:
        if int.from_bytes(data[pos:pos + 8], "big", signed=True) >= hw:
            break
        pos += int.from_bytes(data[pos + 8:pos + 12], "big", signed=True) + 12
    return data if pos >= n else data[:pos]


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
            replica = part.replica
            if replica is not None and (replica.stopped or not (replica.is_leader or part.any_replica)):
                rows.append((ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, b"", -1, None))  # lost it while parked
                failed = True
                continue
            if part.preferred is not None:  # KIP-392: no records, the replica to read from instead
                hw = replica.hw
                rows.append((ErrorCode.NONE, hw, plog.log_start_offset, b"",
                             min(fetch_txn.lso(dp, part.topic, part.index, plog), hw), None, part.preferred))
                failed = True  # answered at once, as Kafka does
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
            hw = plog.log_end_offset
            if replica is not None:
                hw = replica.hw
                stable = min(stable, hw)
                if part.consumer and data:
                    data = _below(data, hw)
            aborted = None
            if isolation == READ_COMMITTED:
                data, aborted = fetch_txn.committed_read(dp, part.topic, part.index, plog, part.offset, data, stable)
            n = len(data)
            if n:
                min_one = False
                total += n
                remaining = max(0, remaining - n)
            rows.append((ErrorCode.NONE, hw, plog.log_start_offset, data, stable, aborted))
        out.append(rows)
    return out, total, failed


def _response(version: int, req: Any, resolved: list[tuple[Any, list[_Part]]],
              rows: list[list[tuple]], sessions: Any = None) -> FetchResponseData:
    """The response (encoded by protocol/data_fastpath.py); `sessions`: the cache a full
    request's new session goes to (None: sessionless)."""
    session_id = 0 if sessions is None else fetch_session.create(sessions, req, version, resolved, rows)
    topics = []
    for (t, parts), trows in zip(resolved, rows, strict=True):
        partitions = []
        for part, (err, hw, log_start, data, stable, aborted, *preferred) in zip(parts, trows, strict=True):
            if aborted is not None:
                aborted = [(a.producer_id, a.first_offset) for a in aborted] if err == ErrorCode.NONE else None
            partitions.append((part.index, err, hw, stable, log_start, aborted, data, *preferred))
        topics.append((t.topic_id if version >= 13 else t.topic, partitions))
    return FetchResponseData(version, ErrorCode.NONE, session_id, topics)


class DelayedFetch(DelayedOperation):
    """A parked fetch. try_complete checks every partition; an append wakes it through
    try_complete_key, which looks again only at the partition that grew and keeps the running
    total of available bytes (each partition's share is remembered in _Part.available)."""

    __slots__ = ("version", "req", "resolved", "min_bytes", "max_bytes", "deferred", "dp", "read_committed",
                 "by_key", "acc", "sessions")

    def __init__(self, version: int, req: Any, resolved: list[tuple[Any, list[_Part]]], dp: Any,
                 sessions: Any = None) -> None:
        super().__init__(req.max_wait_ms)
        self.sessions = sessions
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
        replica = part.replica
        if replica is not None:
            if replica.stopped or not (replica.is_leader or part.any_replica):
                return -1
            if part.consumer and replica.hw <= part.offset:
                return 0  # nothing committed past the fetch offset yet
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
        self.deferred.complete(_response(self.version, self.req, self.resolved, rows, self.sessions))


class FetchApi:
    """Fetch's handler, built by the composition root (server/node.py) with the topic registry,
    the logs and the data plane (its fetch purgatory, transaction state)."""

    def __init__(self, topics: TopicRegistry, logs: LogManager, data_plane: DataPlane, cluster: Callable[[], Any],
                 replicas: Callable[[], Any],
                 read_replica: Callable[[Any, str | None, int], int | None] = lambda *_: None) -> None:
        self.topics = topics
        # KIP-392: (leader's replica, client rack, fetch offset) -> the follower to read from, or None
        self.read_replica = read_replica
        # a cluster node's ClusterNode and replica manager, else None (server/cluster/, server/replication/)
        self.cluster = cluster
        self.replicas = replicas
        self.logs = logs
        self.data_plane = data_plane

    def handle_fetch(self, ctx: RequestContext, req: Any, version: int) -> Any:
        dp = self.data_plane
        kind = fetch_session.context(dp.fetch_sessions, req, version)
        if isinstance(kind, ErrorCode):
            return FetchResponseData(version, kind, 0, [])
        if not isinstance(kind, str):
            reader = fetch_session.SessionReader(dp.fetch_sessions, self.topics,
                                                 lambda topic, p: log_of(self.logs, topic, p), _read, _Part, dp,
                                                 self.check, replica_id_of(req, version))
            answer = reader.incremental(kind, req, version)
            if answer is not None:
                return answer
        sessions = dp.fetch_sessions if kind == fetch_session.FULL else None
        resolved = self._resolve(req, version)
        rows, total, failed = _read(resolved, req.max_bytes, dp, req.isolation_level)
        keys = [(part.topic, part.index) for _, parts in resolved for part in parts if part.plog is not None]
        if req.max_wait_ms <= 0 or not keys or total >= req.min_bytes or failed:
            return _response(version, req, resolved, rows, sessions)
        op = DelayedFetch(version, req, resolved, dp, sessions)
        if not dp.fetch_purgatory.try_complete_else_watch(op, keys):
            dp.parked.add(op)
        return op.deferred

    def _resolve(self, req: Any, version: int) -> list[tuple[Any, list[_Part]]]:
        replica_id = replica_id_of(req, version)
        any_replica = version >= 11 and replica_id < 0  # Kafka's clientMetadata: any replica may serve it
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
                err, replica = self.check(topic.name, p.partition, plog, p.current_leader_epoch if version >= 9 else -1,
                                          p.fetch_offset, replica_id, any_replica)
                part = _Part(topic.name, p.partition, p.fetch_offset, p.partition_max_bytes,
                             plog if err == ErrorCode.NONE else None, err)
                if replica is not None:
                    part.replica, part.consumer, part.any_replica = replica, replica_id < 0, any_replica
                    if any_replica and err == ErrorCode.NONE and replica.is_leader:
                        part.preferred = self.read_replica(replica, req.rack_id, p.fetch_offset)
                parts.append(part)
            out.append((t, parts))
        return out

    def check(self, topic: str, partition: int, plog: PartitionLog | None, current_leader_epoch: int,
              fetch_offset: int, replica_id: int, any_replica: bool = False) -> tuple[ErrorCode, Any]:
        """May this node serve the partition to this fetcher: (error, the partition's replica
        when replicated). Full fetches and a session's incremental ones (fetch_session.py) both
        ask here. A replicated partition: only its leader serves it, in its epoch; a follower's
        fetch offset is its log end offset (the leader's high watermark and ISR follow it).
        `any_replica` (a consumer's Fetch v11+, KIP-392): a follower serves it too, below the
        high watermark it learnt from the leader's fetch responses."""
        cluster = self.cluster()
        if (cluster is not None and replica_id < 0 and not_leader(cluster, topic, partition)
                and not (any_replica and plog is not None and plog.replica is not None)):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
        if plog is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        replica = plog.replica
        if replica is None:
            return leader_epoch_error(current_leader_epoch) or ErrorCode.NONE, None
        bad = leader_epoch_error(current_leader_epoch, replica.leader_epoch)
        if bad is not None:
            return bad, replica
        if replica.stopped or not (replica.is_leader or any_replica):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, replica
        if replica_id >= 0:
            self.replicas().follower_fetched(replica, replica_id, fetch_offset)
        return ErrorCode.NONE, replica
