"""ListPartitionReassignments v0. On a cluster node the controller answers the reassignments in
progress (server/cluster/reassignment.py): every one for a null topic list, else those of the
named partitions; partitions not being reassigned, and topics that do not exist, are left out,
as Kafka's controller does; any other node answers NOT_CONTROLLER. A single broker never moves
replicas, so no reassignment is ever in progress there."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.admin.topics import ListPartitionReassignmentsResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext

TopicOut = ListPartitionReassignmentsResponse.OngoingTopicReassignment
PartitionOut = TopicOut.OngoingPartitionReassignment


class ListPartitionReassignmentsApi:
    """The handlers of list_partition_reassignments.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, cluster: Callable[[], Any] = lambda: None) -> None:
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None

    def handle_list_partition_reassignments(self, ctx: RequestContext, req: Any, version: int) -> Any:
        node = self.cluster()
        if node is None:
            return ListPartitionReassignmentsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                      error_message=None, topics=[])
        if node.controller is None:
            return ListPartitionReassignmentsResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                error_message="This is not the correct controller for this cluster.", topics=[])
        wanted = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
        by_topic: dict[str, list[Any]] = {}
        for (name, p), ra in node.controller.reassignments.listing(wanted).items():
            by_topic.setdefault(name, []).append(PartitionOut(
                partition_index=p, replicas=list(ra.replicas), adding_replicas=list(ra.adding),
                removing_replicas=list(ra.removing)))
        return ListPartitionReassignmentsResponse(
            version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
            topics=[TopicOut(name=name, partitions=parts) for name, parts in by_topic.items()])
