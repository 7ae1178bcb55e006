"""Incremental fetch sessions (KIP-227): the session cache, its eviction rules, and what each
session remembers per partition, as Kafka's FetchSessionCache / FetchManager do.

A Fetch request's (session_id, session_epoch) picks one of four contexts (new_context):
- epoch -1 (FINAL): sessionless, answered with session id 0; a nonzero session id is closed.
- epoch 0 (INITIAL): a full fetch that creates a session when the cache has room (or can evict
  one); the response carries its id and the session is at epoch 1. A nonzero session id in the
  request is closed first.
- epoch > 0: an incremental fetch of an existing session at exactly that epoch: its partitions
  are updated (added, altered, forgotten) and the session moves to the next epoch. Unknown id:
  FETCH_SESSION_ID_NOT_FOUND; another epoch: INVALID_FETCH_SESSION_EPOCH; a session made with
  topic ids (v13+) used by an older version or the reverse: FETCH_SESSION_TOPIC_ID_ERROR. A
  session left with no partitions is closed and the request answered sessionless.
- An incremental response holds only the partitions that must be sent: records, an error, or a
  high watermark / log start offset other than the one last sent (an error resets the
  remembered high watermark to -1, so the partition is sent again once the error is gone).
  Partitions that returned records move to the end of the session's order (fairness).

Eviction, as Kafka's FetchSessionCacheShard: the cache is 8 shards, each holding
max.incremental.fetch.session.cache.slots / 8 sessions, with its own range of session ids; new
sessions go to the shards in turn, and only sessions of that shard may be evicted for one. When
the shard is full: its least recently used session if idle longer than the eviction time
(Kafka's fixed 120000; kcoord.min.incremental.fetch.session.eviction.ms), else its least valuable
evictable session (ordered by privileged, then partition count, then id) if the new one is
worth more. Evictability is decided when a session is used: one younger than the eviction time
is evictable only by a follower's (privileged) new session, and a follower's only once older.

Cheap when nothing changed: every session partition is indexed under its (topic, partition),
and the data plane's `touched` (an append, a log start move, a deletion) marks it in the
session's `ready` set and pokes the session's parked fetch. An incremental fetch reads only
the partitions it altered and the ready ones (in session order), so an idle fetch costs the
same for 10 or 10,000 partitions. A partition stays ready while reading it may answer
something: its fetch offset is not the log end, the log end or start moved since the last
answer, or it has no log (an error).
"""
from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT_MAX = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """FetchMetadata.nextEpoch."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT_MAX else epoch + 1


class CachedPartition:
    """What a session remembers of one partition: the request's parameters and the high
    watermark / log start offset it last sent; `plog`/`topic` are the resolved log (None: the
    topic or partition is unknown, answered with an error and re-resolved at every read)."""

    __slots__ = ("key", "topic", "topic_id", "index", "fetch_offset", "max_bytes", "leader_epoch", "hw",
                 "log_start", "plog", "seq")

    def __init__(self, key: tuple, topic: str | None, topic_id: Any, index: int) -> None:
        self.key = key  # (topic id or name, partition)
        self.topic = topic
        self.topic_id = topic_id
        self.index = index
        self.fetch_offset = -1
        self.max_bytes = 0
        self.leader_epoch = -1
        self.hw = -1
        self.log_start = -1
        self.plog: Any = None
        self.seq = 0  # position in the session's order

    def may_answer(self) -> bool:
        """Could reading it now answer anything (records, an error, a moved hw / log start)?"""
        plog = self.plog
        if plog is None or plog.deleted:
            return True
        replica = plog.replica
        if replica is not None and (not replica.is_leader or replica.stopped):
            return True  # answered NOT_LEADER_OR_FOLLOWER
        end = plog.log_end_offset
        return self.fetch_offset != end or self.hw != end or self.log_start != plog.log_start_offset

    def must_respond(self, error: int, hw: int, log_start: int, records: bytes | None) -> bool:
        """Kafka's maybeUpdateResponseData: is this answer for the partition news? Updates what
        the session remembers as sent."""
        respond = bool(records)
        if self.hw != hw:
            respond = True
            self.hw = hw
        if self.log_start != log_start:
            respond = True
            self.log_start = log_start
        if error:
            self.hw = -1
            respond = True
        return respond


class FetchSession:
    __slots__ = ("id", "privileged", "uses_topic_ids", "created_ms", "last_used_ms", "epoch", "parts", "ready",
                 "waiting", "_seq", "cached_size", "by_all", "by_privileged", "followed_ms")

    def __init__(self, session_id: int, privileged: bool, uses_topic_ids: bool, now: int) -> None:
        self.id = session_id
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.created_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.parts: dict[tuple, CachedPartition] = {}
        self.ready: dict[CachedPartition, None] = {}
        # the parked incremental fetch (its poke(cp) is called for each partition that grows)
        self.waiting: Any = None
        self._seq = 0
        self.cached_size = -1
        self.by_all = False  # evictable by any new session (older than the eviction time)
        self.by_privileged = False  # evictable by a follower's new session
        self.followed_ms = 0  # a follower's session: when its unnamed partitions last counted as fetched

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def place_last(self, cp: CachedPartition) -> None:
        self._seq += 1
        cp.seq = self._seq

    def candidates(self, altered: Iterable[CachedPartition]) -> list[CachedPartition]:
        """The partitions an incremental fetch must read, in session order: the ones the
        request added or altered (a new fetch offset or leader epoch is checked even when the
        log did not move) and the ready ones that may still answer something."""
        ready = self.ready
        asked = set()
        for cp in altered:
            ready[cp] = None
            asked.add(cp)
        out = []
        for cp in list(ready):
            if cp in asked or cp.may_answer():
                out.append(cp)
            else:
                del ready[cp]
        if len(out) > 1:
            out.sort(key=lambda c: c.seq)
        return out


NUM_SHARDS = 8
SESSION_ID_RANGE = INT_MAX // NUM_SHARDS


class _Shard:
    """One FetchSessionCacheShard: its sessions, their use order and its eviction rules."""

    def __init__(self, num: int, max_entries: int, eviction_ms: int) -> None:
        self.num = num
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.lru: dict[FetchSession, None] = {}  # least recently used first (touch re-inserts)

    def try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> FetchSession | None:
        if not self.lru:
            return None
        oldest = next(iter(self.lru))
        if now - oldest.last_used_ms > self.eviction_ms:
            return oldest
        pool = [s for s in self.sessions.values() if (s.by_privileged if privileged else s.by_all)]
        if not pool:
            return None
        victim = min(pool, key=FetchSession.evictable_key)
        return None if key < victim.evictable_key() else victim


class FetchSessionCache:
    """Kafka's FetchSessionCache (its shards) plus the index the data plane pokes."""

    def __init__(self, now_ms: Callable[[], int], max_slots: int = 1000, eviction_ms: int = 120000,
                 rng: random.Random | None = None) -> None:
        self.now_ms = now_ms
        self.eviction_ms = eviction_ms
        self.rng = rng or random.Random()
        self.shards = [_Shard(n, max_slots // NUM_SHARDS, eviction_ms) for n in range(NUM_SHARDS)]
        self._turn = 0  # the shard the next new session goes to
        self.watchers: dict[tuple[str, int], dict[CachedPartition, FetchSession]] = {}
        self.partitions_cached = 0
        self.evictions = 0
        self.incremental_fetches = 0  # served incremental requests (kcoord's own counter)

    # ------------------------------------------------------------------ the data plane's hook

    def touched(self, topic: str, partition: int) -> None:
        """A log grew, its start moved or it was deleted: mark it in every session holding it."""
        holders = self.watchers.get((topic, partition))
        if not holders:
            return
        for cp, session in list(holders.items()):
            session.ready[cp] = None
            if session.waiting is not None:
                session.waiting.poke(cp)

    def _watch(self, session: FetchSession, cp: CachedPartition) -> None:
        if cp.topic is not None:
            self.watchers.setdefault((cp.topic, cp.index), {})[cp] = session

    def _unwatch(self, cp: CachedPartition) -> None:
        if cp.topic is None:
            return
        holders = self.watchers.get((cp.topic, cp.index))
        if holders is not None:
            holders.pop(cp, None)
            if not holders:
                del self.watchers[(cp.topic, cp.index)]

    def rename(self, session: FetchSession, cp: CachedPartition, topic: str | None) -> None:
        """The partition resolved to another topic name (a topic id's name became known, or
        a name's topic was re-created): index it under the new name."""
        if cp.topic == topic:
            return
        self._unwatch(cp)
        cp.topic = topic
        self._watch(session, cp)

    # ------------------------------------------------------------------ sessions

    def shard_of(self, session_id: int) -> _Shard | None:
        n = session_id // SESSION_ID_RANGE
        return self.shards[n] if 0 <= n < NUM_SHARDS else None

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_of(session_id)
        return None if shard is None else shard.sessions.get(session_id)

    def __len__(self) -> int:
        return sum(len(shard.sessions) for shard in self.shards)

    def _new_session_id(self, shard: _Shard) -> int:
        while True:
            sid = self.rng.randrange(max(1, shard.num * SESSION_ID_RANGE), (shard.num + 1) * SESSION_ID_RANGE)
            if sid not in shard.sessions:
                return sid

    def maybe_create(self, privileged: bool, size: int, uses_topic_ids: bool,
                     fill: Callable[[FetchSession], None]) -> int:
        """A new session in the next shard if it has room (or one can be evicted); its id, else 0."""
        shard = self.shards[self._turn % NUM_SHARDS]
        self._turn += 1
        now = self.now_ms()
        if len(shard.sessions) >= shard.max_entries:
            victim = shard.try_evict(privileged, (privileged, size, 0), now)
            if victim is None:
                return INVALID_SESSION_ID
            self.remove(victim)
            self.evictions += 1
        session = FetchSession(self._new_session_id(shard), privileged, uses_topic_ids, now)
        fill(session)
        shard.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def add_partition(self, session: FetchSession, cp: CachedPartition) -> None:
        session.parts[cp.key] = cp
        session.place_last(cp)
        self._watch(session, cp)

    def forget_partition(self, session: FetchSession, key: tuple) -> bool:
        cp = session.parts.pop(key, None)
        if cp is None:
            return False
        session.ready.pop(cp, None)
        self._unwatch(cp)
        return True

    def remove(self, session: FetchSession | int) -> FetchSession | None:
        if isinstance(session, int):
            found = self.get(session)
            if found is None:
                return None
            session = found
        shard = self.shard_of(session.id)
        if shard is None or shard.sessions.pop(session.id, None) is None:
            return None
        shard.lru.pop(session, None)
        if session.cached_size > 0:
            self.partitions_cached -= session.cached_size
        for cp in session.parts.values():
            self._unwatch(cp)
        session.ready.clear()
        return session

    def touch(self, session: FetchSession, now: int) -> None:
        """Kafka's touch: last used now, size recounted, evictability re-decided."""
        shard = self.shard_of(session.id)
        assert shard is not None
        shard.lru.pop(session, None)
        session.last_used_ms = now
        shard.lru[session] = None
        if session.cached_size != -1:
            self.partitions_cached -= session.cached_size
        session.cached_size = len(session.parts)
        self.partitions_cached += session.cached_size
        old = now - session.created_ms > self.eviction_ms
        session.by_privileged = (not session.privileged) or old
        session.by_all = old


def metric_families(cache: FetchSessionCache) -> Iterable[Any]:
    """Prometheus families of Kafka's kafka.server:type=FetchSessionCache metrics."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    yield GaugeMetricFamily("kcoord_fetch_sessions", "Incremental fetch sessions in the cache (Kafka: "
                            "FetchSessionCache NumIncrementalFetchSessions)", value=len(cache))
    yield GaugeMetricFamily("kcoord_fetch_session_partitions_cached", "Partitions held by the fetch sessions "
                            "(Kafka: NumIncrementalFetchPartitionsCached)", value=cache.partitions_cached)
    yield CounterMetricFamily("kcoord_fetch_session_evictions", "Fetch sessions evicted to make room (Kafka: "
                              "IncrementalFetchSessionEvictionsPerSec)", value=cache.evictions)
    yield CounterMetricFamily("kcoord_fetch_session_incremental_fetches", "Incremental fetch requests served "
                              "from a session", value=cache.incremental_fetches)
