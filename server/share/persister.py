"""Where a share partition's state is read and written (Kafka's Persister, its
DefaultStatePersister): the share-partition manager (manager.py) calls `read`, `initialize`,
`write` and `delete` for a key (group, topic id, partition) and gets an error code (None: done).

- One node: the node's own share coordinator (coordinator.py) is the persister; every
  __share_group_state partition is its.
- A cluster node (`ClusterPersister`): the key's __share_group_state partition
  (abs(javaHashCode("group:topicId:partition")) % partitions) is looked up in the node's
  metadata cache; when this node leads it, its own share coordinator answers, else the
  partition's leader does, through InitializeShareGroupState / ReadShareGroupState /
  WriteShareGroupState / DeleteShareGroupState (v0) on the inter-broker listener. As Kafka's
  persister it retries NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
  COORDINATOR_LOAD_IN_PROGRESS and a node that cannot be reached, routed again from the
  metadata each time (the coordinator moves with its partition's leadership), with a backoff,
  until `retry_ms`; then it answers the last code. The topic is created through ZooKeeper at
  the first use, with `share.coordinator.state.topic.replication.factor` (the controller
  elects its leaders); COORDINATOR_NOT_AVAILABLE until then.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_records import StateBatch
from kcoord.protocol.topics import SHARE_STATE_TOPIC
from kcoord.server.share.state import Key, PersistedState, state_partition

log = logging.getLogger("kcoord.share.persister")

VERSION = 0
RETRIABLE = frozenset((ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS))
BACKOFF_MS = (50, 100, 200, 500, 1000)


class Persister(Protocol):
    async def read(self, key: Key, leader_epoch: int) -> tuple[ErrorCode | None, PersistedState | None]: ...

    async def initialize(self, key: Key, state_epoch: int, start_offset: int, leader_epoch: int) -> ErrorCode | None: ...

    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Iterable[StateBatch]) -> ErrorCode | None: ...

    async def delete(self, keys: Iterable[Key]) -> dict[Key, ErrorCode | None]: ...


def _code(value: int) -> ErrorCode | None:
    try:
        code = ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return None if code == ErrorCode.NONE else code


class ClusterPersister:
    def __init__(self, local: Any, node: Callable[[], Any], clients: Any, num_partitions: Callable[[], int],
                 create_topic: Callable[[], None], retry_ms: int = 30_000) -> None:
        """local: this node's ShareCoordinator; node(): the ClusterNode (its metadata cache,
        broker id, inter-broker endpoints), None before the node joined; clients: BrokerClients (one connection per node);
        num_partitions(): __share_group_state's partition count; create_topic(): creates it in
        the cluster (in the background) when it does not exist."""
        self.local = local
        self.node_of = node
        self.clients = clients
        self.num_partitions = num_partitions
        self.create_topic = create_topic
        self.retry_ms = retry_ms

    def coordinator_of(self, key: Key) -> int | None:
        """The node leading the key's __share_group_state partition (None: none now)."""
        node = self.node_of()
        if node is None:
            return None
        if node.topic(SHARE_STATE_TOPIC) is None:
            self.create_topic()
            return None
        p = state_partition(key[0], key[1], key[2], self.num_partitions())
        st = node.cache.state(SHARE_STATE_TOPIC, p)
        if st is None or st.leader < 0 or st.leader not in node.cache.live:
            return None
        return st.leader

    async def _retrying(self, key: Key, here: Callable[[], Awaitable[Any]],
                        remote: Callable[[int, tuple[str, int]], Awaitable[Any]],
                        code_of: Callable[[Any], ErrorCode | None]) -> Any:
        deadline = time.monotonic() + self.retry_ms / 1000
        attempt = 0
        while True:
            leader = self.coordinator_of(key)
            node = self.node_of()
            answer: Any = None
            if leader is None or node is None:
                code: ErrorCode | None = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif leader == node.broker_id:
                answer = await here()
                code = code_of(answer)
            else:
                endpoint = node.endpoints().get(leader)
                if endpoint is None:
                    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                else:
                    try:
                        answer = await remote(leader, endpoint)
                        code = code_of(answer)
                    except Exception as e:  # noqa: BLE001 - connection lost, timed out: routed again
                        log.info("Share state request to node %d failed: %s", leader, e)
                        code = ErrorCode.NETWORK_EXCEPTION
            if code not in RETRIABLE or time.monotonic() >= deadline:
                return answer if code is None or answer is not None else code
            await asyncio.sleep(BACKOFF_MS[min(attempt, len(BACKOFF_MS) - 1)] / 1000)
            attempt += 1

    # ---- the four calls

    async def read(self, key: Key, leader_epoch: int) -> tuple[ErrorCode | None, PersistedState | None]:
        from kcoord.protocol.share_state_messages import ReadShareGroupStateRequest as Req

        async def remote(leader: int, endpoint: tuple[str, int]) -> tuple[ErrorCode | None, PersistedState | None]:
            D = Req.ReadStateData
            r = await self.clients.request(leader, endpoint, Req(version=VERSION, group_id=key[0], topics=[D(
                topic_id=key[1], partitions=[D.PartitionData(partition=key[2], leader_epoch=leader_epoch)])]), VERSION)
            p = r.results[0].partitions[0]
            code = _code(p.error_code)
            if code is not None:
                return code, None
            if p.start_offset < 0 and p.state_epoch < 0:
                return None, None
            return None, PersistedState(0, p.state_epoch, leader_epoch, p.start_offset, tuple(
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches))

        out = await self._retrying(key, lambda: self.local.read(key, leader_epoch), remote, lambda a: a[0])
        return out if isinstance(out, tuple) else (out, None)

    async def initialize(self, key: Key, state_epoch: int, start_offset: int, leader_epoch: int) -> ErrorCode | None:
        from kcoord.protocol.share_state_messages import InitializeShareGroupStateRequest as Req

        async def remote(leader: int, endpoint: tuple[str, int]) -> ErrorCode | None:
            D = Req.InitializeStateData
            r = await self.clients.request(leader, endpoint, Req(version=VERSION, group_id=key[0], topics=[D(
                topic_id=key[1], partitions=[D.PartitionData(partition=key[2], state_epoch=state_epoch,
                                                             start_offset=start_offset)])]), VERSION)
            return _code(r.results[0].partitions[0].error_code)

        return await self._retrying(key, lambda: self.local.initialize(key, state_epoch, start_offset, leader_epoch),
                                    remote, lambda a: a)

    async def write(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Iterable[StateBatch]) -> ErrorCode | None:
        from kcoord.protocol.share_state_messages import WriteShareGroupStateRequest as Req

        batches = tuple(batches)

        async def remote(leader: int, endpoint: tuple[str, int]) -> ErrorCode | None:
            D = Req.WriteStateData
            P = D.PartitionData
            r = await self.clients.request(leader, endpoint, Req(version=VERSION, group_id=key[0], topics=[D(
                topic_id=key[1], partitions=[P(
                    partition=key[2], state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
                    state_batches=[P.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                                delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                   for b in batches])])]), VERSION)
            return _code(r.results[0].partitions[0].error_code)

        return await self._retrying(
            key, lambda: self.local.write(key, state_epoch, leader_epoch, start_offset, batches), remote, lambda a: a)

    async def delete(self, keys: Iterable[Key]) -> dict[Key, ErrorCode | None]:
        from kcoord.protocol.share_state_messages import DeleteShareGroupStateRequest as Req

        async def one(key: Key) -> ErrorCode | None:
            async def remote(leader: int, endpoint: tuple[str, int]) -> ErrorCode | None:
                D = Req.DeleteStateData
                r = await self.clients.request(leader, endpoint, Req(version=VERSION, group_id=key[0], topics=[D(
                    topic_id=key[1], partitions=[D.PartitionData(partition=key[2])])]), VERSION)
                return _code(r.results[0].partitions[0].error_code)

            async def here() -> ErrorCode | None:
                return (await self.local.delete([key]))[key]

            return await self._retrying(key, here, remote, lambda a: a)

        keys = list(keys)
        codes = await asyncio.gather(*(one(k) for k in keys))
        return dict(zip(keys, codes, strict=True))
