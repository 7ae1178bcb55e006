"""DescribeTopicPartitions v0 (KIP-966; what the Java AdminClient's describeTopics sends first):
topics in name order from the cursor on, at most response_partition_limit partitions (and at
most 2,000, max.request.partition.size.limit) per response, and a next cursor where it stopped.
On a cluster node (zookeeper.connect) the cluster's partition states answer; otherwise this node
leads every partition at leader epoch 0 with itself as the only replica."""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import DescribeTopicPartitionsResponse

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.context import RequestContext
from kcoord.server.topics import validate_topic_name

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.topics import TopicRegistry

TopicOut = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
PartitionOut = TopicOut.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor
ZERO_UUID = uuid.UUID(int=0)
MAX_PARTITIONS = 2000  # max.request.partition.size.limit
INTERNAL = ("__consumer_offsets", "__transaction_state", "__share_group_state")
# AclOperation codes of a TOPIC (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
# ALTER_CONFIGS) as a bit field: every one is allowed without an authorizer.
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def _error_response(req: Any, code: ErrorCode) -> Any:
    """DescribeTopicPartitionsRequest.getErrorResponse: every requested topic with the error."""
    return DescribeTopicPartitionsResponse(version=0, throttle_time_ms=0, next_cursor=None, topics=[
        TopicOut(error_code=code, name=t.name, topic_id=ZERO_UUID, is_internal=False, partitions=[],
                 topic_authorized_operations=-2**31) for t in req.topics])


class DescribeTopicPartitionsApi:
    """The handlers of describe_topic_partitions.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, topics: TopicRegistry, config: Config, cluster: Callable[[], Any]) -> None:
        self.topics = topics
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None (server/cluster/)
        self.config = config

    def handle_describe_topic_partitions(self, ctx: RequestContext, req: Any, version: int) -> Any:
        node = self.config.node_id
        cluster = self.cluster()  # a cluster node: the cluster's topics and partition states
        topics: Any = self.topics
        if cluster is not None:
            from kcoord.server.cluster import answers

            topics = answers.TopicsView(cluster)
        cursor = req.cursor
        start_name = cursor.topic_name if cursor is not None else ""
        fetch_all = not req.topics
        if fetch_all:
            names = {n for n in topics.topics if n >= start_name}
        else:
            names = {t.name for t in req.topics if t.name >= start_name}
            if cursor is not None and cursor.topic_name not in names:
                return _error_response(req, ErrorCode.INVALID_REQUEST)
        if cursor is not None and cursor.partition_index < 0:
            return _error_response(req, ErrorCode.INVALID_REQUEST)
        remaining = max(min(MAX_PARTITIONS, req.response_partition_limit), 1)
        out, next_cursor = [], None
        for name in sorted(names):
            if remaining == 0:  # the next response starts with this topic
                next_cursor = Cursor(topic_name=name, partition_index=0)
                break
            topic = topics.get(name)
            if topic is None:
                if not fetch_all:
                    try:
                        validate_topic_name(name)
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    except KafkaError:
                        code = ErrorCode.INVALID_TOPIC_EXCEPTION
                    out.append(TopicOut(error_code=code, name=name, topic_id=ZERO_UUID, is_internal=name in INTERNAL,
                                        partitions=[], topic_authorized_operations=TOPIC_OPERATIONS))
                continue
            first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            upper = min(topic.partitions, first + remaining)
            if cluster is not None:
                rows = answers.partitions(cluster, cluster.topic(name), answers.listener_name(ctx), version=12)
                parts = [PartitionOut(error_code=r.error, partition_index=r.partition, leader_id=r.leader,
                                      leader_epoch=r.leader_epoch, replica_nodes=r.replicas, isr_nodes=r.isr,
                                      eligible_leader_replicas=[], last_known_elr=[], offline_replicas=r.offline)
                         for r in rows[first:upper]]
            else:
                parts = [PartitionOut(error_code=ErrorCode.NONE, partition_index=p, leader_id=node, leader_epoch=0,
                                      replica_nodes=[node], isr_nodes=[node], eligible_leader_replicas=[],
                                      last_known_elr=[], offline_replicas=[])
                         for p in range(first, upper)]
            out.append(TopicOut(error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                                is_internal=name in INTERNAL, partitions=parts,
                                topic_authorized_operations=TOPIC_OPERATIONS))
            if upper < topic.partitions:
                next_cursor = Cursor(topic_name=name, partition_index=upper)
                break
            remaining -= len(parts)
        return DescribeTopicPartitionsResponse(version=version, throttle_time_ms=0, topics=out, next_cursor=next_cursor)
