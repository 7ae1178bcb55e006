"""The group-coordinator APIs. Their behaviour lives in server/group/ (the coordinator); each
handler here only passes the decoded request to the coordinator and its result through the
runtime, which makes the result's records durable before the response leaves. Their routes
(which have a hand-written fast path, which are called directly) are in routes.py; GroupApis
is built by the composition root (server/node.py) with the parts these handlers use.

    JoinGroup v0-v9      SyncGroup v0-v5      Heartbeat v0-v4      LeaveGroup v0-v5
    OffsetCommit v0-v9   OffsetFetch v0-v9    OffsetDelete v0
    DescribeGroups v0-v5 ListGroups v0-v5     DeleteGroups v0-v2
    ConsumerGroupHeartbeat v0-v1              ConsumerGroupDescribe v0-v1
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.fastpath import OffsetCommitResponseData, heartbeat_response_body
from kcoord.server.context import RequestContext
from kcoord.server.deferred import Deferred, of_coroutine, wait
from kcoord.server.group.responses import commit_response, delete_groups_response
from kcoord.server.share.cleanup import before_delete_groups

if TYPE_CHECKING:
    from kcoord.protocol.coordinator_records import CoordinatorRecord
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.share.manager import ShareManager
    from kcoord.server.topics import TopicRegistry


class GroupApis:
    """The group APIs' handlers, built by the composition root (server/node.py) with the group
    coordinator, its runtime, the topic registry (OffsetCommit answers unknown topics) and the
    share state (DeleteGroups of a share group)."""

    def __init__(self, coordinator: GroupCoordinator, runtime: CoordinatorRuntime[CoordinatorRecord],
                 topics: TopicRegistry, share_state: Callable[[], ShareManager | None],
                 cluster: Callable[[], Any]) -> None:
        self.coordinator = coordinator
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None (server/cluster/)
        # the share-partition manager when share state exists (DeleteGroups deletes a share group's first)
        self.share_state = share_state
        self.runtime = runtime
        self.topics = topics
        self.submit = runtime.submit

    def handle_join_group(self, ctx: RequestContext, req: Any, version: int) -> Any:
        result = self.coordinator.join_group(req, version, ctx.client_id or "", "/" + ctx.client_host)
        return self.submit(result)

    def handle_sync_group(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.submit(self.coordinator.sync_group(req, version))

    def handle_leave_group(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.submit(self.coordinator.leave_group(req, version))

    def handle_offset_fetch(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.submit(self.coordinator.offset_fetch(req, version))

    def handle_offset_delete(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.submit(self.coordinator.offset_delete(req, version))

    def handle_describe_groups(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.submit(self.coordinator.describe_groups(req, version))

    def handle_list_groups(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.submit(self.coordinator.list_groups(req, version))

    def handle_delete_groups(self, ctx: RequestContext, req: Any, version: int) -> Any:
        if any(self.coordinator.share.members(g) == 0 for g in req.groups_names):
            return of_coroutine(self._delete_with_share_state(req, version), "DeleteGroups")
        return self.submit(self.coordinator.delete_groups(req, version))

    async def _delete_with_share_state(self, req: Any, version: int) -> Any:
        """An empty share group's share-partition state goes first (server/share/cleanup.py); a
        group whose state could not be deleted is answered with that error and kept."""
        failed = await before_delete_groups(self.coordinator, self.share_state,
                                            list(dict.fromkeys(req.groups_names)))
        req.groups_names = [g for g in req.groups_names if g not in failed]
        answer = self.submit(self.coordinator.delete_groups(req, version))
        if isinstance(answer, Deferred):
            answer = await wait(answer)
        if not failed:
            return answer
        return delete_groups_response(version, [(r.group_id, r.error_code) for r in answer.results]
                                      + list(failed.items()))

    def handle_consumer_group_heartbeat(self, ctx: RequestContext, req: Any, version: int) -> Any:
        coordinator = self.coordinator
        client_id, host = ctx.client_id or "", "/" + ctx.client_host
        steady = coordinator.consumer_group_keepalive(req, version, client_id, host)  # a keep-alive, or None
        if steady is not None:
            return steady  # the route's encoder answers its cached body
        return self.submit(coordinator.consumer_group_heartbeat(req, version, client_id, host))

    def handle_consumer_group_describe(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.submit(self.coordinator.consumer_group_describe(req, version))

    def handle_heartbeat(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.heartbeat_body(req, version)

    def heartbeat_body(self, req: Any, version: int) -> bytes:
        """The hottest API of a coordinator: decoded by protocol/fastpath, answered from a cache."""
        return heartbeat_response_body(version, self.coordinator.heartbeat_error(req, version))

    def handle_offset_commit(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return self.commit_offsets(req, version)

    def commit_offsets(self, req: Any, version: int) -> Any:
        """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for topics that do not exist, before the
        coordinator sees the request; only the known topics are committed. On a cluster node the
        cluster's topics (a coordinator need not host a replica of the topics its groups commit)."""
        cluster = self.cluster()
        exists = self.topics.get if cluster is None else cluster.topic
        for t in req.topics:
            if exists(t.name) is None:
                break
        else:  # every topic exists: the usual case
            return self.submit(self.coordinator.offset_commit(req, version))
        unknown = [t for t in req.topics if exists(t.name) is None]
        errors = [(t.name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                  for t in unknown for p in t.partitions]
        req.topics = [t for t in req.topics if exists(t.name) is not None]
        if not req.topics:
            return commit_response(version, errors)

        def merge(response: OffsetCommitResponseData) -> OffsetCommitResponseData:
            return commit_response(version, response.rows + errors)

        answer = self.submit(self.coordinator.offset_commit(req, version))
        if isinstance(answer, Deferred):
            merged: Deferred[Any] = Deferred()
            answer.add_callback(lambda r: merged.complete(merge(r)))
            return merged
        return merge(answer)
