"""Who may use the security and cluster-administration APIs: DESCRIBE or ALTER on the cluster
(ACLs, SCRAM credentials, log dirs, leader elections, reassignments); ApiVersions and the SASL
requests need nothing (authentication comes first)."""
from __future__ import annotations

from kcoord.server.security.guard import ALTER, DESCRIBE, cluster_op, open_to_all

describe_acls = cluster_op(DESCRIBE)
create_acls = cluster_op(ALTER)
delete_acls = cluster_op(ALTER)
describe_user_scram_credentials = cluster_op(DESCRIBE)
alter_user_scram_credentials = cluster_op(ALTER)
describe_log_dirs = cluster_op(DESCRIBE)
elect_leaders = cluster_op(ALTER)
list_partition_reassignments = cluster_op(DESCRIBE)
alter_partition_reassignments = cluster_op(ALTER)
api_versions = open_to_all
sasl_handshake = open_to_all
sasl_authenticate = open_to_all
