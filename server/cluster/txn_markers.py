"""A cluster node's transaction marker channel (Kafka's TransactionMarkerChannelManager): the
markers of one prepared transaction go to the leader of each of its partitions, wherever it is.

Each attempt routes the partitions by the node's metadata cache (kept current by ZooKeeper
watches, server/cluster/metadata_cache.py): those this node leads are written directly
(`write_here`, the WriteTxnMarkers handler's own path), the others are grouped per leading
node, one WriteTxnMarkers request per node (v1, on the inter-broker listener, through
server/cluster/broker_clients.py: one connection per node). The answer is an error per
partition; the marker writer (server/txn/markers.py) decides by Kafka's table which answers are
retried, which drop the transaction's markers (TRANSACTION_COORDINATOR_FENCED) and which are
fatal (server/txn/marker_outcomes.py); it retries the partitions that failed retriably
(NOT_LEADER_OR_FOLLOWER, a node that cannot be reached, a partition without a leader) after its
backoff, routed again from the metadata as it is then, so a marker follows its partition's
leader as it moves. A partition the metadata no longer has (its topic deleted) is skipped, as
Kafka skips it; a node answering UNKNOWN_TOPIC_OR_PARTITION (it has not learnt the partition
yet) is asked again, as Kafka retries it.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from kcoord.protocol.errors import ErrorCode
from kcoord.server.cluster.broker_clients import BrokerClients, BrokerConnectionError
from kcoord.server.deferred import Deferred, wait
from kcoord.server.txn.result import MarkerJob

log = logging.getLogger("kcoord.txn.markers")

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS_VERSION = 1
NO_LEADER = -1
# leader_of(topic, partition): the leading node, NO_LEADER while there is none, None when the
# partition does not exist in the cluster
LeaderOf = Callable[[str, int], int | None]
WriteHere = Callable[[int, int, bool, Iterable[TopicPartition], int], Mapping[TopicPartition, Deferred[ErrorCode | None]]]


class Routes(NamedTuple):
    here: list[TopicPartition]  # led by this node
    by_node: dict[int, list[TopicPartition]]  # led by another node, grouped per node
    unroutable: dict[TopicPartition, ErrorCode]  # no leader now (retried), or gone (skipped)


def route(partitions: Iterable[TopicPartition], leader_of: LeaderOf, me: int) -> Routes:
    here: list[TopicPartition] = []
    by_node: dict[int, list[TopicPartition]] = {}
    unroutable: dict[TopicPartition, ErrorCode] = {}
    for tp in sorted(partitions):
        leader = leader_of(*tp)
        if leader is None:
            unroutable[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif leader == NO_LEADER:
            unroutable[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif leader == me:
            here.append(tp)
        else:
            by_node.setdefault(leader, []).append(tp)
    return Routes(here, by_node, unroutable)


class MarkerChannel:
    def __init__(self, broker_id: int, leader_of: LeaderOf, endpoint_of: Callable[[int], tuple[str, int] | None],
                 write_here: WriteHere, timeout_s: float = 30.0) -> None:
        self.broker_id = broker_id
        self.leader_of = leader_of
        self.endpoint_of = endpoint_of  # a live node's inter-broker endpoint, None when it is gone
        self.write_here = write_here
        self.timeout_s = timeout_s
        self.clients = BrokerClients(f"kcoord-txn-markers-{broker_id}", timeout_s)

    @classmethod
    def of_node(cls, node: Any, write_here: WriteHere, timeout_s: float = 30.0) -> MarkerChannel:
        """The channel of a ClusterNode (server/cluster/node.py): its metadata cache's leaders
        (a leader that is not registered counts as none) and inter-broker endpoints."""

        def leader_of(topic: str, partition: int) -> int | None:
            t = node.topic(topic)
            if t is None or partition not in t.replicas:
                return None
            st = node.cache.state(topic, partition)
            return st.leader if st is not None and st.leader in node.cache.live else NO_LEADER

        return cls(node.broker_id, leader_of, lambda b: node.endpoints().get(b), write_here, timeout_s)

    async def write(self, job: MarkerJob) -> dict[TopicPartition, ErrorCode | None]:
        """One attempt at every marker of `job`: the error of each partition (None: written)."""
        routes = route(job.partitions, self.leader_of, self.broker_id)
        out: dict[TopicPartition, ErrorCode | None] = {}
        for tp, code in routes.unroutable.items():
            if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:  # gone from the cluster: skipped, as Kafka does
                log.info("Not writing a marker of %s to %s-%d: the partition no longer exists",
                         job.transactional_id, *tp)
                out[tp] = None
            else:
                out[tp] = code
        sends = [self._send(node, job, tps) for node, tps in routes.by_node.items()]
        written_here = self.write_here(job.producer_id, job.producer_epoch, job.commit, routes.here,
                                       job.coordinator_epoch) if routes.here else {}
        for result in await asyncio.gather(*sends):
            out.update(result)
        for tp, d in written_here.items():
            out[tp] = await wait(d)
        return out

    async def _send(self, node: int, job: MarkerJob, tps: list[TopicPartition]) -> dict[TopicPartition, ErrorCode | None]:
        from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

        endpoint = self.endpoint_of(node)
        if endpoint is None:  # gone since the cache named it: the next attempt routes again
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        Marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(version=WRITE_TXN_MARKERS_VERSION, markers=[Marker(
            producer_id=job.producer_id, producer_epoch=job.producer_epoch, transaction_result=job.commit,
            topics=[Marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
            coordinator_epoch=job.coordinator_epoch)])
        try:
            response = await self.clients.request(node, endpoint, request, WRITE_TXN_MARKERS_VERSION)
        except BrokerConnectionError as e:
            log.info("WriteTxnMarkers to node %d (%s:%d) failed: %s", node, *endpoint, e)
            return dict.fromkeys(tps, ErrorCode.NETWORK_EXCEPTION)
        out: dict[TopicPartition, ErrorCode | None] = dict.fromkeys(tps, ErrorCode.UNKNOWN_SERVER_ERROR)
        for marker in response.markers:
            for t in marker.topics:
                for p in t.partitions:
                    if (t.name, p.partition_index) in out:
                        code = ErrorCode(p.error_code)
                        out[(t.name, p.partition_index)] = None if code == ErrorCode.NONE else code
        return out

    def close(self) -> None:
        self.clients.close()
