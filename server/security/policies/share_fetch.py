"""Who may use the share-partition APIs, as Kafka's KafkaApis decides it:

- ShareFetch / ShareAcknowledge: READ on the group (else the whole request is refused
  GROUP_AUTHORIZATION_FAILED), READ on each topic (its partitions are answered
  TOPIC_AUTHORIZATION_FAILED and never reach the share partitions).
- DescribeShareGroupOffsets: DESCRIBE on each group (that group answered
  GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic (its partitions TOPIC_AUTHORIZATION_FAILED).
- AlterShareGroupOffsets: READ on the group, READ on each topic.
- DeleteShareGroupOffsets: DELETE on the group, READ on each topic.
"""
from __future__ import annotations

from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.guard import (
    DELETE,
    DESCRIBE,
    GROUP,
    PASS,
    READ,
    TOPIC,
    Access,
    Guarded,
    clone,
    refused,
)

_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _topic_names(a: Access) -> dict[Any, str]:
    return {t.topic_id: t.name for t in a.parts.topics.topics.values()}


def _by_topic_id(a: Access, req: Any, version: int, response_topic: Any, make_partition: Any) -> Guarded:
    if not a.allowed(READ, GROUP, req.group_id):
        return refused(a, req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = _topic_names(a)
    denied = [t for t in req.topics or () if t.topic_id in names and not a.allowed(READ, TOPIC, names[t.topic_id])]
    if not denied:
        return PASS
    kept = [t for t in req.topics if t not in denied]

    def after(resp: Any) -> Any:
        resp.responses = list(resp.responses) + [
            response_topic(topic_id=t.topic_id, partitions=[make_partition(p.partition_index) for p in t.partitions])
            for t in denied]
        return resp
    return Guarded(request=clone(req, topics=kept), after=after)


def share_fetch(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.protocol.share_messages import ShareFetchResponse

    T = ShareFetchResponse.ShareFetchableTopicResponse
    P = T.PartitionData
    return _by_topic_id(a, req, version, T, lambda i: P(
        partition_index=i, error_code=_DENIED, error_message=None, acknowledge_error_code=_DENIED,
        acknowledge_error_message=None, current_leader=P.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
        records=b"", acquired_records=[]))


def share_acknowledge(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.protocol.share_messages import ShareAcknowledgeResponse

    T = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
    P = T.PartitionData
    return _by_topic_id(a, req, version, T, lambda i: P(
        partition_index=i, error_code=_DENIED, error_message=None,
        current_leader=P.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)))


def describe_share_group_offsets(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.protocol.share_messages import DescribeShareGroupOffsetsResponse as R

    G = R.DescribeShareGroupOffsetsResponseGroup
    T = G.DescribeShareGroupOffsetsResponseTopic
    P = T.DescribeShareGroupOffsetsResponsePartition
    groups = list(req.groups or ())
    denied_groups = {g.group_id for g in groups if not a.allowed(DESCRIBE, GROUP, g.group_id)}
    if not denied_groups and all(a.allowed(DESCRIBE, TOPIC, t.topic_name)
                                 for g in groups for t in g.topics or ()):
        return PASS

    def after(resp: Any) -> Any:
        out = []
        for g in groups:
            if g.group_id in denied_groups:
                out.append(G(group_id=g.group_id, topics=[], error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                             error_message=None))
        for g in resp.groups:
            for t in g.topics:
                if not a.allowed(DESCRIBE, TOPIC, t.topic_name, log=False):
                    t.partitions = [P(partition_index=p.partition_index, start_offset=-1, leader_epoch=-1, lag=-1,
                                      error_code=_DENIED, error_message=None) for p in t.partitions]
            out.append(g)
        resp.groups = out
        return resp
    return Guarded(request=clone(req, groups=[g for g in groups if g.group_id not in denied_groups]), after=after)


def _group_then_topics(op: Any) -> Any:
    def policy(a: Access, req: Any, version: int) -> Guarded:
        if not a.allowed(op, GROUP, req.group_id):
            return refused(a, req, version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        names = {t.topic_name for t in req.topics or ()}
        if a.allowed_names(READ, TOPIC, names) == names:
            return PASS
        return refused(a, req, version, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return policy


alter_share_group_offsets = _group_then_topics(READ)
delete_share_group_offsets = _group_then_topics(DELETE)
