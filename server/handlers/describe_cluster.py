"""DescribeCluster v0-v1: the cluster id, this node as the only broker and as the controller
(a KRaft broker names a live broker), and, when asked, the cluster operations a client may do
(all of them: no authorizer). v1 carries the endpoint type: a broker serves BROKER only."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.cluster import DescribeClusterResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from kcoord.server.config import Config

BrokerOut = DescribeClusterResponse.DescribeClusterBroker
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
_ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}
# AclOperation codes of the CLUSTER resource (AclEntry.supportedOperations): CREATE, ALTER,
# DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
CLUSTER_OPERATIONS = {5, 7, 8, 9, 10, 11, 12}


class DescribeClusterApi:
    """The handlers of describe_cluster.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, config: Config, cluster_id: str, cluster: Callable[[], Any]) -> None:
        self.config = config
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None (server/cluster/)
        self.cluster_id = cluster_id

    def handle_describe_cluster(self, ctx: RequestContext, req: Any, version: int) -> Any:
        wanted = req.endpoint_type if version >= 1 else BROKER_ENDPOINT
        if wanted != BROKER_ENDPOINT:  # AuthHelper.computeDescribeClusterResponse
            known = wanted in _ENDPOINT_NAMES
            code = ErrorCode.INVALID_REQUEST if version == 0 else (
                ErrorCode.MISMATCHED_ENDPOINT_TYPE if known else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE)
            message = (f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                       f"{_ENDPOINT_NAMES[wanted]}" if known else f"Unsupported endpoint type {wanted}")
            return DescribeClusterResponse(version=version, throttle_time_ms=0, error_code=code, error_message=message,
                                           endpoint_type=BROKER_ENDPOINT, cluster_id="", controller_id=-1, brokers=[],
                                           authorized_operations=None)
        cluster = self.cluster()
        if cluster is not None:  # a cluster node: every live broker, the elected controller
            from kcoord.server.cluster import answers

            listed = [BrokerOut(broker_id=b, host=h, port=p, rack=r)
                      for b, h, p, r in answers.brokers(cluster, answers.listener_name(ctx))]
            controller = cluster.controller_id
            return DescribeClusterResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                endpoint_type=BROKER_ENDPOINT, cluster_id=cluster.cluster_id or self.cluster_id,
                controller_id=controller if any(b.broker_id == controller for b in listed) else -1, brokers=listed,
                authorized_operations=set(CLUSTER_OPERATIONS) if req.include_cluster_authorized_operations else None)
        node = self.config.node_id
        # the endpoint of the listener the request came in on; none when that listener is not
        # advertised, and then no controller either (Kafka names only a listed broker)
        endpoint = ctx.advertised_on(self.config)
        brokers = [] if endpoint is None else [BrokerOut(broker_id=node, host=endpoint[0], port=endpoint[1], rack=None)]
        return DescribeClusterResponse(
            version=version, throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
            endpoint_type=BROKER_ENDPOINT, cluster_id=self.cluster_id, controller_id=node if brokers else -1,
            brokers=brokers,
            authorized_operations=set(CLUSTER_OPERATIONS) if req.include_cluster_authorized_operations else None,
        )
