"""AlterPartitionReassignments v0. On a cluster node the controller starts (or cancels) each
reassignment (server/cluster/reassignment.py) and answers once it is written, as a
ZooKeeper-mode Kafka controller; any other node answers NOT_CONTROLLER (the admin clients send
it to the controller). As the only broker: the one valid target of a partition is this node
alone, which is where it already is (nothing to do); any other broker id is not registered
(INVALID_REPLICA_ASSIGNMENT, Kafka's wording); cancelling finds nothing in progress."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import AlterPartitionReassignmentsResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine

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

    def __init__(self, topics: TopicRegistry, config: Config, cluster: Callable[[], Any] = lambda: None) -> None:
        self.topics = topics
        self.config = config
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None

    def handle_alter_partition_reassignments(self, ctx: RequestContext, req: Any, version: int) -> Any:
        if self.cluster() is not None:
            return of_coroutine(self._cluster_alter(req, version), "AlterPartitionReassignments")
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

    async def _cluster_alter(self, req: Any, version: int) -> Any:
        controller = self.cluster().controller
        if controller is None:
            return AlterPartitionReassignmentsResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                error_message="This is not the correct controller for this cluster.", responses=[])
        wanted: dict[tuple[str, int], tuple[int, ...] | None] = {}
        for t in req.topics:  # a partition named twice: the last one counts (Kafka's map)
            for p in t.partitions:
                wanted[(t.name, p.partition_index)] = None if p.replicas is None else tuple(p.replicas)
        results = await controller.reassignments.alter(wanted)
        by_topic: dict[str, list[Any]] = {}
        for (name, p), (code, message) in results.items():
            by_topic.setdefault(name, []).append(PartitionOut(partition_index=p, error_code=ErrorCode[code],
                                                              error_message=message))
        return AlterPartitionReassignmentsResponse(
            version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
            responses=[TopicOut(name=name, partitions=parts) for name, parts in by_topic.items()])
