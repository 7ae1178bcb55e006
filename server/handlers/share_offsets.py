"""DescribeShareGroupOffsets (90) v0-v1, AlterShareGroupOffsets (91) v0 and
DeleteShareGroupOffsets (92) v0, from the durable share state (server/share/state.py: a share
partition's start offset is its "offset").

- Describe: per group, the named topics' partitions (all partitions with state when Topics is
  null) with their start offset (-1 when the partition has no state), leader epoch 0 and (v1)
  the lag; an unknown group: GROUP_ID_NOT_FOUND; an unknown topic: UNKNOWN_TOPIC_OR_PARTITION.
- Alter and Delete need an empty group (NON_EMPTY_GROUP otherwise; Delete of an unknown group
  GROUP_ID_NOT_FOUND); Alter writes a snapshot at
  the new start offset with the next state epoch, Delete the tombstones of the topic's state.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_messages import (
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponse,
)
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine

if TYPE_CHECKING:
    from kcoord.server.lazy import Lazy
    from kcoord.server.share.manager import ShareManager
    from kcoord.server.topics import TopicRegistry

ZERO = uuid.UUID(int=0)
_DG = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
_DT = _DG.DescribeShareGroupOffsetsResponseTopic
_DP = _DT.DescribeShareGroupOffsetsResponsePartition
_AT = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
_AP = _AT.AlterShareGroupOffsetsResponsePartition
_XT = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic


def _not_empty(mgr: Any, group: str, create: bool = False) -> ErrorCode | None:
    """NON_EMPTY_GROUP for a group with members; GROUP_ID_NOT_FOUND for an unknown one, unless
    the call creates it (AlterShareGroupOffsets sets the start of a group not yet seen, as
    Kafka's coordinator creates the share group)."""
    members = mgr.group_members(group)
    if members is None and not create and not mgr.group_known(group):
        return ErrorCode.GROUP_ID_NOT_FOUND
    if members:
        return ErrorCode.NON_EMPTY_GROUP
    return None


class ShareOffsetsApis:
    """The share group offsets APIs (90-92), built by the composition root (server/node.py)
    with the topic registry and the share-partition manager."""

    def __init__(self, topics: TopicRegistry, share: Lazy[ShareManager],
                 group_refused: Callable[[str], ErrorCode | None] = lambda group: None) -> None:
        """group_refused(group): NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when this node
        is not (yet) the group's coordinator (a cluster node: these APIs go to the group
        coordinator, as in Kafka)."""
        self.topics = topics
        self.share = share
        self.group_refused = group_refused


    def handle_describe_share_group_offsets(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._describe_share_group_offsets(ctx, req, version), "DescribeShareGroupOffsets")

    async def _describe_share_group_offsets(self, ctx: RequestContext, req: Any, version: int) -> Any:
        mgr = self.share.get()
        await mgr.ready()
        topics = self.topics
        groups = []
        for g in req.groups or ():
            refused = self.group_refused(g.group_id)
            if refused is not None:
                groups.append(_DG(group_id=g.group_id, topics=[], error_code=refused, error_message=None))
                continue
            if not mgr.group_known(g.group_id) and not mgr.known_partitions(g.group_id):
                groups.append(_DG(group_id=g.group_id, topics=[], error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                  error_message=f"Group {g.group_id} not found."))
                continue
            if g.topics is None:
                wanted: dict[str, list[int]] = {}
                known = await mgr.states(g.group_id, mgr.known_partitions(g.group_id))
                for (tid, p) in sorted(known, key=lambda k: (str(k[0]), k[1])):
                    t = topics.by_id.get(tid)
                    if t is not None and known[(tid, p)][1] is not None:
                        wanted.setdefault(t.name, []).append(p)
            else:
                wanted = {t.topic_name: list(t.partitions or ()) for t in g.topics}
            asked = [(tt.topic_id, p) for name, ps in wanted.items() if (tt := topics.get(name)) is not None
                     for p in ps if 0 <= p < tt.partitions]
            persisted = await mgr.states(g.group_id, asked)
            out = []
            for name, parts in wanted.items():
                t = topics.get(name)
                rows = []
                for p in parts:
                    if t is None or p < 0 or p >= t.partitions:
                        rows.append(_DP(partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1,
                                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                        error_message="This server does not host this topic-partition."))
                        continue
                    code, state = persisted[(t.topic_id, p)]
                    if code is not None:
                        rows.append(_DP(partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1,
                                        error_code=code, error_message=None))
                        continue
                    start = state.start_offset if state is not None else -1
                    rows.append(_DP(partition_index=p, start_offset=start, leader_epoch=0 if start >= 0 else -1,
                                    lag=mgr.lag(g.group_id, t, p, state) if start >= 0 else -1,
                                    error_code=ErrorCode.NONE, error_message=None))
                out.append(_DT(topic_name=name, topic_id=t.topic_id if t is not None else ZERO, partitions=rows))
            groups.append(_DG(group_id=g.group_id, topics=out, error_code=ErrorCode.NONE, error_message=None))
        return DescribeShareGroupOffsetsResponse(version=version, throttle_time_ms=0, groups=groups)

    def handle_alter_share_group_offsets(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._alter_share_group_offsets(ctx, req, version), "AlterShareGroupOffsets")

    async def _alter_share_group_offsets(self, ctx: RequestContext, req: Any, version: int) -> Any:
        mgr = self.share.get()
        await mgr.ready()
        code = self.group_refused(req.group_id) or _not_empty(mgr, req.group_id, create=True)
        if code is not None:
            return AlterShareGroupOffsetsResponse(version=version, throttle_time_ms=0, error_code=code,
                                                  error_message=None, responses=[])
        out = []
        for t in req.topics or ():
            topic = self.topics.get(t.topic_name)
            rows = []
            for p in t.partitions or ():
                err = ErrorCode.NONE
                if topic is None or p.partition_index < 0 or p.partition_index >= topic.partitions:
                    err = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.start_offset < -1:
                    err = ErrorCode.INVALID_REQUEST
                else:
                    start = p.start_offset
                    if start == -1:  # latest
                        plog = mgr.partition_log(topic.name, p.partition_index)
                        start = plog.log_end_offset if plog is not None else 0
                    err = await mgr.alter_start(req.group_id, topic, p.partition_index, start) or ErrorCode.NONE
                rows.append(_AP(partition_index=p.partition_index, error_code=err, error_message=None))
            out.append(_AT(topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else ZERO,
                           partitions=rows))
        return AlterShareGroupOffsetsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                              error_message=None, responses=out)

    def handle_delete_share_group_offsets(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._delete_share_group_offsets(ctx, req, version), "DeleteShareGroupOffsets")

    async def _delete_share_group_offsets(self, ctx: RequestContext, req: Any, version: int) -> Any:
        mgr = self.share.get()
        await mgr.ready()
        code = self.group_refused(req.group_id) or _not_empty(mgr, req.group_id)
        if code is not None:
            return DeleteShareGroupOffsetsResponse(version=version, throttle_time_ms=0, error_code=code,
                                                   error_message=None, responses=[])
        out = []
        for t in req.topics or ():
            topic = self.topics.get(t.topic_name)
            if topic is None:
                out.append(_XT(topic_name=t.topic_name, topic_id=ZERO, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                               error_message=None))
                continue
            err = await mgr.delete_state(req.group_id, topic) or ErrorCode.NONE
            out.append(_XT(topic_name=t.topic_name, topic_id=topic.topic_id, error_code=err, error_message=None))
        return DeleteShareGroupOffsetsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                               error_message=None, responses=out)
