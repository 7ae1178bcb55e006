"""Who may use the group APIs, as Kafka's KafkaApis decides it: READ on the group to join,
sync, heartbeat, leave and commit (and READ on each committed topic), DESCRIBE to fetch offsets,
describe and find the coordinator, DELETE to delete groups and offsets."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.acl import AclOperation
from kcoord.server.security.guard import (
    DELETE,
    DESCRIBE,
    GROUP,
    PASS,
    READ,
    TOPIC,
    TXN,
    Access,
    Guarded,
    clone,
    refused,
    whole_group,
)

if TYPE_CHECKING:
    from kcoord.server.security.authorizer import Authorizer


def offset_commit(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.server.group.responses import commit_response

    if not a.allowed(READ, GROUP, req.group_id):
        rows = [(t.name, p.partition_index, ErrorCode.GROUP_AUTHORIZATION_FAILED) for t in req.topics for p in t.partitions]
        return Guarded(refusal=commit_response(version, rows))
    topics = req.topics
    if len(topics) == 1 and a.allowed(READ, TOPIC, topics[0].name):  # the usual commit
        return PASS
    allowed = a.allowed_names(READ, TOPIC, (t.name for t in req.topics))
    if len(allowed) == len({t.name for t in req.topics}):
        return PASS
    denied = [(t.name, p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
              for t in req.topics if t.name not in allowed for p in t.partitions]
    kept = [t for t in req.topics if t.name in allowed]
    if not kept:
        return Guarded(refusal=commit_response(version, denied))
    return Guarded(request=clone(req, topics=kept), after=lambda r: commit_response(version, r.rows + denied))


def offset_fetch(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.consumer import OffsetFetchResponse

    FetchGroup = OffsetFetchResponse.OffsetFetchResponseGroup
    if version >= 8:
        groups = list(req.groups)
        denied_groups = {g.group_id for g in groups if not a.allowed(DESCRIBE, GROUP, g.group_id)}
        kept, unauthorized = [], {}
        for g in groups:
            if g.group_id in denied_groups:
                continue
            topics, missing = _describable(a, g.topics)
            unauthorized[g.group_id] = missing
            kept.append(clone(g, topics=topics) if g.topics is not None else g)

        def merge(resp: Any) -> Any:
            by_id = {g.group_id: g for g in resp.groups}
            out = []
            for g in groups:
                if g.group_id in denied_groups:
                    out.append(FetchGroup(group_id=g.group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[]))
                    continue
                got = by_id.get(g.group_id)
                if got is None:
                    continue
                if got.error_code == ErrorCode.NONE:
                    if g.topics is None:  # all topics: the ones it may not describe are left out
                        got.topics = [t for t in got.topics if a.allowed(DESCRIBE, TOPIC, t.name, log=False)]
                    else:
                        got.topics = list(got.topics) + [_fetch_denied_topic(True, t) for t in unauthorized[g.group_id]]
                out.append(got)
            resp.groups = out
            return resp

        if not kept:
            return Guarded(refusal=merge(OffsetFetchResponse(version=version, throttle_time_ms=0, topics=[],
                                                             error_code=0, groups=[])))
        return Guarded(request=clone(req, groups=kept), after=merge)
    # v0-v7: one group
    if not a.allowed(DESCRIBE, GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        topics = []
        if version < 2:  # no top-level error before v2: on each partition asked for
            topics = [_fetch_denied_topic(False, t, code) for t in req.topics or []]
        return Guarded(refusal=OffsetFetchResponse(version=version, throttle_time_ms=0, topics=topics,
                                                   error_code=int(code), groups=[]))
    topics, missing = _describable(a, req.topics)

    def merge_single(resp: Any) -> Any:
        if resp.error_code == ErrorCode.NONE:
            if req.topics is None:
                resp.topics = [t for t in resp.topics if a.allowed(DESCRIBE, TOPIC, t.name, log=False)]
            else:
                resp.topics = list(resp.topics) + [_fetch_denied_topic(False, t) for t in missing]
        return resp

    if req.topics is not None and not topics:
        return Guarded(refusal=merge_single(OffsetFetchResponse(version=version, throttle_time_ms=0, topics=[],
                                                                error_code=0, groups=[])))
    return Guarded(request=clone(req, topics=topics) if req.topics is not None else None, after=merge_single)


def _describable(a: Access, topics: Any) -> tuple[Any, list[Any]]:
    if topics is None:
        return None, []
    allowed = a.allowed_names(DESCRIBE, TOPIC, (t.name for t in topics))
    return [t for t in topics if t.name in allowed], [t for t in topics if t.name not in allowed]


def _fetch_denied_topic(grouped: bool, t: Any, code: ErrorCode = ErrorCode.TOPIC_AUTHORIZATION_FAILED) -> Any:
    from kafka.protocol.consumer import OffsetFetchResponse

    if grouped:
        T = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
    else:
        T = OffsetFetchResponse.OffsetFetchResponseTopic  # type: ignore[assignment]
        P = T.OffsetFetchResponsePartition  # type: ignore[assignment]
    return T(name=t.name, partitions=[P(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                        metadata="", error_code=int(code)) for p in t.partition_indexes])


def offset_delete(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.consumer import OffsetDeleteResponse

    T = OffsetDeleteResponse.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition
    if not a.allowed(DELETE, GROUP, req.group_id):
        return refused(a, req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    allowed = a.allowed_names(READ, TOPIC, (t.name for t in req.topics))
    denied = [T(name=t.name, partitions=[P(partition_index=p.partition_index,
                                           error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions])
              for t in req.topics if t.name not in allowed]
    if not denied:
        return PASS
    kept = [t for t in req.topics if t.name in allowed]

    def merge(resp: Any) -> Any:
        if resp.error_code == ErrorCode.NONE:
            resp.topics = list(resp.topics) + denied
        return resp

    if not kept:
        return Guarded(refusal=OffsetDeleteResponse(version=version, error_code=0, throttle_time_ms=0, topics=denied))
    return Guarded(request=clone(req, topics=kept), after=merge)


def describe_groups(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.groups import DescribeGroupsResponse

    denied = [g for g in req.groups if not a.allowed(DESCRIBE, GROUP, g)]
    kept = [g for g in req.groups if g not in denied]
    errors = [DescribeGroupsResponse.DescribedGroup(
        error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None, group_id=g, group_state="",
        protocol_type="", protocol_data="", members=[], authorized_operations=None) for g in denied]
    include_ops = version >= 3 and bool(getattr(req, "include_authorized_operations", False))

    def merge(resp: Any) -> Any:
        if include_ops:
            for g in resp.groups:
                if g.error_code == ErrorCode.NONE:
                    g.authorized_operations = a.operations(GROUP, g.group_id)
        resp.groups = errors + list(resp.groups)
        return resp

    if not kept:
        return Guarded(refusal=DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=errors))
    return Guarded(request=clone(req, groups=kept) if denied else None, after=merge)


def list_groups(a: Access, req: Any, version: int) -> Guarded:
    if a.cluster(DESCRIBE, log=False):  # with DESCRIBE on the cluster, every group is listed
        return PASS

    def keep_describable(resp: Any) -> Any:
        resp.groups = [g for g in resp.groups if a.allowed(DESCRIBE, GROUP, g.group_id, log=False)]
        return resp

    return Guarded(after=keep_describable)


def delete_groups(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.groups import DeleteGroupsResponse

    names = list(dict.fromkeys(req.groups_names))
    denied = [g for g in names if not a.allowed(DELETE, GROUP, g)]
    if not denied:
        return PASS
    errors = [DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
              for g in denied]
    kept = [g for g in names if g not in denied]

    def merge(resp: Any) -> Any:
        resp.results = list(resp.results) + errors
        return resp

    if not kept:
        return Guarded(refusal=DeleteGroupsResponse(version=version, throttle_time_ms=0, results=errors))
    return Guarded(request=clone(req, groups_names=kept), after=merge)


def find_coordinator(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.metadata import FindCoordinatorResponse

    key_type = req.key_type if version >= 1 else 0

    def refused(key: str) -> ErrorCode | None:
        if key_type == 0 and not a.allowed(DESCRIBE, GROUP, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        if key_type == 1 and not a.allowed(DESCRIBE, TXN, key):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None

    messages = {ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed."}
    if version < 4:
        code = refused(req.key)
        if code is None:
            return PASS
        return Guarded(refusal=FindCoordinatorResponse(version=version, throttle_time_ms=0, error_code=int(code),
                                                       error_message=messages[code], node_id=-1, host="", port=-1))
    codes = {k: refused(k) for k in req.coordinator_keys}
    if not any(codes.values()):
        return PASS
    kept = [k for k in req.coordinator_keys if codes[k] is None]

    def merge(resp: Any) -> Any:
        got = {c.key: c for c in resp.coordinators}
        out = []
        for k in req.coordinator_keys:
            code = codes[k]
            if code is not None:
                out.append(FindCoordinatorResponse.Coordinator(key=k, node_id=-1, host="", port=-1,
                                                               error_code=int(code), error_message=None))
            elif k in got:
                out.append(got[k])
        resp.coordinators = out
        return resp

    if not kept:
        return Guarded(refusal=merge(FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=[])))
    return Guarded(request=clone(req, coordinator_keys=kept), after=merge)


def consumer_group_heartbeat(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.protocol.fastpath import ConsumerGroupHeartbeatResponseData

    if not a.allowed(READ, GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif req.subscribed_topic_names and \
            len(a.allowed_names(DESCRIBE, TOPIC, req.subscribed_topic_names)) < len(set(req.subscribed_topic_names)):
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # a subscription may not name what it may not see
    else:
        return PASS
    return Guarded(refusal=ConsumerGroupHeartbeatResponseData(version, int(code), None, None, 0, 0, None))


def consumer_group_describe(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.protocol.messages import ConsumerGroupDescribeResponse

    return modern_group_describe(a, req, version, ConsumerGroupDescribeResponse, lambda m: (
        *m.assignment.topic_partitions, *m.target_assignment.topic_partitions))


def modern_group_describe(a: Access, req: Any, version: int, response: Any,
                          member_partitions: Callable[[Any], Iterable[Any]]) -> Guarded:
    """ConsumerGroupDescribe and ShareGroupDescribe, as Kafka authorizes them: DESCRIBE on each
    group (a denied one answered GROUP_AUTHORIZATION_FAILED), then DESCRIBE on the topics of
    each described group's members (`member_partitions`: a member's topic partitions)."""
    from kcoord.server.security.acl import bit_field

    Described = response.DescribedGroup
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
                topics = {tp.topic_name for m in g.members for tp in member_partitions(m)}
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
        return Guarded(refusal=response(version=version, throttle_time_ms=0, groups=errors))
    return Guarded(request=clone(req, group_ids=kept) if denied else None, after=finish)


def heartbeat_as_is(authorizer: Authorizer, principal: str, host: str, req: Any, api: str) -> bool:
    return authorizer.authorize(principal, host, READ, GROUP, req.group_id, api, False)  # a denial is logged by the policy


def offset_commit_as_is(authorizer: Authorizer, principal: str, host: str, req: Any, api: str) -> bool:
    topics = req.topics
    if len(topics) == 1:  # the usual commit: one remembered decision for the (group, topic) pair
        key = (principal, host, req.group_id, topics[0].name)
        memo = authorizer.memo
        hit = memo.get(key)
        if hit is None:
            hit = (authorizer.authorize(principal, host, READ, GROUP, req.group_id, api, False)
                   and authorizer.authorize(principal, host, READ, TOPIC, topics[0].name, api, False))
            authorizer.remember(key, hit)
        return hit
    if not authorizer.authorize(principal, host, READ, GROUP, req.group_id, api, False):
        return False
    for t in topics:
        if not authorizer.authorize(principal, host, READ, TOPIC, t.name, api, False):
            return False
    return True


join_group = whole_group(READ)
sync_group = whole_group(READ)
heartbeat = whole_group(READ)
leave_group = whole_group(READ)
