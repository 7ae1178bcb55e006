"""Who may use the share group coordinator's APIs, as Kafka's KafkaApis decides it: READ on the
group to heartbeat in it (and DESCRIBE on each subscribed topic), DESCRIBE on the group to
describe it (and DESCRIBE on the topics its members are assigned)."""
from __future__ import annotations

from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.guard import DESCRIBE, GROUP, PASS, READ, TOPIC, Access, Guarded, clone


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
    from kcoord.server.security.acl import AclOperation, bit_field

    Described = ShareGroupDescribeResponse.DescribedGroup
    ids = list(req.group_ids)
    denied = [g for g in ids if not a.allowed(DESCRIBE, GROUP, g)]

    def error(gid: str, code: ErrorCode, message: str | None = None) -> Any:
        return Described(error_code=int(code), error_message=message, group_id=gid, group_state="", group_epoch=0,
                         assignment_epoch=0, assignor_name="", members=[], authorized_operations=-2**31)

    errors = [error(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in denied]

    def finish(resp: Any) -> Any:
        out = list(errors)
        for g in resp.groups:
            if g.error_code == ErrorCode.NONE:
                topics = {tp.topic_name for m in g.members for tp in m.assignment.topic_partitions}
                if len(a.allowed_names(DESCRIBE, TOPIC, topics)) < len(topics):
                    out.append(error(g.group_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                     "The group has described topic(s) that the client is not authorized to describe."))
                    continue
                if req.include_authorized_operations:
                    g.authorized_operations = bit_field({AclOperation(op) for op in a.operations(GROUP, g.group_id)})
            out.append(g)
        resp.groups = out
        return resp

    kept = [g for g in ids if g not in denied]
    if not kept:
        return Guarded(refusal=ShareGroupDescribeResponse(version=version, throttle_time_ms=0, groups=errors))
    return Guarded(request=clone(req, group_ids=kept) if denied else None, after=finish)
