"""Followers copying their leaders (Kafka's ReplicaFetcherManager / ReplicaFetcherThread /
AbstractFetcherThread), one asyncio task per source broker.

A partition joins its leader's fetcher needing truncation. The fetcher first asks the leader
where our latest leader epoch ends (OffsetsForLeaderEpoch v4, replica_id = our broker id) and
cuts our log there (partition.truncation_point, KIP-101/279: repeated while the answer names an
epoch we never had), so a replica never keeps records the leader does not have. Then it sends
Fetch v12 (topic names; replica_id = our broker id) for every partition at its log end offset,
appends the batches as they come (offsets, epochs and timestamps kept), takes the leader's
high watermark (capped at our log end) and fetches again. The leader learns our log end offset
from each fetch offset. Fetches go in an incremental fetch session (KIP-227, Kafka's
FetchSessionHandler): the first names every partition and opens a session on the leader; the
next ones name only the partitions whose fetch offset, leader epoch or log start moved (and
forget the ones no longer fetched), and the leader answers only partitions with news, so a
round costs the same for 3 or 300 followed partitions. A session error, a failed request or a
leader that answers without a session starts over with a full fetch. Errors: OFFSET_OUT_OF_RANGE truncates again (or, behind the leader's log
start, starts over there); NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
wait replica.fetch.backoff.ms (the controller's next state moves the partition); a lost
connection is retried after the same backoff; a leader's host name is resolved off the loop
(client.py `resolve`) so stopping never waits for a slow resolver, and one that does not
resolve is one WARNING per leader until it does.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kafka.protocol.consumer import FetchRequest, OffsetForLeaderEpochRequest

from kcoord.protocol.errors import ErrorCode
from kcoord.server.replication.client import BrokerClient, BrokerConnectionError, BrokerResolutionError
from kcoord.server.replication.partition import truncation_point
from kcoord.storage.batch import CorruptBatchError
from kcoord.storage.leader_epoch import UNDEFINED_EPOCH

if TYPE_CHECKING:
    from kcoord.server.replication.replica_manager import ReplicaManager, TopicPartition

log = logging.getLogger("kcoord.replication.fetcher")

FETCH_VERSION = 12  # topic names (v13+ use topic ids, which are per node until the cluster's)
EPOCH_VERSION = 4
MAX_TRUNCATION_ROUNDS = 64
_FetchTopic = FetchRequest.FetchTopic
_FetchPartition = _FetchTopic.FetchPartition
_ForgottenTopic = FetchRequest.ForgottenTopic
_SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                   ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
INT32_MAX = 2**31 - 1
_EpochTopic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
_EpochPartition = _EpochTopic.OffsetForLeaderPartition


class FetchSessionHandler:
    """The follower's half of an incremental fetch session (Kafka's FetchSessionHandler): what
    the leader's session holds of each partition (fetch offset, current leader epoch, log start
    offset) and the (session id, epoch) the next request carries. Epoch 0 is a full fetch; with
    a session id it also closes that session on the leader."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = 0
        self.held: dict[TopicPartition, tuple[int, int, int]] = {}

    def build(self, want: dict[TopicPartition, tuple[int, int, int]]) -> tuple[dict, list[TopicPartition]]:
        """(partitions to name in the request, partitions to forget) for fetching `want`."""
        if self.epoch == 0:
            return dict(want), []
        changed = {k: v for k, v in want.items() if self.held.get(k) != v}
        return changed, [k for k in self.held if k not in want]

    def answered(self, session_id: int, sent: dict, forgotten: list[TopicPartition]) -> None:
        """The leader answered the request built from `sent` / `forgotten` without an error."""
        if session_id == 0:  # no session (the cache had no room, or it closed an empty one)
            self.reset(close=False)
            return
        if self.epoch == 0:
            self.session_id, self.held = session_id, dict(sent)
        else:
            self.held.update(sent)
            for k in forgotten:
                self.held.pop(k, None)
        self.epoch = 1 if self.epoch == INT32_MAX else self.epoch + 1

    def reset(self, close: bool = True) -> None:
        """The next request is a full fetch; `close`: it also closes the session it had."""
        if not close:
            self.session_id = 0
        self.epoch = 0
        self.held = {}


@dataclass(eq=False, slots=True)
class _FetchState:
    truncating: bool = True
    rounds: int = 0
    delayed_until: float = 0.0


class FetcherManager:
    def __init__(self, manager: ReplicaManager) -> None:
        self.manager = manager
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._where: dict[TopicPartition, int] = {}
        self._stopped = False  # stop_all began: a leadership change meanwhile starts no fetcher

    def has(self, key: TopicPartition) -> bool:
        return key in self._where

    def add(self, key: TopicPartition, leader: int) -> None:
        """Fetch `key` from `leader`, truncating first (also after a leader change)."""
        self.remove(key)
        if self._stopped:
            return
        f = self.fetchers.get(leader)
        if f is None:
            f = self.fetchers[leader] = ReplicaFetcher(leader, self.manager)
        f.partitions[key] = _FetchState()
        self._where[key] = leader
        f.wake()

    def remove(self, key: TopicPartition) -> None:
        leader = self._where.pop(key, None)
        if leader is not None:
            f = self.fetchers.get(leader)
            if f is not None:
                f.partitions.pop(key, None)

    async def stop_all(self) -> None:
        # Each stop awaits: a leadership change applied meanwhile (a topic the cluster created
        # as the node shut down) must neither start a fetcher nor change the dict under us
        self._stopped = True
        for f in list(self.fetchers.values()):
            await f.stop()
        self.fetchers.clear()
        self._where.clear()


class ReplicaFetcher:
    """Fetches every partition led by one source broker."""

    def __init__(self, source: int, manager: ReplicaManager) -> None:
        self.source = source
        self.manager = manager
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self._wake = asyncio.Event()
        self._client: BrokerClient | None = None
        self._endpoint: tuple[str, int] | None = None
        # stop() sets it: the loop ends at its next turn even if the cancellation was swallowed
        # (Python 3.11's wait_for returns a result that completes in the turn it is cancelled)
        self._stopped = False
        self._unresolved = False  # the leader's name did not resolve: warned once, until it does
        self.session = FetchSessionHandler()
        self._task = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
            pass
        if self._client is not None:
            self._client.close()

    def _connection(self) -> BrokerClient | None:
        endpoint = self.manager.endpoints.get(self.source)
        if endpoint is None:
            return None
        if self._client is None or endpoint != self._endpoint:
            if self._client is not None:
                self._client.close()
            settings = self.manager.settings
            self._client = BrokerClient(endpoint[0], endpoint[1], f"replica-fetcher-{self.manager.broker_id}",
                                        settings.replica_socket_timeout_ms / 1000.0)
            self._endpoint = endpoint
            self.session.reset(close=False)  # another leader process: its sessions are not ours
        return self._client

    @property
    def _backoff(self) -> float:
        return self.manager.settings.replica_fetch_backoff_ms / 1000.0

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopped:
            if not self.partitions:
                self._wake.clear()
                await self._wake.wait()
                continue
            client = self._connection()
            if client is None:
                await self._sleep(self._backoff)
                continue
            try:
                now = loop.time()
                if self._unresolved and client.connected:
                    self._unresolved = False
                ready = {k: s for k, s in self.partitions.items() if s.delayed_until <= now}
                truncating = {k: s for k, s in ready.items() if s.truncating}
                if truncating:
                    await self._truncate(client, truncating)
                fetching = {k: s for k, s in ready.items() if not s.truncating and self.partitions.get(k) is s}
                if fetching:
                    await self._fetch(client, fetching)
                elif not truncating:
                    await self._sleep(min(s.delayed_until for s in self.partitions.values()) - loop.time())
            except BrokerResolutionError as e:
                if not self._unresolved:  # one line per leader, not one per retry
                    log.warning("Fetching from broker %d: %s (retrying every %g s)", self.source, e,
                                self._backoff)
                self._unresolved = True
                await self._sleep(self._backoff)
            except BrokerConnectionError as e:
                self._unresolved = False
                log.info("Fetching from broker %d: %s", self.source, e)
                await self._sleep(self._backoff)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the fetcher keeps going
                log.exception("Replica fetcher for broker %d failed; retrying", self.source)
                await self._sleep(self._backoff)

    async def _sleep(self, seconds: float) -> None:
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), max(seconds, 0.0))
        except TimeoutError:
            pass

    def _delay(self, state: _FetchState) -> None:
        state.delayed_until = asyncio.get_running_loop().time() + self._backoff

    # ------------------------------------------------------------------ truncation

    async def _truncate(self, client: BrokerClient, parts: dict[TopicPartition, _FetchState]) -> None:
        requested: dict[TopicPartition, int] = {}
        by_topic: dict[str, list] = {}
        for key, state in parts.items():
            r = self.manager.get(*key)
            if r is None:
                continue
            epoch = r.cache.latest_epoch
            if epoch == UNDEFINED_EPOCH:  # nothing written in any epoch: nothing to cut
                self._truncated(key, state, r, r.log_end_offset)
                continue
            requested[key] = epoch
            by_topic.setdefault(key[0], []).append(_EpochPartition(
                partition=key[1], current_leader_epoch=r.leader_epoch, leader_epoch=epoch))
        if not by_topic:
            return
        req = OffsetForLeaderEpochRequest(replica_id=self.manager.broker_id, topics=[
            _EpochTopic(topic=t, partitions=ps) for t, ps in by_topic.items()])
        resp = await client.request(req, EPOCH_VERSION)
        for t in resp.topics:
            for p in t.partitions:
                key = (t.topic, p.partition)
                state = self.partitions.get(key)
                r = self.manager.get(*key)
                if state is None or state is not parts.get(key) or r is None or key not in requested:
                    continue  # moved meanwhile
                if p.error_code != ErrorCode.NONE:
                    log.info("OffsetsForLeaderEpoch of %s-%d from broker %d: %s", key[0], key[1], self.source,
                             ErrorCode(p.error_code).name)
                    self._delay(state)
                    continue
                offset, done = truncation_point(r.cache, r.log_end_offset, r.hw, requested[key],
                                                p.leader_epoch, p.end_offset)
                state.rounds += 1
                if not done and state.rounds < MAX_TRUNCATION_ROUNDS:
                    self._cut(key, r, offset)
                    continue
                self._truncated(key, state, r, offset)

    def _cut(self, key: TopicPartition, r, offset: int) -> None:
        if offset < r.log_end_offset:
            log.info("Truncating %s-%d from %d to %d (leader %d)", key[0], key[1], r.log_end_offset, offset,
                     self.source)
            r.plog.truncate_to(offset)
            self.manager.hooks.truncated(*key)
        r.truncated(r.log_end_offset)

    def _truncated(self, key: TopicPartition, state: _FetchState, r, offset: int) -> None:
        self._cut(key, r, offset)
        state.truncating = False
        state.rounds = 0

    # ------------------------------------------------------------------ fetching

    async def _fetch(self, client: BrokerClient, parts: dict[TopicPartition, _FetchState]) -> None:
        s = self.manager.settings
        want: dict[TopicPartition, tuple[int, int, int]] = {}
        for key in parts:
            r = self.manager.get(*key)
            if r is not None:
                want[key] = (r.log_end_offset, r.leader_epoch, r.plog.log_start_offset)
        if not want:
            return
        session = self.session
        sent, forgotten = session.build(want)
        by_topic: dict[str, list] = {}
        for (topic, index), (offset, epoch, log_start) in sent.items():
            by_topic.setdefault(topic, []).append(_FetchPartition(
                partition=index, current_leader_epoch=epoch, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=log_start, partition_max_bytes=s.replica_fetch_max_bytes))
        gone: dict[str, list[int]] = {}
        for topic, index in forgotten:
            gone.setdefault(topic, []).append(index)
        req = FetchRequest(
            replica_id=self.manager.broker_id, max_wait_ms=s.replica_fetch_wait_max_ms,
            min_bytes=s.replica_fetch_min_bytes, max_bytes=s.replica_fetch_response_max_bytes,
            isolation_level=0, session_id=session.session_id, session_epoch=session.epoch,
            topics=[_FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            forgotten_topics_data=[_ForgottenTopic(topic=t, partitions=ps) for t, ps in gone.items()], rack_id="")
        try:
            resp = await client.request(req, FETCH_VERSION)
        except BaseException:
            session.reset()  # the leader may have moved the session on: start over with a full fetch
            raise
        if resp.error_code:
            if resp.error_code in _SESSION_ERRORS:
                log.info("Fetch session %d with broker %d: %s; fetching in full", session.session_id, self.source,
                         ErrorCode(resp.error_code).name)
                session.reset(close=resp.error_code != ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
                return
            log.info("Fetch from broker %d: %s", self.source, ErrorCode(resp.error_code).name)
            session.reset()
            for state in parts.values():
                self._delay(state)
            return
        session.answered(resp.session_id, sent, forgotten)
        for t in resp.responses:
            for p in t.partitions:
                key = (t.topic, p.partition_index)
                state = self.partitions.get(key)
                r = self.manager.get(*key)
                if state is None or state is not parts.get(key) or r is None or r.is_leader:
                    continue  # moved meanwhile: the answer is stale
                if key not in want or r.log_end_offset != want[key][0]:
                    continue
                self._handle_partition(key, state, r, p)

    def _handle_partition(self, key: TopicPartition, state: _FetchState, r, p) -> None:
        code = p.error_code
        if code == ErrorCode.NONE:
            records = p.records
            if records:
                try:
                    headers = r.plog.append_as_follower(records)
                except CorruptBatchError as e:
                    log.error("Replicated batches of %s-%d from broker %d rejected: %s", key[0], key[1],
                              self.source, e)
                    self._delay(state)
                    return
                for h in headers:
                    r.cache.assign(h.partition_leader_epoch, h.base_offset)
                self.manager.hooks.replicated(key[0], key[1], r.plog, headers, headers[0].base_offset)
            if p.log_start_offset > r.plog.log_start_offset:
                r.plog.restore_log_start_offset(p.log_start_offset)
            r.follower_high_watermark(p.high_watermark)
            if records:
                self.manager.hooks.woken(*key)
            return
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if p.log_start_offset > r.log_end_offset:
                log.info("%s-%d is behind the leader's log start %d: starting over there", key[0], key[1],
                         p.log_start_offset)
                r.plog.truncate_fully_and_start_at(p.log_start_offset)
                r.cache.clear()
                r.truncated(p.log_start_offset)
                self.manager.hooks.truncated(*key)
            else:
                state.truncating = True
            return
        log.info("Fetch of %s-%d from broker %d: %s", key[0], key[1], self.source, ErrorCode(code).name)
        self._delay(state)
