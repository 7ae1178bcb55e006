"""Who may read and write data: Metadata (DESCRIBE on each topic, CREATE to auto-create),
Produce (WRITE; a transactional one WRITE on its transactional id too), Fetch (READ; a follower
CLUSTER_ACTION) and ListOffsets (DESCRIBE)."""
from __future__ import annotations

import uuid
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.acl import CLUSTER_NAME, AclOperation
from kcoord.server.security.guard import (
    CLUSTER,
    CREATE,
    DESCRIBE,
    PASS,
    READ,
    TOPIC,
    TXN,
    WRITE,
    ZERO_UUID,
    Access,
    Guarded,
    clone,
    close_connection,
)


def topic_names_by_id(a: Access) -> dict[uuid.UUID, str]:
    return {t.topic_id: t.name for t in a.parts.topics.topics.values()}


def metadata(a: Access, req: Any, version: int) -> Guarded:
    parts = a.parts
    all_topics = req.topics is None or (version == 0 and not req.topics)
    include_topic_ops = version >= 8 and bool(getattr(req, "include_topic_authorized_operations", False))
    include_cluster_ops = 8 <= version <= 10 and bool(getattr(req, "include_cluster_authorized_operations", False))
    extra: list[Any] = []
    request = None
    if not all_topics:
        from kafka.protocol.metadata import MetadataResponse

        TopicOut = MetadataResponse.MetadataResponseTopic

        def error_entry(name: str | None, topic_id: uuid.UUID = ZERO_UUID) -> Any:
            return TopicOut(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=topic_id,
                            is_internal=False, partitions=[])
        by_id = topic_names_by_id(a)
        auto_create = parts.config["auto.create.topics.enable"] and (version < 4 or req.allow_auto_topic_creation)
        may_create_any: bool | None = None
        kept = []
        for wanted in req.topics:
            name, by_topic_id = wanted.name, False
            if name is None and version >= 10:
                name = by_id.get(wanted.topic_id)
                if name is None:  # unknown id: the handler answers UNKNOWN_TOPIC_ID
                    kept.append(wanted)
                    continue
                by_topic_id = True
            if not a.allowed(DESCRIBE, TOPIC, name):
                # not even whether it exists is told (Kafka: topic ids are not secret, names are)
                extra.append(error_entry(None, wanted.topic_id) if by_topic_id else error_entry(name))
                continue
            if auto_create and parts.topics.get(name) is None:
                if may_create_any is None:
                    may_create_any = a.cluster(CREATE, log=False)
                if not may_create_any and not a.allowed(CREATE, TOPIC, name):
                    extra.append(error_entry(name))
                    continue
            kept.append(wanted)
        if len(kept) != len(req.topics):
            request = clone(req, topics=kept)

    def finish(resp: Any) -> Any:
        if all_topics:  # a listing shows only what the principal may describe
            resp.topics = [t for t in resp.topics if a.allowed(DESCRIBE, TOPIC, t.name, log=False)]
        if include_topic_ops:
            for t in resp.topics:
                if t.error_code == ErrorCode.NONE and t.name is not None:
                    t.authorized_operations = a.operations(TOPIC, t.name)
        resp.topics = list(resp.topics) + extra
        if include_cluster_ops:
            resp.authorized_operations = (a.operations(CLUSTER, CLUSTER_NAME)
                                                  if a.cluster(DESCRIBE) else set())
        return resp

    return Guarded(request=request, after=finish)


def produce(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.server.handlers import produce

    if any(produce._is_transactional(p.records) for t in req.topic_data for p in t.partition_data):  # noqa: SLF001
        if req.transactional_id is None or not a.allowed(WRITE, TXN, req.transactional_id):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            if req.acks == 0:
                close_connection(f"{code.name} during produce request with acks=0")
            return Guarded(refusal=produce._whole_request_error(version, req, code))  # noqa: SLF001
    allowed = a.allowed_names(WRITE, TOPIC, (t.name for t in req.topic_data))
    denied = [t for t in req.topic_data if t.name not in allowed]
    if not denied:
        return PASS
    kept = [t for t in req.topic_data if t.name in allowed]
    from kcoord.protocol.data_fastpath import ProduceResponseData

    errors = [(t.name, [(p.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, [], None)
                        for p in t.partition_data]) for t in denied]

    def merge(resp: Any) -> Any:
        resp.topics = list(resp.topics) + errors
        return resp

    if req.acks == 0:  # Kafka appends what it may, then closes the connection (an error with acks=0)
        return Guarded(request=clone(req, topic_data=kept),
                       close="error during produce request with acks=0: TOPIC_AUTHORIZATION_FAILED")
    if not kept:
        return Guarded(refusal=ProduceResponseData(version, errors))
    return Guarded(request=clone(req, topic_data=kept), after=merge)


def fetch(a: Access, req: Any, version: int) -> Guarded:
    if version >= 15:  # a tagged field, absent (None) from consumers
        state = getattr(req, "replica_state", None)
        replica = state.replica_id if state is not None else -1
    else:
        replica = req.replica_id
    by_id = topic_names_by_id(a) if version >= 13 else {}

    def name_of(t: Any) -> str | None:
        return by_id.get(t.topic_id) if version >= 13 else t.topic

    if replica is not None and replica >= 0:  # a follower: CLUSTER_ACTION, or nothing at all
        if a.cluster(AclOperation.CLUSTER_ACTION):
            return PASS
        denied, kept = list(req.topics), []
    else:
        names = [n for n in (name_of(t) for t in req.topics) if n is not None]
        allowed = a.allowed_names(READ, TOPIC, names)
        denied = [t for t in req.topics if name_of(t) is not None and name_of(t) not in allowed]
        if not denied:
            return PASS
        kept = [t for t in req.topics if t not in denied]

    def topic_out(t: Any) -> tuple:  # a FetchResponseData topic (protocol/data_fastpath.py)
        parts = [(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, None, b"")
                 for p in t.partitions]  # empty, not null: Kafka's records (librdkafka refuses null)
        return (t.topic_id if version >= 13 else t.topic, parts)
    errors = [topic_out(t) for t in denied]

    def merge(resp: Any) -> Any:
        if resp.error_code == ErrorCode.NONE:
            resp.topics = list(resp.topics) + errors
        return resp

    return Guarded(request=clone(req, topics=kept), after=merge)


def list_offsets(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.consumer import ListOffsetsResponse

    allowed = a.allowed_names(DESCRIBE, TOPIC, (t.name for t in req.topics))
    denied = [t for t in req.topics if t.name not in allowed]
    if not denied:
        return PASS
    T = ListOffsetsResponse.ListOffsetsTopicResponse
    P = T.ListOffsetsPartitionResponse
    errors = [T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                           old_style_offsets=[], timestamp=-1, offset=-1, leader_epoch=-1)
                                         for p in t.partitions]) for t in denied]
    kept = [t for t in req.topics if t.name in allowed]

    def merge(resp: Any) -> Any:
        resp.topics = list(resp.topics) + errors
        return resp

    if not kept:
        return Guarded(refusal=ListOffsetsResponse(version=version, throttle_time_ms=0, topics=errors))
    return Guarded(request=clone(req, topics=kept), after=merge)


def offsets_for_leader_epoch(a: Access, req: Any, version: int) -> Guarded:
    """A follower (replica id >= 0, v3+) needs CLUSTER_ACTION; a consumer DESCRIBE on each
    topic (TOPIC_AUTHORIZATION_FAILED per partition otherwise), as Kafka authorizes it."""
    from kafka.protocol.consumer import OffsetForLeaderEpochResponse

    replica = getattr(req, "replica_id", -2) if version >= 3 else -2
    if replica is not None and replica >= 0:
        if a.cluster(AclOperation.CLUSTER_ACTION):
            return PASS
        allowed: set[str] = set()
    else:
        allowed = set(a.allowed_names(DESCRIBE, TOPIC, (t.topic for t in req.topics)))
    denied = [t for t in req.topics if t.topic not in allowed]
    if not denied:
        return PASS
    T = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
    P = T.EpochEndOffset
    errors = [T(topic=t.topic, partitions=[P(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, partition=p.partition,
                                             leader_epoch=-1, end_offset=-1) for p in t.partitions])
              for t in denied]
    kept = [t for t in req.topics if t.topic in allowed]

    def merge(resp: Any) -> Any:
        resp.topics = list(resp.topics) + errors
        return resp

    if not kept:
        return Guarded(refusal=OffsetForLeaderEpochResponse(version=version, throttle_time_ms=0, topics=errors))
    return Guarded(request=clone(req, topics=kept), after=merge)
