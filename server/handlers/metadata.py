"""Metadata v0-v12. On a cluster node (zookeeper.connect) the cluster's brokers, controller
and partition states answer (server/cluster/answers.py). Otherwise: this node is the only broker, the controller and every partition's
leader. Topics requested by name that do not exist are auto-created when both
auto.create.topics.enable and the request allow it (answered LEADER_NOT_AVAILABLE the first
time, as Kafka does while the new topic's leaders are being elected); not while a deletion of
that name is being finished (UNKNOWN_TOPIC_OR_PARTITION: the client asks again). From v12
topics can be asked for by id instead (unknown ids: UNKNOWN_TOPIC_ID; INVALID_REQUEST before
v12, as Kafka)."""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from kafka.protocol.metadata import MetadataResponse

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.context import RequestContext
from kcoord.server.topics import Topic, validate_topic_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from kcoord.server.config import Config
    from kcoord.server.topics import TopicRegistry

TopicOut = MetadataResponse.MetadataResponseTopic
PartitionOut = TopicOut.MetadataResponsePartition
BrokerOut = MetadataResponse.MetadataResponseBroker
ZERO_UUID = uuid.UUID(int=0)


def _topic_entry(topic: Topic, node: int, listener_error: ErrorCode = ErrorCode.NONE) -> Any:
    """`listener_error`: the request came in on a listener this node does not advertise, so
    its clients cannot reach the leader (Kafka: LISTENER_NOT_FOUND from v6, else
    LEADER_NOT_AVAILABLE, leader -1)."""
    ok = listener_error == ErrorCode.NONE
    return TopicOut(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=[
            PartitionOut(
                error_code=listener_error,
                partition_index=p,
                leader_id=node if ok else -1,
                leader_epoch=0,
                replica_nodes=[node],
                isr_nodes=[node],
                offline_replicas=[],
            )
            for p in range(topic.partitions)
        ],
    )


def _cluster_entry(ctx: RequestContext, node: Any, topic: Any, version: int) -> Any:
    """A topic of a cluster (zookeeper.connect): its partitions as the cluster's metadata has
    them (server/cluster/answers.py)."""
    from kcoord.server.cluster import answers

    rows = answers.partitions(node, topic, answers.listener_name(ctx), version)
    return TopicOut(error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id,
                    is_internal=answers.is_internal(topic.name),
                    partitions=[PartitionOut(error_code=r.error, partition_index=r.partition, leader_id=r.leader,
                                             leader_epoch=r.leader_epoch, replica_nodes=r.replicas, isr_nodes=r.isr,
                                             offline_replicas=r.offline) for r in rows])


def _cluster_metadata(ctx: RequestContext, req: Any, version: int, node: Any, config: Config,
                      local_cluster_id: str) -> Any:
    """Metadata on a cluster node: every live broker, the controller, the cluster's topics;
    an auto-created topic is written to ZooKeeper (the controller elects its leaders)."""
    from kcoord.server.cluster import answers

    all_topics = req.topics is None or (version == 0 and not req.topics)
    allow_auto = config["auto.create.topics.enable"] and (version < 4 or req.allow_auto_topic_creation)
    entries = []
    by_id = not all_topics and version >= 10 and any(t.name is None or _named_id(t) for t in req.topics)
    if by_id and version < 12:
        entries = [_error_entry(t.name or "", ErrorCode.INVALID_REQUEST, t.topic_id) for t in req.topics]
    elif by_id:
        for topic_id in dict.fromkeys(t.topic_id for t in req.topics if _named_id(t)):
            topic = node.cache.by_id(topic_id)
            entries.append(_error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id) if topic is None
                           else _cluster_entry(ctx, node, topic, version))
    elif all_topics:
        entries = [_cluster_entry(ctx, node, t, version) for t in node.topics()]
    else:
        for wanted in req.topics:
            topic = node.topic(wanted.name)
            if topic is not None:
                entries.append(_cluster_entry(ctx, node, topic, version))
                continue
            try:
                validate_topic_name(wanted.name)
            except KafkaError:
                entries.append(_error_entry(wanted.name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                continue
            rf = config["default.replication.factor"]
            if not allow_auto or wanted.name in node.cache.deleting:
                entries.append(_error_entry(wanted.name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            elif wanted.name in node.settings.internal_topics:  # with its own settings, as Kafka's creatableTopic
                if node.settings.internal_topics[wanted.name][1] > len(node.cache.live):
                    entries.append(_error_entry(wanted.name, ErrorCode.INVALID_REPLICATION_FACTOR))
                else:
                    node.create_internal_topic_soon(wanted.name)
                    entries.append(_error_entry(wanted.name, ErrorCode.LEADER_NOT_AVAILABLE))
            elif rf > len(node.cache.live):
                entries.append(_error_entry(wanted.name, ErrorCode.INVALID_REPLICATION_FACTOR))
            else:
                node.create_topic_soon(wanted.name, config["num.partitions"], rf)
                entries.append(_error_entry(wanted.name, ErrorCode.LEADER_NOT_AVAILABLE))
    return MetadataResponse(
        version=version, throttle_time_ms=0,
        brokers=[BrokerOut(node_id=b, host=h, port=p, rack=r)
                 for b, h, p, r in answers.brokers(node, answers.listener_name(ctx))],
        cluster_id=node.cluster_id or local_cluster_id, controller_id=node.controller_id, topics=entries)


def _error_entry(name: str | None, code: ErrorCode, topic_id: uuid.UUID = ZERO_UUID) -> Any:
    return TopicOut(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[])


def _named_id(wanted: Any) -> bool:
    return wanted.topic_id is not None and wanted.topic_id != ZERO_UUID


class MetadataApi:
    """Metadata's handler, built by the composition root (server/node.py) with the node's
    configuration and cluster id, the topic registry and `create_topic` (auto-creation)."""

    def __init__(self, config: Config, cluster_id: str, topics: TopicRegistry,
                 create_topic: Callable[..., Topic], cluster: Callable[[], Any]) -> None:
        self.config = config
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None (server/cluster/)
        self.cluster_id = cluster_id
        self.topics = topics
        self.create_topic = create_topic

    def handle_metadata(self, ctx: RequestContext, req: Any, version: int) -> Any:
        cluster = self.cluster()
        if cluster is not None:
            return _cluster_metadata(ctx, req, version, cluster, self.config, self.cluster_id)
        node = self.config.node_id
        endpoint = ctx.advertised_on(self.config)  # the listener the client came in on
        listener_error = ErrorCode.NONE
        if endpoint is None:
            listener_error = ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
        # v0: an empty list means all topics; v1+: null means all topics.
        all_topics = req.topics is None or (version == 0 and not req.topics)
        allow_auto = self.config["auto.create.topics.enable"] and (
            version < 4 or req.allow_auto_topic_creation
        )
        entries = []
        # (the codec decodes the zero uuid, "no id", as None)
        by_id = not all_topics and version >= 10 and any(t.name is None or _named_id(t) for t in req.topics)
        if by_id and version < 12:
            # Kafka: topic ids (or null names) only from v12 on; the request fails as a whole
            entries = [_error_entry(t.name or "", ErrorCode.INVALID_REQUEST, t.topic_id) for t in req.topics]
        elif by_id:
            # by topic id (Java 4.x's consumer with a SubscriptionPattern): as Kafka, once one
            # entry names an id, the names are ignored (Java sends "", the field's default)
            for topic_id in dict.fromkeys(t.topic_id for t in req.topics if _named_id(t)):
                topic = self.topics.by_id.get(topic_id)
                entries.append(_error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id) if topic is None
                               else _topic_entry(topic, node, listener_error))
        elif all_topics:
            entries = [_topic_entry(t, node, listener_error) for t in self.topics.topics.values()]
        else:
            for wanted in req.topics:
                name = wanted.name
                topic = self.topics.get(name)
                if topic is not None:
                    entries.append(_topic_entry(topic, node, listener_error))
                    continue
                try:
                    validate_topic_name(name)
                except KafkaError:
                    entries.append(_error_entry(name, ErrorCode.INVALID_TOPIC_EXCEPTION))
                    continue
                if allow_auto and self.topics.colliding(name) is None and not self.topics.is_deleting(name):
                    self.create_topic(name, self.config["num.partitions"], {})
                    entries.append(_error_entry(name, ErrorCode.LEADER_NOT_AVAILABLE))
                else:
                    entries.append(_error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return MetadataResponse(
            version=version,
            throttle_time_ms=0,
            brokers=[] if endpoint is None else [BrokerOut(node_id=node, host=endpoint[0], port=endpoint[1], rack=None)],
            cluster_id=self.cluster_id,
            controller_id=node,
            topics=entries,
        )
