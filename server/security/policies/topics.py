"""Who may create, delete and change topics, and describe the cluster and its partitions."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.acl import CLUSTER_NAME, AclOperation
from kcoord.server.security.guard import (
    ALTER,
    CLUSTER,
    CREATE,
    DELETE,
    DESCRIBE,
    PASS,
    TOPIC,
    ZERO_UUID,
    Access,
    Guarded,
    clone,
)
from kcoord.server.security.policies.data import topic_names_by_id


def create_topics(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.topics import CreateTopicsResponse

    names = [t.name for t in req.topics]
    if a.cluster(CREATE, log=False):
        may_create = set(names)
    else:
        may_create = a.allowed_names(CREATE, TOPIC, names)
    may_describe_configs = a.allowed_names(AclOperation.DESCRIBE_CONFIGS, TOPIC, names, log=False)
    Result = CreateTopicsResponse.CreatableTopicResult
    denied = [Result(name=t.name, topic_id=ZERO_UUID, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                     error_message="Authorization failed.",
                     topic_config_error_code=(0 if t.name in may_describe_configs
                                              else ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                     num_partitions=-1, replication_factor=-1, configs=[])
              for t in req.topics if t.name not in may_create and names.count(t.name) == 1]
    kept = [t for t in req.topics if t.name in may_create or names.count(t.name) > 1]

    def finish(resp: Any) -> Any:
        for r in resp.topics:
            if r.name not in may_describe_configs and r.error_code == ErrorCode.NONE:
                r.configs = []  # its configs are not shown to who may not describe them
                r.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        resp.topics = list(resp.topics) + denied
        return resp

    if not kept:
        return Guarded(refusal=CreateTopicsResponse(version=version, throttle_time_ms=0, topics=denied))
    return Guarded(request=clone(req, topics=kept) if denied else None, after=finish)


def delete_topics(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.topics import DeleteTopicsResponse

    Result = DeleteTopicsResponse.DeletableTopicResult
    by_id = topic_names_by_id(a) if version >= 6 else {}
    entries = list(req.topics) if version >= 6 else list(req.topic_names)
    kept, errors = [], []
    for e in entries:
        if version >= 6:
            by_topic_id = e.topic_id is not None and e.topic_id != ZERO_UUID
            name = by_id.get(e.topic_id) if by_topic_id else e.name
        else:
            by_topic_id, name = False, e
        if name is None:  # an unknown topic id: the handler answers UNKNOWN_TOPIC_ID
            kept.append(e)
            continue
        if by_topic_id and not a.allowed(DESCRIBE, TOPIC, name):
            errors.append(Result(name=None, topic_id=e.topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                 error_message=None))
        elif not a.allowed(DELETE, TOPIC, name):
            errors.append(Result(name=name, topic_id=e.topic_id if by_topic_id else ZERO_UUID,
                                 error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None))
        else:
            kept.append(e)
    if not errors:
        return PASS

    def merge(resp: Any) -> Any:
        resp.responses = list(resp.responses) + errors
        return resp

    if not kept:
        return Guarded(refusal=DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=errors))
    field = "topics" if version >= 6 else "topic_names"
    return Guarded(request=clone(req, **{field: kept}), after=merge)


def delete_records(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.topics import DeleteRecordsResponse

    T = DeleteRecordsResponse.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    return per_topic(a, req, version, DELETE, "topics", lambda t: T(name=t.name, partitions=[
        P(partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for p in t.partitions]), "topics", lambda v, errors: DeleteRecordsResponse(version=v, throttle_time_ms=0,
                                                                                   topics=errors))


def create_partitions(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.topics import CreatePartitionsResponse

    R = CreatePartitionsResponse.CreatePartitionsTopicResult
    return per_topic(a, req, version, ALTER, "topics", lambda t: R(
        name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        error_message="The topic authorization is failed."), "results",
        lambda v, errors: CreatePartitionsResponse(version=v, throttle_time_ms=0, results=errors))


def per_topic(a: Access, req: Any, version: int, op: AclOperation, field: str, denied_entry: Callable[[Any], Any],
               response_field: str, only_errors: Callable[[int, list[Any]], Any]) -> Guarded:
    """The usual shape: each topic of req.<field> needs `op`; the others are answered with
    `denied_entry(topic)` in resp.<response_field>."""
    topics = list(getattr(req, field))
    allowed = a.allowed_names(op, TOPIC, (t.name for t in topics))
    denied = [t for t in topics if t.name not in allowed]
    if not denied:
        return PASS
    errors = [denied_entry(t) for t in denied]
    kept = [t for t in topics if t.name in allowed]

    def merge(resp: Any) -> Any:
        setattr(resp, response_field, list(getattr(resp, response_field)) + errors)
        return resp

    if not kept:
        return Guarded(refusal=only_errors(version, errors))
    return Guarded(request=clone(req, **{field: kept}), after=merge)


def describe_cluster(a: Access, req: Any, version: int) -> Guarded:
    if not req.include_cluster_authorized_operations:
        return PASS

    def ops(resp: Any) -> Any:
        resp.authorized_operations = a.operations(CLUSTER, CLUSTER_NAME) if a.cluster(DESCRIBE) else set()
        return resp
    return Guarded(after=ops)


def describe_topic_partitions(a: Access, req: Any, version: int) -> Guarded:
    from kcoord.server.security.acl import bit_field

    named = bool(req.topics)  # every requested name is answered by the handler; a refused one is then blanked
    for t in req.topics if named else ():
        a.allowed(DESCRIBE, TOPIC, t.name)  # (the denial's log line)

    def finish(resp: Any) -> Any:
        out = []
        for t in resp.topics:
            if t.name is not None and not a.allowed(DESCRIBE, TOPIC, t.name, log=False):
                if named:  # named and refused: TOPIC_AUTHORIZATION_FAILED, without its id or partitions
                    t.error_code, t.topic_id, t.partitions = ErrorCode.TOPIC_AUTHORIZATION_FAILED, ZERO_UUID, []
                    t.is_internal = False
                    t.topic_authorized_operations = -2**31
                    out.append(t)
                continue  # a listing shows only what may be described
            if t.error_code == ErrorCode.NONE and t.name is not None:
                t.topic_authorized_operations = bit_field({AclOperation(op) for op in a.operations(TOPIC, t.name)})
            out.append(t)
        resp.topics = out
        return resp

    return Guarded(after=finish)
