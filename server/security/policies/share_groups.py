"""Who may use the share group coordinator's APIs, as Kafka's KafkaApis decides it: READ on the
group to heartbeat in it (and DESCRIBE on each subscribed topic), DESCRIBE on the group to
describe it (and DESCRIBE on the topics its members are assigned)."""
from __future__ import annotations

from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.guard import DESCRIBE, GROUP, PASS, READ, TOPIC, Access, Guarded
from kcoord.server.security.policies.groups import modern_group_describe


def share_group_heartbeat(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.server.group.share.coordinator import heartbeat_response

    if not a.allowed(READ, GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif req.subscribed_topic_names and \
            len(a.allowed_names(DESCRIBE, TOPIC, req.subscribed_topic_names)) < len(set(req.subscribed_topic_names)):
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # a subscription may not name what it may not see
    else:
        return PASS
    return Guarded(refusal=heartbeat_response(code))


def share_group_describe(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.protocol.share_messages import ShareGroupDescribeResponse

    return modern_group_describe(a, req, version, ShareGroupDescribeResponse,
                                 lambda m: m.assignment.topic_partitions)
