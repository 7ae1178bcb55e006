"""What Metadata, DescribeCluster and FindCoordinator answer on a cluster node, from its
metadata cache (the handlers call these only when `broker.cluster` is set): every live broker
with its rack on the request's listener, each partition's leader, epoch, replicas, ISR and
offline replicas, as a ZooKeeper-mode Kafka broker's metadata cache answers."""
from __future__ import annotations

from typing import Any, NamedTuple

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from kcoord.server.cluster.node import ClusterNode
from kcoord.server.cluster.znodes import TopicAssignment


class PartitionAnswer(NamedTuple):
    error: ErrorCode
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


def listener_name(ctx: Any) -> str | None:
    session = ctx.session
    listener = getattr(session, "listener", None) if session is not None else None
    return getattr(listener, "name", None)


def brokers(node: ClusterNode, listener: str | None) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of every live broker that has an endpoint on the listener."""
    out = []
    for b in node.brokers:
        ep = b.endpoint(listener) if listener is not None else b.endpoint(None)
        if ep is not None:
            out.append((b.broker_id, ep[0], ep[1], b.rack))
    return out


def is_internal(name: str) -> bool:
    return name in (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC)


def partitions(node: ClusterNode, topic: TopicAssignment, listener: str | None, version: int) -> list[PartitionAnswer]:
    reachable = {b[0] for b in brokers(node, listener)}
    live = node.cache.live
    out = []
    for p, replicas in topic.replicas.items():
        st = node.cache.state(topic.name, p)
        offline = [r for r in replicas if r not in live]
        shown = [r for r in replicas if r in live] if version == 0 else list(replicas)
        if st is None:
            out.append(PartitionAnswer(ErrorCode.LEADER_NOT_AVAILABLE, p, -1, -1, shown, [], offline))
            continue
        leader = st.leader if st.leader in live else -1
        error = ErrorCode.NONE
        if leader == -1:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        elif leader not in reachable:  # alive, but not on the listener the client used
            error = ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
            leader = -1
        elif version == 0 and offline:
            error = ErrorCode.REPLICA_NOT_AVAILABLE
        isr = [r for r in st.isr if r in live] if version == 0 else list(st.isr)
        out.append(PartitionAnswer(error, p, leader, st.leader_epoch, shown, isr, offline))
    return out


def as_topic(topic: TopicAssignment | None) -> Any:
    """The cluster's topic as a registry Topic (what the admin handlers resolve names to)."""
    from kcoord.server.topics import Topic

    return None if topic is None else Topic(topic.name, topic.topic_id, topic.partitions, {}, is_internal(topic.name))


class TopicsView:
    """The cluster's topics where a handler reads the node's registry (.topics, .get)."""

    def __init__(self, node: ClusterNode) -> None:
        self.node = node

    @property
    def topics(self) -> dict[str, Any]:
        return {t.name: as_topic(t) for t in self.node.topics()}

    def get(self, name: str) -> Any:
        return as_topic(self.node.topic(name))


def coordinator(node: ClusterNode, topic: str, partition: int, listener: str | None) -> tuple[int, str, int] | None:
    """The leader of a coordinator topic's partition and its endpoint; None when it has none
    (COORDINATOR_NOT_AVAILABLE)."""
    st = node.cache.state(topic, partition)
    if st is None or st.leader not in node.cache.brokers:
        return None
    ep = node.cache.brokers[st.leader].endpoint(listener)
    return None if ep is None else (st.leader, ep[0], ep[1])
