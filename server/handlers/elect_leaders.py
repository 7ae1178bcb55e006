"""ElectLeaders v0-v2. On a cluster node the controller elects (server/cluster/controller.py).
Otherwise answered as the only broker: every partition already has its preferred
leader (this node), so a preferred or unclean election is ELECTION_NOT_NEEDED. Named partitions
get a result each; with a null list (all partitions) only the topics are listed, since
partitions needing no election are left out (the KRaft controller's behaviour)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import ElectLeadersResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine

if TYPE_CHECKING:
    from kcoord.server.topics import TopicRegistry

Result = ElectLeadersResponse.ReplicaElectionResult
PartitionOut = Result.PartitionResult
PREFERRED, UNCLEAN = 0, 1
NOT_NEEDED = "Leader election not needed for topic partition."


class ElectLeadersApi:
    """The handlers of elect_leaders.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, topics: TopicRegistry, cluster: Callable[[], Any]) -> None:
        self.topics = topics
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None (server/cluster/)

    def handle_elect_leaders(self, ctx: RequestContext, req: Any, version: int) -> Any:
        topics = self.topics
        election = req.election_type if version >= 1 else PREFERRED
        if election not in (PREFERRED, UNCLEAN):  # InvalidRequestException -> getErrorResponse
            message = f"Unknown election type {election}"
            results = [Result(topic=t.topic, partition_result=[
                PartitionOut(partition_id=p, error_code=ErrorCode.INVALID_REQUEST, error_message=message)
                for p in t.partitions]) for t in req.topic_partitions or ()]
            return ElectLeadersResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                                        replica_election_results=results)
        if self.cluster() is not None:
            return of_coroutine(self._cluster_elect(ctx, req, version, election), "ElectLeaders")
        if req.topic_partitions is None:
            results = [Result(topic=name, partition_result=[]) for name in sorted(topics.topics)]
        else:
            results = []
            for t in req.topic_partitions:
                topic = topics.get(t.topic)
                parts = []
                for p in t.partitions:
                    if topic is None:
                        code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {t.topic}"
                    elif not 0 <= p < topic.partitions:
                        code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {t.topic}-{p}"
                    else:
                        code, message = ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED
                    parts.append(PartitionOut(partition_id=p, error_code=code, error_message=message))
                results.append(Result(topic=t.topic, partition_result=parts))
        return ElectLeadersResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    replica_election_results=results)

    async def _cluster_elect(self, ctx: RequestContext, req: Any, version: int, election: int) -> Any:
        """On a cluster node: the controller elects (the others answer NOT_CONTROLLER for each
        partition, as Kafka's ZooKeeper-mode brokers; the admin clients send it to the controller).
        With a null list, every partition is tried and those needing no election are left out."""
        from kcoord.server.cluster.zk import BadVersionError

        node = self.cluster()
        if req.topic_partitions is None:
            wanted = [(t.name, list(t.replicas)) for t in node.topics()]
        else:
            wanted = [(t.topic, list(t.partitions)) for t in req.topic_partitions]
        results = []
        for name, partitions in wanted:
            parts = []
            for p in partitions:
                if node.controller is None:
                    code, message = "NOT_CONTROLLER", None
                elif node.topic(name) is None or p not in node.topic(name).replicas:
                    code, message = "UNKNOWN_TOPIC_OR_PARTITION", f"No such topic partition {name}-{p}"
                else:
                    try:
                        code, message = await node.controller.elect(name, p, election == UNCLEAN)
                    except BadVersionError:  # the state changed meanwhile (or the controller moved)
                        code, message = "NOT_CONTROLLER", None
                if req.topic_partitions is None and code == "ELECTION_NOT_NEEDED":
                    continue
                parts.append(PartitionOut(partition_id=p, error_code=ErrorCode[code], error_message=message))
            results.append(Result(topic=name, partition_result=parts))
        return ElectLeadersResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                    replica_election_results=results)
