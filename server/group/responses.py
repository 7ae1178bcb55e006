"""Versioned kafka-python response objects for the group APIs, built in one place so the
version rules (fields that became nullable, errors that moved between levels) stay together.
Fields a version does not have are ignored by kafka-python on encode."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.protocol.admin.groups import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.consumer import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.fastpath import OffsetCommitResponseData
from kcoord.server.group.classic.member import JoinResult, SyncResult

_JoinMember = JoinGroupResponse.JoinGroupResponseMember
_LeaveMember = LeaveGroupResponse.MemberResponse
_Described = DescribeGroupsResponse.DescribedGroup
_DescribedMember = DescribeGroupsResponse.DescribedGroup.DescribedGroupMember
_Listed = ListGroupsResponse.ListedGroup
_Deleted = DeleteGroupsResponse.DeletableGroupResult
_FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_FetchPartition = OffsetFetchResponse.OffsetFetchResponseTopic.OffsetFetchResponsePartition
_FetchGroup = OffsetFetchResponse.OffsetFetchResponseGroup
_FetchGroupTopic = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics
_FetchGroupPartition = OffsetFetchResponse.OffsetFetchResponseGroup.OffsetFetchResponseTopics.OffsetFetchResponsePartitions
_DeleteTopic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_DeletePartition = OffsetDeleteResponse.OffsetDeleteResponseTopic.OffsetDeleteResponsePartition

# DescribeGroups authorized_operations without an authorizer: READ(3), DELETE(6), DESCRIBE(8)
# kafka-python encodes this bitfield from a set of bit numbers; None encodes Int32.MIN_VALUE
# ("not requested").
GROUP_AUTHORIZED_OPERATIONS: set[int] | None = {3, 6, 8}
AUTHORIZED_OPERATIONS_OMITTED: set[int] | None = None


def join_response(version: int, r: JoinResult) -> JoinGroupResponse:
    name = r.protocol_name
    if version < 7 and name is None:
        name = ""  # not nullable before v7 (Kafka's JoinGroupResponse does the same)
    members = [_JoinMember(member_id=m, group_instance_id=i, metadata=meta) for m, i, meta in r.members]
    return JoinGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=int(r.error),
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=name,
        leader=r.leader_id or "",
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=members,
    )


def sync_response(version: int, r: SyncResult) -> SyncGroupResponse:
    return SyncGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=int(r.error),
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        assignment=r.assignment,
    )


def heartbeat_response(version: int, error: ErrorCode) -> HeartbeatResponse:
    return HeartbeatResponse(version=version, throttle_time_ms=0, error_code=int(error))


def leave_response(
    version: int, top: ErrorCode, members: list[tuple[str, str | None, ErrorCode]]
) -> LeaveGroupResponse:
    if version <= 2:
        # single-member versions carry the member's error at the top level
        err = top
        if err == ErrorCode.NONE:
            err = next((e for _, _, e in members if e != ErrorCode.NONE), ErrorCode.NONE)
        return LeaveGroupResponse(version=version, throttle_time_ms=0, error_code=int(err), members=[])
    return LeaveGroupResponse(
        version=version,
        throttle_time_ms=0,
        error_code=int(top),
        members=[_LeaveMember(member_id=m, group_instance_id=i, error_code=int(e)) for m, i, e in members],
    )


def described_group(
    group_id: str,
    error: ErrorCode,
    state: str,
    protocol_type: str,
    protocol: str,
    members: list[tuple[str, str | None, str, str, bytes, bytes]],
    authorized_operations: set[int] | None,
) -> _Described:
    return _Described(
        error_code=int(error),
        error_message=None,
        group_id=group_id,
        group_state=state,
        protocol_type=protocol_type,
        protocol_data=protocol,
        members=[
            _DescribedMember(
                member_id=m,
                group_instance_id=i,
                client_id=c,
                client_host=h,
                member_metadata=meta,
                member_assignment=a,
            )
            for m, i, c, h, meta, a in members
        ],
        authorized_operations=None if authorized_operations is None else set(authorized_operations),
    )


def describe_response(version: int, groups: list[_Described]) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(version=version, throttle_time_ms=0, groups=groups)


def list_response(version: int, error: ErrorCode, groups: Iterable[tuple[str, str, str, str]]) -> ListGroupsResponse:
    """groups: (group id, protocol type, state, group type)."""
    return ListGroupsResponse(
        version=version,
        throttle_time_ms=0,
        error_code=int(error),
        groups=[
            _Listed(group_id=g, protocol_type=pt, group_state=st, group_type=gt) for g, pt, st, gt in groups
        ],
    )


def delete_groups_response(version: int, results: list[tuple[str, ErrorCode]]) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(
        version=version,
        throttle_time_ms=0,
        results=[_Deleted(group_id=g, error_code=int(e)) for g, e in results],
    )


def _by_topic(items: Iterable[tuple[str, int, object]]) -> dict[str, list[tuple[int, object]]]:
    out: dict[str, list[tuple[int, object]]] = {}
    for topic, p, x in items:
        out.setdefault(topic, []).append((p, x))
    return out


def commit_response(version: int, results: list[tuple[str, int, ErrorCode]]) -> OffsetCommitResponseData:
    """Kept as rows (protocol/fastpath encodes them directly): kafka-python's objects would
    cost more than the rest of a commit."""
    return OffsetCommitResponseData(version, results)  # type: ignore[arg-type]


# (topic, partition, offset, leader_epoch, metadata, error)
FetchRow = tuple[str, int, int, int, str, ErrorCode]


def fetch_response_single(version: int, error: ErrorCode, rows: list[FetchRow]) -> OffsetFetchResponse:
    """OffsetFetch v0-v7: one group; the group error is top level from v2, per partition before."""
    topics = _fetch_topics(rows, _FetchTopic, _FetchPartition)
    return OffsetFetchResponse(version=version, throttle_time_ms=0, topics=topics, error_code=int(error), groups=[])


def fetch_group(group_id: str, error: ErrorCode, rows: list[FetchRow]) -> _FetchGroup:
    return _FetchGroup(group_id=group_id, error_code=int(error),
                       topics=_fetch_topics(rows, _FetchGroupTopic, _FetchGroupPartition))


def _fetch_topics(rows: list[FetchRow], topic: Any, partition: Any) -> list[Any]:
    """The rows grouped by topic, in the order their topics first appear, as OffsetFetch's
    `topic` and `partition` classes (v0-v7's or a v8+ group's)."""
    by_topic: dict[str, list[FetchRow]] = {}
    for row in rows:
        by_topic.setdefault(row[0], []).append(row)
    return [topic(name=t, partitions=[
        partition(partition_index=p, committed_offset=o, committed_leader_epoch=ep, metadata=meta, error_code=int(e))
        for _, p, o, ep, meta, e in parts]) for t, parts in by_topic.items()]


def fetch_response_multi(version: int, groups: list[_FetchGroup]) -> OffsetFetchResponse:
    return OffsetFetchResponse(version=version, throttle_time_ms=0, topics=[], error_code=0, groups=groups)


def offset_delete_response(
    version: int, error: ErrorCode, results: list[tuple[str, int, ErrorCode]]
) -> OffsetDeleteResponse:
    topics = [
        _DeleteTopic(name=t, partitions=[_DeletePartition(partition_index=p, error_code=int(e)) for p, e in parts])
        for t, parts in _by_topic(results).items()
    ]
    return OffsetDeleteResponse(version=version, error_code=int(error), throttle_time_ms=0, topics=topics)
