"""Who may use the client quota APIs, as Kafka's KafkaApis authorizes them: DescribeClientQuotas
needs DESCRIBE_CONFIGS on the cluster, AlterClientQuotas ALTER_CONFIGS; otherwise the request is
refused CLUSTER_AUTHORIZATION_FAILED."""
from __future__ import annotations

from kcoord.server.security.acl import AclOperation
from kcoord.server.security.guard import cluster_op

describe_client_quotas = cluster_op(AclOperation.DESCRIBE_CONFIGS)
alter_client_quotas = cluster_op(AclOperation.ALTER_CONFIGS)
