"""What Fetch does with sessions (KIP-227), called by server/handlers/fetch.py; the cache and
its rules are server/fetch_sessions.py.

- context(): Kafka's FetchManager.newContext for a request's (session id, epoch): sessionless,
  full (a session is created when the answer is built: create()), incremental (the session),
  or a session error code.
- incremental(): updates the session from the request, reads only the partitions it altered
  and the ones marked ready since (in session order, with the request's max_bytes and KIP-74
  rule), answers the ones with news; with less than min_bytes and no error it parks as one
  DelayedSessionFetch watched under the session's own key, which the cache pokes for each
  session partition that grows. An idle incremental fetch therefore touches no partition.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.protocol.data_fastpath import FetchResponseData
from kcoord.protocol.errors import ErrorCode
from kcoord.server.deferred import Deferred
from kcoord.server.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    next_epoch,
)
from kcoord.server.handlers import fetch_txn
from kcoord.server.purgatory import DelayedOperation

FULL = "full"
SESSIONLESS = "sessionless"
READ_COMMITTED = 1


def privileged(req: Any, version: int) -> bool:
    """A follower's fetch (Kafka's privileged sessions)."""
    if version >= 15:
        state = getattr(req, "replica_state", None)
        return state is not None and getattr(state, "replica_id", -1) >= 0
    return getattr(req, "replica_id", -1) >= 0


def context(cache: FetchSessionCache, req: Any, version: int) -> str | ErrorCode | FetchSession:
    """FULL, SESSIONLESS, an error code (answered with no partitions and session id 0), or the
    session of a valid incremental request (already at its next epoch)."""
    if version < 7:
        return SESSIONLESS
    sid, epoch = req.session_id, req.session_epoch
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if sid != INVALID_SESSION_ID:
            cache.remove(sid)  # any session named in a full request is closed
        return SESSIONLESS if epoch == FINAL_EPOCH else FULL
    session = cache.get(sid)
    if session is None:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if session.epoch != epoch:
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH
    if session.uses_topic_ids != (version >= 13):
        return ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    return session


def create(cache: FetchSessionCache, req: Any, version: int, resolved: list[tuple[Any, list[Any]]],
           rows: list[list[tuple]]) -> int:
    """A full fetch's answer is ready: make its session (0 when the cache has no room)."""
    v13 = version >= 13
    size = sum(len(parts) for _, parts in resolved)

    def fill(session: FetchSession) -> None:
        for (t, parts), trows in zip(resolved, rows, strict=True):
            tkey = t.topic_id if v13 else t.topic
            for p, part, row in zip(t.partitions, parts, trows, strict=True):
                cp = CachedPartition((tkey, part.index), part.topic if part.plog is not None else
                                     (None if v13 else t.topic), t.topic_id if v13 else None, part.index)
                cp.fetch_offset, cp.max_bytes = part.offset, part.max_bytes
                cp.leader_epoch = p.current_leader_epoch if version >= 9 else -1
                cp.plog = part.plog
                cp.hw, cp.log_start = row[1], row[2]
                if row[0]:
                    cp.hw = -1
                cache.add_partition(session, cp)
                if cp.may_answer():  # an error, or more to read than this answer held
                    session.ready[cp] = None

    return cache.maybe_create(privileged(req, version), size, v13, fill)


class SessionReader:
    """Reads a session's partitions for one request. Dependencies: the topic table, the
    partition-log lookup, the fetch read (fetch.py's _read and _Part), the data plane (the
    purgatory, the parked set, transaction state), and fetch.py's check of whether this node
    serves a partition (its leader epoch, leadership and replica, as a full fetch is checked)
    with the fetcher's replica id (-1: a consumer, which reads below the high watermark)."""

    def __init__(self, cache: FetchSessionCache, topics: Any, partition_log: Callable[[Any, int], Any],
                 read: Callable[..., tuple[list[list[tuple]], int, bool]], part: Callable[..., Any], dp: Any,
                 check: Callable[..., tuple[ErrorCode, Any]], replica_id: int = -1) -> None:
        self.cache = cache
        self.topics = topics
        self.partition_log = partition_log
        self.read = read
        self.part = part
        self.dp = dp
        self.check = check
        self.replica_id = replica_id

    def any_replica(self, version: int) -> bool:
        """A consumer's Fetch v11+: a follower may serve it (KIP-392, server/handlers/fetch.py)."""
        return version >= 11 and self.replica_id < 0

    def resolve(self, session: FetchSession, cp: CachedPartition, version: int) -> ErrorCode:
        """Look the partition's log up again (it had none, or its topic was deleted)."""
        if version >= 13:
            topic = self.topics.by_id.get(cp.topic_id)
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            topic = self.topics.get(cp.key[0])
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        self.cache.rename(session, cp, topic.name if topic is not None else (None if version >= 13 else cp.key[0]))
        if topic is None:
            cp.plog = None
            return missing
        cp.plog = self.partition_log(topic, cp.index)
        return ErrorCode.NONE if cp.plog is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def incremental(self, session: FetchSession, req: Any, version: int) -> Any:
        """Serve a valid incremental request; None: the session was emptied and closed, the
        request is answered sessionless by the caller."""
        cache = self.cache
        v13 = version >= 13
        altered = []
        for t in req.topics:
            tkey = t.topic_id if v13 else t.topic
            for p in t.partitions:
                key = (tkey, p.partition)
                cp = session.parts.get(key)
                if cp is None:
                    cp = CachedPartition(key, None, t.topic_id if v13 else None, p.partition)
                    cache.add_partition(session, cp)
                    self.resolve(session, cp, version)
                cp.fetch_offset, cp.max_bytes = p.fetch_offset, p.partition_max_bytes
                cp.leader_epoch = p.current_leader_epoch if version >= 9 else -1
                altered.append(cp)
        for f in req.forgotten_topics_data or ():
            tkey = f.topic_id if v13 else f.topic
            for index in f.partitions:
                cache.forget_partition(session, (tkey, index))
        if not session.parts:
            cache.remove(session)
            return None
        cache.touch(session, cache.now_ms())
        session.epoch = next_epoch(session.epoch)
        cache.incremental_fetches += 1
        if session.waiting is not None:  # a parked request of an older epoch: it answers the epoch error now
            session.waiting.force_complete()
        expected = session.epoch
        cands = session.candidates(altered)
        rows, total, failed = self._read(session, cands, req, version)
        if req.max_wait_ms <= 0 or total >= req.min_bytes or failed:
            return self.answer(session, expected, cands, rows, version)
        op = DelayedSessionFetch(self, session, expected, req, version, cands)
        if not self.dp.fetch_purgatory.try_complete_else_watch(op, [("fetch-session", session.id)]):
            self.dp.parked.add(op)
            session.waiting = op
        return op.deferred

    def _read(self, session: FetchSession, cands: list[CachedPartition], req: Any,
              version: int) -> tuple[list[tuple], int, bool]:
        parts = []
        for cp in cands:
            err = ErrorCode.NONE
            replica = None
            if cp.plog is None or cp.plog.deleted:
                err = self.resolve(session, cp, version)
            if err == ErrorCode.NONE:
                err, replica = self.check(cp.topic, cp.index, cp.plog, cp.leader_epoch if version >= 9 else -1,
                                          cp.fetch_offset, self.replica_id, self.any_replica(version))
            part = self.part(cp.topic, cp.index, cp.fetch_offset, cp.max_bytes,
                             cp.plog if err == ErrorCode.NONE else None, err)
            if replica is not None:
                part.replica, part.consumer = replica, self.replica_id < 0
                part.any_replica = self.any_replica(version)
            parts.append(part)
        rows, total, failed = self.read([(None, parts)], req.max_bytes, self.dp, req.isolation_level)
        return rows[0], total, failed

    def answer(self, session: FetchSession, expected: int, cands: list[CachedPartition], rows: list[tuple],
               version: int) -> FetchResponseData:
        if session.epoch != expected:  # another request of this session came in meanwhile
            return FetchResponseData(version, ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, [])
        v13 = version >= 13
        topics: list[tuple[Any, list[tuple]]] = []
        for cp, (err, hw, log_start, data, stable, aborted) in zip(cands, rows, strict=True):
            if not cp.must_respond(err, hw, log_start, data):
                continue
            if data:
                session.place_last(cp)
            if aborted is not None:
                aborted = [(a.producer_id, a.first_offset) for a in aborted] if err == ErrorCode.NONE else None
            tkey = cp.topic_id if v13 else cp.key[0]
            row = (cp.index, err, hw, stable, log_start, aborted, data)
            if topics and topics[-1][0] == tkey:
                topics[-1][1].append(row)
            else:
                topics.append((tkey, [row]))
        return FetchResponseData(version, ErrorCode.NONE, session.id, topics)


class DelayedSessionFetch(DelayedOperation):
    """A parked incremental fetch, watched under its session's key only. The cache calls poke()
    for each session partition that grows; the bytes each partition adds toward min_bytes are
    kept per partition (a partition that grows twice counts once, at its latest size)."""

    __slots__ = ("reader", "session", "expected", "req", "version", "min_bytes", "read_committed", "deferred",
                 "available", "acc")

    def __init__(self, reader: SessionReader, session: FetchSession, expected: int, req: Any, version: int,
                 cands: list[CachedPartition]) -> None:
        super().__init__(req.max_wait_ms)
        self.reader = reader
        self.session = session
        self.expected = expected
        self.req = req
        self.version = version
        self.min_bytes = req.min_bytes
        self.read_committed = req.isolation_level == READ_COMMITTED
        self.deferred: Deferred[Any] = Deferred()
        self.available: dict[CachedPartition, int] = {cp: 0 for cp in cands}
        self.acc = 0

    def _bytes(self, cp: CachedPartition) -> int:
        """Bytes `cp` adds toward min_bytes now; -1: answer at once."""
        plog = cp.plog
        if plog is None or plog.deleted:
            return -1
        off = cp.fetch_offset
        end = plog.log_end_offset
        if off < plog.log_start_offset or off > end:
            return -1
        replica = plog.replica
        if replica is not None:
            if replica.stopped or not (replica.is_leader or self.reader.any_replica(self.version)):
                return -1
            if self.reader.replica_id < 0 and replica.hw <= off:
                return 0  # nothing committed past the fetch offset yet
        if off == end:
            return 0
        if self.read_committed and fetch_txn.lso(self.reader.dp, cp.topic, cp.index, plog) <= off:
            return 0
        seg = plog.active
        if off < seg.base_offset:
            return -1  # not on the active segment (Kafka's case F)
        pos = seg.batch_start(off)
        if pos is None:
            return -1
        return min(seg.size - pos, max(cp.max_bytes, 0))

    def poke(self, cp: CachedPartition) -> None:
        if self.is_completed:
            return
        n = self._bytes(cp)
        if n < 0:
            self.force_complete()
            return
        self.acc += n - self.available.get(cp, 0)
        self.available[cp] = n
        if self.acc >= self.min_bytes:
            self.force_complete()

    def try_complete(self) -> bool:
        acc = 0
        for cp in self.available:
            n = self._bytes(cp)
            if n < 0:
                return self.force_complete()
            self.available[cp] = n
            acc += n
        self.acc = acc
        if acc >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        reader, session = self.reader, self.session
        reader.dp.parked.discard(self)
        if session.waiting is self:
            session.waiting = None
        if session.epoch != self.expected:
            self.deferred.complete(FetchResponseData(self.version, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                                                     session.id, []))
            return
        cands = session.candidates(())
        rows, _, _ = reader._read(session, cands, self.req, self.version)
        self.deferred.complete(reader.answer(session, self.expected, cands, rows, self.version))
