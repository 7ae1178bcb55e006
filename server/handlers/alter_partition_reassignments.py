"""AlterPartitionReassignments v0, as the only broker: the one valid target of a partition is
this node alone, which is where it already is (nothing to do); any other broker id is not
registered (INVALID_REPLICA_ASSIGNMENT, Kafka's wording); cancelling finds nothing in progress."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import AlterPartitionReassignmentsResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.topics import TopicRegistry

TopicOut = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionOut = TopicOut.ReassignablePartitionResponse


def _outcome(node: int, partitions: int | None, topic: str, p: Any) -> tuple[ErrorCode, str | None]:
    """ReplicationControlManager.alterPartitionReassignment for one partition."""
    if partitions is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    if not 0 <= p.partition_index < partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{p.partition_index}."
    if p.replicas is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."
    if not p.replicas:
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.")
    previous = None
    for b in sorted(p.replicas):
        if b != node:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {b}, but no such broker is registered.")
        if b == previous:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {b} more than once.")
        previous = b
    return ErrorCode.NONE, None  # [this node]: the current assignment, nothing moves


class AlterPartitionReassignmentsApi:
    """The handlers of alter_partition_reassignments.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, topics: TopicRegistry, config: Config) -> None:
        self.topics = topics
        self.config = config

    def handle_alter_partition_reassignments(self, ctx: RequestContext, req: Any, version: int) -> Any:
        node = self.config.node_id
        out = []
        for t in req.topics:
            topic = self.topics.get(t.name)
            count = topic.partitions if topic is not None else None
            parts = []
            for p in t.partitions:
                code, message = _outcome(node, count, t.name, p)
                parts.append(PartitionOut(partition_index=p.partition_index, error_code=code, error_message=message))
            out.append(TopicOut(name=t.name, partitions=parts))
        return AlterPartitionReassignmentsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                   error_message=None, responses=out)
