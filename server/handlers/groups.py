"""The group-coordinator APIs. Their behaviour lives in server/group/ (the coordinator); each
handler here only passes the decoded request to the coordinator and its result through the
runtime, which makes the result's records durable before the response leaves. Their routes
(which have a hand-written fast path, which are called directly) are in routes.py.

    JoinGroup v0-v9      SyncGroup v0-v5      Heartbeat v0-v4      LeaveGroup v0-v5
    OffsetCommit v0-v9   OffsetFetch v0-v9    OffsetDelete v0
    DescribeGroups v0-v5 ListGroups v0-v5     DeleteGroups v0-v2
    ConsumerGroupHeartbeat v0-v1              ConsumerGroupDescribe v0-v1
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.fastpath import OffsetCommitResponseData, heartbeat_response_body
from kcoord.server.context import RequestContext
from kcoord.server.deferred import Deferred
from kcoord.server.group.responses import commit_response, delete_groups_response
from kcoord.server.share.cleanup import before_delete_groups

if TYPE_CHECKING:
    from kcoord.server.broker import Broker


def handle_join_group(ctx: RequestContext, req: Any, version: int) -> Any:
    coordinator = ctx.broker.coordinator
    result = coordinator.join_group(req, version, ctx.client_id or "", "/" + ctx.client_host)
    return ctx.broker.runtime.submit(result)


def handle_sync_group(ctx: RequestContext, req: Any, version: int) -> Any:
    return ctx.broker.runtime.submit(ctx.broker.coordinator.sync_group(req, version))


def handle_leave_group(ctx: RequestContext, req: Any, version: int) -> Any:
    return ctx.broker.runtime.submit(ctx.broker.coordinator.leave_group(req, version))


def handle_offset_fetch(ctx: RequestContext, req: Any, version: int) -> Any:
    return ctx.broker.runtime.submit(ctx.broker.coordinator.offset_fetch(req, version))


def handle_offset_delete(ctx: RequestContext, req: Any, version: int) -> Any:
    return ctx.broker.runtime.submit(ctx.broker.coordinator.offset_delete(req, version))


def handle_describe_groups(ctx: RequestContext, req: Any, version: int) -> Any:
    return ctx.broker.runtime.submit(ctx.broker.coordinator.describe_groups(req, version))


def handle_list_groups(ctx: RequestContext, req: Any, version: int) -> Any:
    return ctx.broker.runtime.submit(ctx.broker.coordinator.list_groups(req, version))


def handle_delete_groups(ctx: RequestContext, req: Any, version: int) -> Any:
    if any(ctx.broker.coordinator.share.members(g) == 0 for g in req.groups_names):
        return _delete_with_share_state(ctx, req, version)
    return ctx.broker.runtime.submit(ctx.broker.coordinator.delete_groups(req, version))


async def _delete_with_share_state(ctx: RequestContext, req: Any, version: int) -> Any:
    """An empty share group's share-partition state goes first (server/share/cleanup.py); a
    group whose state could not be deleted is answered with that error and kept."""
    failed = await before_delete_groups(ctx.broker, list(dict.fromkeys(req.groups_names)))
    req.groups_names = [g for g in req.groups_names if g not in failed]
    answer = ctx.broker.runtime.submit(ctx.broker.coordinator.delete_groups(req, version))
    if isinstance(answer, Deferred) and not answer.done:
        fut = asyncio.get_running_loop().create_future()
        answer.add_callback(lambda v: fut.done() or fut.set_result(v))
        answer = await fut
    elif isinstance(answer, Deferred):
        answer = answer.result()
    if not failed:
        return answer
    return delete_groups_response(version, [(r.group_id, r.error_code) for r in answer.results] + list(failed.items()))


def handle_consumer_group_heartbeat(ctx: RequestContext, req: Any, version: int) -> Any:
    coordinator = ctx.broker.coordinator
    client_id, host = ctx.client_id or "", "/" + ctx.client_host
    steady = coordinator.consumer_group_keepalive(req, version, client_id, host)  # a keep-alive, or None
    if steady is not None:
        return steady  # the route's encoder answers its cached body
    return ctx.broker.runtime.submit(coordinator.consumer_group_heartbeat(req, version, client_id, host))


def handle_consumer_group_describe(ctx: RequestContext, req: Any, version: int) -> Any:
    return ctx.broker.runtime.submit(ctx.broker.coordinator.consumer_group_describe(req, version))


def handle_heartbeat(ctx: RequestContext, req: Any, version: int) -> Any:
    return heartbeat_body(ctx.broker, req, version)


def heartbeat_body(broker: Broker, req: Any, version: int) -> bytes:
    """The hottest API of a coordinator: decoded by protocol/fastpath, answered from a cache."""
    return heartbeat_response_body(version, broker.coordinator.heartbeat_error(req, version))


def handle_offset_commit(ctx: RequestContext, req: Any, version: int) -> Any:
    return commit_offsets(ctx.broker, req, version)


def commit_offsets(broker: Broker, req: Any, version: int) -> Any:
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for topics that do not exist, before the
    coordinator sees the request; only the known topics are committed. On a cluster node the
    cluster's topics (a coordinator need not host a replica of the topics its groups commit)."""
    exists = broker.topics.get if broker.cluster is None else broker.cluster.topic
    for t in req.topics:
        if exists(t.name) is None:
            break
    else:  # every topic exists: the usual case
        return broker.runtime.submit(broker.coordinator.offset_commit(req, version))
    unknown = [t for t in req.topics if exists(t.name) is None]
    errors = [(t.name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for t in unknown for p in t.partitions]
    req.topics = [t for t in req.topics if exists(t.name) is not None]
    if not req.topics:
        return commit_response(version, errors)

    def merge(response: OffsetCommitResponseData) -> OffsetCommitResponseData:
        return commit_response(version, response.rows + errors)

    answer = broker.runtime.submit(broker.coordinator.offset_commit(req, version))
    if isinstance(answer, Deferred):
        merged: Deferred[Any] = Deferred()
        answer.add_callback(lambda r: merged.complete(merge(r)))
        return merged
    return merge(answer)
