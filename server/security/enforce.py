"""Authorization, API by API, as Kafka's KafkaApis does it: one table (POLICIES) from API key
to its policy, applied by the dispatcher around the API's handler when an authorizer is
configured (without one, nothing here runs: the routes are the plain handlers, and the hot
Heartbeat / OffsetCommit paths stay direct).

A policy sees the request before its handler and says one of three things (a Guarded):
- `refusal`: the whole request is refused; this response is the answer (e.g. a JoinGroup for
  a group the principal may not READ gets GROUP_AUTHORIZATION_FAILED);
- `request`: what the handler gets, with the parts the principal may not touch taken out (the
  topics of an OffsetCommit it may not READ), so a denied part changes nothing;
- `after`: how the handler's response gets the refused parts back, with their error codes
  (TOPIC_AUTHORIZATION_FAILED for those topics), or loses what must not be shown (topics a
  principal may not DESCRIBE are left out of Metadata and of group listings, never named).

Every served API must have an entry (tests/unit/test_authorizer.py checks it); an API
without one is refused outright while an authorizer is configured.
"""
from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.api import ApiKey
from protocol.errors import ErrorCode
from server.deferred import Deferred
from server.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType

if TYPE_CHECKING:
    from server.broker import Broker
    from server.context import RequestContext
    from server.security.authorizer import Authorizer
    from server.session import Session

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                                AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE)
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
ZERO_UUID = uuid.UUID(int=0)


class Access:
    """The authorizer as seen by one request: its principal, client host and API."""

    __slots__ = ("authorizer", "principal", "host", "api", "broker")

    def __init__(self, authorizer: Authorizer, principal: str, host: str, api: str, broker: Broker) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.host = host
        self.api = api
        self.broker = broker

    def allowed(self, op: AclOperation, rtype: ResourceType, name: str, log: bool = True) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rtype, name, self.api, log)

    def cluster(self, op: AclOperation, log: bool = True) -> bool:
        return self.allowed(op, CLUSTER, CLUSTER_NAME, log)

    def allowed_names(self, op: AclOperation, rtype: ResourceType, names: Iterable[str], log: bool = True) -> set[str]:
        return {n for n in set(names) if self.allowed(op, rtype, n, log)}

    def operations(self, rtype: ResourceType, name: str) -> set[int]:
        """authorized_operations as kafka-python encodes it: the set of allowed operation codes."""
        return {int(op) for op in SUPPORTED_OPERATIONS[rtype]
                if self.authorizer.authorize(self.principal, self.host, op, rtype, name, log_denied=False)}


@dataclass(slots=True)
class Guarded:
    request: Any = None
    refusal: Any = None
    after: Callable[[Any], Any] | None = None
    close: str | None = None  # close the connection once the handler ran (Produce acks=0 with an error)


Policy = Callable[[Access, Any, int], Guarded]


def then(result: Any, fn: Callable[[Any], Any]) -> Any:
    """`fn` applied to a handler's answer, which may come later (Deferred, awaitable)."""
    if isinstance(result, Deferred):
        out: Deferred[Any] = Deferred()
        result.add_callback(lambda r: out.complete(r if _passthrough(r) else fn(r)))
        return out
    if inspect.isawaitable(result):
        async def later() -> Any:
            r = await result
            return r if _passthrough(r) else fn(r)
        return later()
    return result if _passthrough(result) else fn(result)


def _passthrough(r: Any) -> bool:
    from server.dispatch import CloseConnection  # the dispatcher imports this module
    from server.handlers.registry import NO_RESPONSE

    return r is None or r is NO_RESPONSE or isinstance(r, CloseConnection | bytes)


_PASS = Guarded()  # the usual decision: nothing to change


def _apply(policy: Policy | None, name: str, access: Access, handler: Callable[..., Any], args: tuple[Any, ...],
           req: Any, version: int) -> Any:
    if policy is None:
        _close(f"{name} has no authorization policy; refused while an authorizer is configured")
    g = policy(access, req, version)  # type: ignore[misc]
    if g is _PASS:
        return handler(*args, req, version)
    if g.refusal is not None:
        return g.refusal
    result = handler(*args, g.request if g.request is not None else req, version)
    if g.close is not None:
        _close(g.close)
    return result if g.after is None else then(result, g.after)


def guarded(api: ApiKey, handler: Callable[..., Any]) -> Callable[..., Any]:
    """The handler (ctx, request, version) with API `api`'s policy in front of it."""
    policy = POLICIES.get(api)
    name = _api_name(api)

    def handle(ctx: RequestContext, req: Any, version: int) -> Any:
        authorizer = ctx.broker.security.authorizer
        if authorizer is None:  # not configured after all (tests build dispatchers by hand)
            return handler(ctx, req, version)
        access = Access(authorizer, ctx.principal, ctx.client_host, name, ctx.broker)
        return _apply(policy, name, access, handler, (ctx,), req, version)

    handle.__name__ = f"authorized_{getattr(handler, '__name__', 'handler')}"
    return handle


def guarded_direct(api: ApiKey, direct: Callable[..., Any], client: Callable[[], Session | str | None]
                   ) -> Callable[..., Any]:
    """A direct route (broker, request, version) with its policy in front: the hot Heartbeat and
    OffsetCommit stay off the RequestContext path when authorizing; `client()` is the
    connection the dispatcher is serving. ALLOWED_AS_IS short-cuts the usual case (everything
    in the request allowed) to a few cached lookups."""
    policy = POLICIES.get(api)
    quick = ALLOWED_AS_IS.get(api)
    name = _api_name(api)

    def handle(broker: Broker, req: Any, version: int) -> Any:
        authorizer = broker.security.authorizer
        if authorizer is None:
            return direct(broker, req, version)
        c = client()
        if c is None or type(c) is str:
            principal, host = "User:ANONYMOUS", c or ""
        else:
            principal, host = c.principal, c.host  # type: ignore[union-attr]
        if quick is not None and quick(authorizer, principal, host, req, name):
            return direct(broker, req, version)
        return _apply(policy, name, Access(authorizer, principal, host, name, broker), direct, (broker,), req, version)

    return handle


def _api_name(api: int) -> str:
    from protocol.api import API_TABLE

    spec = API_TABLE.get(api)
    return spec.name if spec is not None else str(api)


def _clone(obj: Any, **changes: Any) -> Any:
    """A shallow copy of a kafka-python request with some fields replaced (the original is
    left alone: it may be what a log line or a retry looks at)."""
    import copy

    out = copy.copy(obj)
    for k, v in changes.items():
        setattr(out, k, v)
    return out


# ---- responses that refuse a whole request (Kafka's getErrorResponse of each request) ----


def _join_error(version: int, code: ErrorCode) -> Any:
    from kafka.protocol.consumer import JoinGroupResponse

    return JoinGroupResponse(version=version, throttle_time_ms=0, error_code=int(code), generation_id=-1,
                             protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
                             skip_assignment=False, member_id="", members=[])


def _sync_error(version: int, code: ErrorCode) -> Any:
    from kafka.protocol.consumer import SyncGroupResponse

    return SyncGroupResponse(version=version, throttle_time_ms=0, error_code=int(code), protocol_type=None,
                             protocol_name=None, assignment=b"")


def _heartbeat_error(version: int, code: ErrorCode) -> Any:
    from kafka.protocol.consumer import HeartbeatResponse

    return HeartbeatResponse(version=version, throttle_time_ms=0, error_code=int(code))


def _leave_error(version: int, code: ErrorCode) -> Any:
    from kafka.protocol.consumer import LeaveGroupResponse

    return LeaveGroupResponse(version=version, throttle_time_ms=0, error_code=int(code), members=[])


# ---- group APIs ----


def _whole_group(op: AclOperation, error: Callable[[int, ErrorCode], Any]) -> Policy:
    def policy(a: Access, req: Any, version: int) -> Guarded:
        if a.allowed(op, GROUP, req.group_id):
            return _PASS
        return Guarded(refusal=error(version, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    return policy


def _offset_commit(a: Access, req: Any, version: int) -> Guarded:
    from server.group.responses import commit_response

    if not a.allowed(READ, GROUP, req.group_id):
        rows = [(t.name, p.partition_index, ErrorCode.GROUP_AUTHORIZATION_FAILED) for t in req.topics for p in t.partitions]
        return Guarded(refusal=commit_response(version, rows))
    topics = req.topics
    if len(topics) == 1 and a.allowed(READ, TOPIC, topics[0].name):  # the usual commit
        return _PASS
    allowed = a.allowed_names(READ, TOPIC, (t.name for t in req.topics))
    if len(allowed) == len({t.name for t in req.topics}):
        return _PASS
    denied = [(t.name, p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
              for t in req.topics if t.name not in allowed for p in t.partitions]
    kept = [t for t in req.topics if t.name in allowed]
    if not kept:
        return Guarded(refusal=commit_response(version, denied))
    return Guarded(request=_clone(req, topics=kept), after=lambda r: commit_response(version, r.rows + denied))


def _offset_fetch(a: Access, req: Any, version: int) -> Guarded:
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
            kept.append(_clone(g, topics=topics) if g.topics is not None else g)

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
        return Guarded(request=_clone(req, groups=kept), after=merge)
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
    return Guarded(request=_clone(req, topics=topics) if req.topics is not None else None, after=merge_single)


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


def _offset_delete(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.consumer import OffsetDeleteResponse

    T = OffsetDeleteResponse.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition
    if not a.allowed(DELETE, GROUP, req.group_id):
        return Guarded(refusal=OffsetDeleteResponse(version=version, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                                    throttle_time_ms=0, topics=[]))
    allowed = a.allowed_names(READ, TOPIC, (t.name for t in req.topics))
    denied = [T(name=t.name, partitions=[P(partition_index=p.partition_index,
                                           error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions])
              for t in req.topics if t.name not in allowed]
    if not denied:
        return _PASS
    kept = [t for t in req.topics if t.name in allowed]

    def merge(resp: Any) -> Any:
        if resp.error_code == ErrorCode.NONE:
            resp.topics = list(resp.topics) + denied
        return resp

    if not kept:
        return Guarded(refusal=OffsetDeleteResponse(version=version, error_code=0, throttle_time_ms=0, topics=denied))
    return Guarded(request=_clone(req, topics=kept), after=merge)


def _describe_groups(a: Access, req: Any, version: int) -> Guarded:
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
    return Guarded(request=_clone(req, groups=kept) if denied else None, after=merge)


def _list_groups(a: Access, req: Any, version: int) -> Guarded:
    if a.cluster(DESCRIBE, log=False):  # with DESCRIBE on the cluster, every group is listed
        return _PASS

    def keep_describable(resp: Any) -> Any:
        resp.groups = [g for g in resp.groups if a.allowed(DESCRIBE, GROUP, g.group_id, log=False)]
        return resp

    return Guarded(after=keep_describable)


def _delete_groups(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.groups import DeleteGroupsResponse

    names = list(dict.fromkeys(req.groups_names))
    denied = [g for g in names if not a.allowed(DELETE, GROUP, g)]
    if not denied:
        return _PASS
    errors = [DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
              for g in denied]
    kept = [g for g in names if g not in denied]

    def merge(resp: Any) -> Any:
        resp.results = list(resp.results) + errors
        return resp

    if not kept:
        return Guarded(refusal=DeleteGroupsResponse(version=version, throttle_time_ms=0, results=errors))
    return Guarded(request=_clone(req, groups_names=kept), after=merge)


def _find_coordinator(a: Access, req: Any, version: int) -> Guarded:
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
            return _PASS
        return Guarded(refusal=FindCoordinatorResponse(version=version, throttle_time_ms=0, error_code=int(code),
                                                       error_message=messages[code], node_id=-1, host="", port=-1))
    codes = {k: refused(k) for k in req.coordinator_keys}
    if not any(codes.values()):
        return _PASS
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
    return Guarded(request=_clone(req, coordinator_keys=kept), after=merge)


# ---- topics and data ----


def _topic_names_by_id(a: Access) -> dict[uuid.UUID, str]:
    return {t.topic_id: t.name for t in a.broker.topics.topics.values()}


def _metadata(a: Access, req: Any, version: int) -> Guarded:
    broker = a.broker
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
        by_id = _topic_names_by_id(a)
        auto_create = broker.config["auto.create.topics.enable"] and (version < 4 or req.allow_auto_topic_creation)
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
            if auto_create and broker.topics.get(name) is None:
                if may_create_any is None:
                    may_create_any = a.cluster(CREATE, log=False)
                if not may_create_any and not a.allowed(CREATE, TOPIC, name):
                    extra.append(error_entry(name))
                    continue
            kept.append(wanted)
        if len(kept) != len(req.topics):
            request = _clone(req, topics=kept)

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


def _produce(a: Access, req: Any, version: int) -> Guarded:
    from server.handlers import produce

    if any(produce._is_transactional(p.records) for t in req.topic_data for p in t.partition_data):  # noqa: SLF001
        if req.transactional_id is None or not a.allowed(WRITE, TXN, req.transactional_id):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            if req.acks == 0:
                _close(f"{code.name} during produce request with acks=0")
            return Guarded(refusal=produce._whole_request_error(version, req, code))  # noqa: SLF001
    allowed = a.allowed_names(WRITE, TOPIC, (t.name for t in req.topic_data))
    denied = [t for t in req.topic_data if t.name not in allowed]
    if not denied:
        return _PASS
    kept = [t for t in req.topic_data if t.name in allowed]
    from protocol.data_fastpath import ProduceResponseData

    errors = [(t.name, [(p.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, [], None)
                        for p in t.partition_data]) for t in denied]

    def merge(resp: Any) -> Any:
        resp.topics = list(resp.topics) + errors
        return resp

    if req.acks == 0:  # Kafka appends what it may, then closes the connection (an error with acks=0)
        return Guarded(request=_clone(req, topic_data=kept),
                       close="error during produce request with acks=0: TOPIC_AUTHORIZATION_FAILED")
    if not kept:
        return Guarded(refusal=ProduceResponseData(version, errors))
    return Guarded(request=_clone(req, topic_data=kept), after=merge)


def _close(reason: str) -> None:
    from server.dispatch import CloseConnection

    raise CloseConnection(reason)


def _fetch(a: Access, req: Any, version: int) -> Guarded:
    if version >= 15:  # a tagged field, absent (None) from consumers
        state = getattr(req, "replica_state", None)
        replica = state.replica_id if state is not None else -1
    else:
        replica = req.replica_id
    by_id = _topic_names_by_id(a) if version >= 13 else {}

    def name_of(t: Any) -> str | None:
        return by_id.get(t.topic_id) if version >= 13 else t.topic

    if replica is not None and replica >= 0:  # a follower: CLUSTER_ACTION, or nothing at all
        if a.cluster(AclOperation.CLUSTER_ACTION):
            return _PASS
        denied, kept = list(req.topics), []
    else:
        names = [n for n in (name_of(t) for t in req.topics) if n is not None]
        allowed = a.allowed_names(READ, TOPIC, names)
        denied = [t for t in req.topics if name_of(t) is not None and name_of(t) not in allowed]
        if not denied:
            return _PASS
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

    return Guarded(request=_clone(req, topics=kept), after=merge)


def _list_offsets(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.consumer import ListOffsetsResponse

    allowed = a.allowed_names(DESCRIBE, TOPIC, (t.name for t in req.topics))
    denied = [t for t in req.topics if t.name not in allowed]
    if not denied:
        return _PASS
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
    return Guarded(request=_clone(req, topics=kept), after=merge)


def _create_topics(a: Access, req: Any, version: int) -> Guarded:
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
    return Guarded(request=_clone(req, topics=kept) if denied else None, after=finish)


def _delete_topics(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.topics import DeleteTopicsResponse

    Result = DeleteTopicsResponse.DeletableTopicResult
    by_id = _topic_names_by_id(a) if version >= 6 else {}
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
        return _PASS

    def merge(resp: Any) -> Any:
        resp.responses = list(resp.responses) + errors
        return resp

    if not kept:
        return Guarded(refusal=DeleteTopicsResponse(version=version, throttle_time_ms=0, responses=errors))
    field = "topics" if version >= 6 else "topic_names"
    return Guarded(request=_clone(req, **{field: kept}), after=merge)


def _delete_records(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.topics import DeleteRecordsResponse

    T = DeleteRecordsResponse.DeleteRecordsTopicResult
    P = T.DeleteRecordsPartitionResult
    return _per_topic(a, req, version, DELETE, "topics", lambda t: T(name=t.name, partitions=[
        P(partition_index=p.partition_index, low_watermark=-1, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for p in t.partitions]), "topics", lambda v, errors: DeleteRecordsResponse(version=v, throttle_time_ms=0,
                                                                                   topics=errors))


def _create_partitions(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.topics import CreatePartitionsResponse

    R = CreatePartitionsResponse.CreatePartitionsTopicResult
    return _per_topic(a, req, version, ALTER, "topics", lambda t: R(
        name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        error_message="The topic authorization is failed."), "results",
        lambda v, errors: CreatePartitionsResponse(version=v, throttle_time_ms=0, results=errors))


def _per_topic(a: Access, req: Any, version: int, op: AclOperation, field: str, denied_entry: Callable[[Any], Any],
               response_field: str, only_errors: Callable[[int, list[Any]], Any]) -> Guarded:
    """The usual shape: each topic of req.<field> needs `op`; the others are answered with
    `denied_entry(topic)` in resp.<response_field>."""
    topics = list(getattr(req, field))
    allowed = a.allowed_names(op, TOPIC, (t.name for t in topics))
    denied = [t for t in topics if t.name not in allowed]
    if not denied:
        return _PASS
    errors = [denied_entry(t) for t in denied]
    kept = [t for t in topics if t.name in allowed]

    def merge(resp: Any) -> Any:
        setattr(resp, response_field, list(getattr(resp, response_field)) + errors)
        return resp

    if not kept:
        return Guarded(refusal=only_errors(version, errors))
    return Guarded(request=_clone(req, **{field: kept}), after=merge)


# ConfigResource types: TOPIC 2, BROKER 4, BROKER_LOGGER 8, GROUP 32 (Kafka's ConfigResource.Type)
_CONFIG_RESOURCES = {2: (TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                     4: (CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                     8: (CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                     32: (GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED)}


def _configs(op: AclOperation, result_field: str, result_class: Callable[[], Any]) -> Policy:
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: DESCRIBE_CONFIGS or ALTER_CONFIGS
    on each resource (the cluster for a broker or broker logger)."""
    def policy(a: Access, req: Any, version: int) -> Guarded:
        response_cls, entry_cls = result_class()

        def permitted(r: Any) -> ErrorCode | None:
            rtype, error = _CONFIG_RESOURCES.get(r.resource_type, (None, None))
            if rtype is None:
                return None  # an unknown type: the handler answers it
            name = CLUSTER_NAME if rtype == CLUSTER else r.resource_name
            return None if a.allowed(op, rtype, name) else error
        codes = [permitted(r) for r in req.resources]
        if not any(codes):
            return _PASS
        errors = []
        for r, code in zip(req.resources, codes, strict=True):
            if code is not None:
                entry = entry_cls(error_code=int(code), error_message=None, resource_type=r.resource_type,
                                  resource_name=r.resource_name)
                if result_field == "results":
                    entry.configs = []
                errors.append(entry)
        kept = [r for r, code in zip(req.resources, codes, strict=True) if code is None]

        def merge(resp: Any) -> Any:
            setattr(resp, result_field, list(getattr(resp, result_field)) + errors)
            return resp

        if not kept:
            return Guarded(refusal=response_cls(version=version, throttle_time_ms=0, **{result_field: errors}))
        return Guarded(request=_clone(req, resources=kept), after=merge)
    return policy


def _describe_configs_classes() -> tuple[Any, Any]:
    from kafka.protocol.admin.configs import DescribeConfigsResponse

    return DescribeConfigsResponse, DescribeConfigsResponse.DescribeConfigsResult


def _alter_configs_classes() -> tuple[Any, Any]:
    from kafka.protocol.admin.configs import AlterConfigsResponse

    return AlterConfigsResponse, AlterConfigsResponse.AlterConfigsResourceResponse


def _incremental_alter_configs_classes() -> tuple[Any, Any]:
    from kafka.protocol.admin.configs import IncrementalAlterConfigsResponse

    return IncrementalAlterConfigsResponse, IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


def _describe_cluster(a: Access, req: Any, version: int) -> Guarded:
    if not req.include_cluster_authorized_operations:
        return _PASS

    def ops(resp: Any) -> Any:
        resp.authorized_operations = a.operations(CLUSTER, CLUSTER_NAME) if a.cluster(DESCRIBE) else set()
        return resp
    return Guarded(after=ops)


def _describe_topic_partitions(a: Access, req: Any, version: int) -> Guarded:
    from server.security.acl import bit_field

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


def _init_producer_id(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.producer import InitProducerIdResponse

    def refuse(code: ErrorCode) -> Guarded:
        return Guarded(refusal=InitProducerIdResponse(version=version, throttle_time_ms=0, error_code=int(code),
                                                      producer_id=-1, producer_epoch=-1))
    if req.transactional_id is not None:
        if not a.allowed(WRITE, TXN, req.transactional_id):
            return refuse(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return _PASS
    if a.cluster(AclOperation.IDEMPOTENT_WRITE, log=False) or \
            a.authorizer.authorize_by_resource_type(a.principal, a.host, WRITE, TOPIC):
        return _PASS
    return refuse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


# ---- transactions (Kafka's KafkaApis.handle*TxnRequest, handleDescribe/ListTransactions) ----


def _add_partitions_to_txn(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.producer.transaction import AddPartitionsToTxnResponse

    from server.data_plane import partition_log

    Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
    TopicResult = Result.AddPartitionsToTxnTopicResult
    PartResult = TopicResult.AddPartitionsToTxnPartitionResult
    if version >= 4:  # from brokers (KIP-890): CLUSTER_ACTION
        if a.cluster(AclOperation.CLUSTER_ACTION):
            return _PASS
        return Guarded(refusal=AddPartitionsToTxnResponse(
            version=version, throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[]))
    partitions = list(dict.fromkeys((t.name, p) for t in req.v3_and_below_topics for p in t.partitions))

    def answer(errors: dict[tuple[str, int], ErrorCode]) -> Guarded:
        by_topic: dict[str, list[Any]] = {}
        for (t, p), code in errors.items():
            by_topic.setdefault(t, []).append(PartResult(partition_index=p, partition_error_code=int(code)))
        return Guarded(refusal=AddPartitionsToTxnResponse(version=version, throttle_time_ms=0, results_by_topic_v3_and_below=[
            TopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]))

    if not a.allowed(WRITE, TXN, req.v3_and_below_transactional_id):
        return answer(dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    broker = a.broker
    internal = {t for t, _ in partitions if (topic := broker.topics.get(t)) is not None and topic.internal}
    allowed = a.allowed_names(WRITE, TOPIC, (t for t, _ in partitions if t not in internal))
    if not internal and len(allowed) == len({t for t, _ in partitions}):
        return _PASS
    errors: dict[tuple[str, int], ErrorCode] = {}
    for t, p in partitions:  # denied, then missing; the others are not attempted
        topic = broker.topics.get(t)
        if t not in allowed:
            errors[(t, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None or partition_log(broker, topic, p) is None:
            errors[(t, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            errors[(t, p)] = ErrorCode.OPERATION_NOT_ATTEMPTED
    return answer(errors)


def _add_offsets_to_txn(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.producer.transaction import AddOffsetsToTxnResponse

    if not a.allowed(WRITE, TXN, req.transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not a.allowed(READ, GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        return _PASS
    return Guarded(refusal=AddOffsetsToTxnResponse(version=version, throttle_time_ms=0, error_code=int(code)))


def _end_txn(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.producer.transaction import EndTxnResponse

    if a.allowed(WRITE, TXN, req.transactional_id):
        return _PASS
    return Guarded(refusal=EndTxnResponse(version=version, throttle_time_ms=0,
                                          error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                          producer_id=-1, producer_epoch=-1))


def _txn_offset_commit(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.producer.transaction import TxnOffsetCommitResponse

    T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition

    def rows(topics: Any, code: ErrorCode) -> list[Any]:
        return [T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=int(code))
                                           for p in t.partitions]) for t in topics]

    def whole(code: ErrorCode) -> Guarded:
        return Guarded(refusal=TxnOffsetCommitResponse(version=version, throttle_time_ms=0,
                                                       topics=rows(req.topics, code)))

    if not a.allowed(WRITE, TXN, req.transactional_id):
        return whole(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not a.allowed(READ, GROUP, req.group_id):
        return whole(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    allowed = a.allowed_names(READ, TOPIC, (t.name for t in req.topics))
    denied = [t for t in req.topics if t.name not in allowed]
    if not denied:
        return _PASS
    errors = rows(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    kept = [t for t in req.topics if t.name in allowed]
    if not kept:
        return Guarded(refusal=TxnOffsetCommitResponse(version=version, throttle_time_ms=0, topics=errors))

    def merge(resp: Any) -> Any:
        resp.topics = list(resp.topics) + errors
        return resp
    return Guarded(request=_clone(req, topics=kept), after=merge)


def _describe_producers(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.transactions import DescribeProducersResponse

    T = DescribeProducersResponse.TopicResponse
    P = T.PartitionResponse
    return _per_topic(a, req, version, READ, "topics", lambda t: T(name=t.name, partitions=[
        P(partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None, active_producers=[])
        for p in t.partition_indexes]), "topics",
        lambda v, errors: DescribeProducersResponse(version=v, throttle_time_ms=0, topics=errors))


def _describe_transactions(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.transactions import DescribeTransactionsResponse

    State = DescribeTransactionsResponse.TransactionState
    ids = list(req.transactional_ids)
    denied = {t for t in ids if not a.allowed(DESCRIBE, TXN, t)}

    def refused(tid: str) -> Any:
        return State(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=tid,
                     transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0,
                     producer_epoch=0, topics=[])

    def finish(resp: Any) -> Any:
        got = iter(resp.transaction_states)
        out = []
        for tid in ids:  # in the request's order
            if tid in denied:
                out.append(refused(tid))
                continue
            s = next(got)
            # only the partitions of topics the principal may describe
            s.topics = [t for t in s.topics if a.allowed(DESCRIBE, TOPIC, t.topic, log=False)]
            out.append(s)
        resp.transaction_states = out
        return resp

    kept = [t for t in ids if t not in denied]
    if not kept:
        return Guarded(refusal=DescribeTransactionsResponse(version=version, throttle_time_ms=0,
                                                            transaction_states=[refused(t) for t in ids]))
    return Guarded(request=_clone(req, transactional_ids=kept) if denied else None, after=finish)


def _list_transactions(a: Access, req: Any, version: int) -> Guarded:
    def keep_describable(resp: Any) -> Any:
        resp.transaction_states = [s for s in resp.transaction_states
                                   if a.allowed(DESCRIBE, TXN, s.transactional_id, log=False)]
        return resp
    return Guarded(after=keep_describable)


# ---- the consumer group protocol (KIP-848) ----


def _consumer_group_heartbeat(a: Access, req: Any, version: int) -> Guarded:
    from protocol.fastpath import ConsumerGroupHeartbeatResponseData

    if not a.allowed(READ, GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    elif req.subscribed_topic_names and \
            len(a.allowed_names(DESCRIBE, TOPIC, req.subscribed_topic_names)) < len(set(req.subscribed_topic_names)):
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED  # a subscription may not name what it may not see
    else:
        return _PASS
    return Guarded(refusal=ConsumerGroupHeartbeatResponseData(version, int(code), None, None, 0, 0, None))


def _consumer_group_describe(a: Access, req: Any, version: int) -> Guarded:
    from protocol.messages import ConsumerGroupDescribeResponse
    from server.security.acl import bit_field

    Described = ConsumerGroupDescribeResponse.DescribedGroup
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
                topics = {tp.topic_name for m in g.members for tp in
                          list(m.assignment.topic_partitions) + list(m.target_assignment.topic_partitions)}
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
        return Guarded(refusal=ConsumerGroupDescribeResponse(version=version, throttle_time_ms=0, groups=errors))
    return Guarded(request=_clone(req, group_ids=kept) if denied else None, after=finish)


# ---- security and cluster APIs ----


def _cluster_op(op: AclOperation, refuse: Callable[[Any, int, str], Any]) -> Policy:
    def policy(a: Access, req: Any, version: int) -> Guarded:
        if a.cluster(op):
            return _PASS
        return Guarded(refusal=refuse(req, version, f"Request {a.api} is not authorized."))
    return policy


def _describe_acls_refused(req: Any, version: int, message: str) -> Any:
    from kafka.protocol.admin.acl import DescribeAclsResponse

    return DescribeAclsResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                error_message=message, resources=[])


def _create_acls_refused(req: Any, version: int, message: str) -> Any:
    from kafka.protocol.admin.acl import CreateAclsResponse

    return CreateAclsResponse(version=version, throttle_time_ms=0, results=[
        CreateAclsResponse.AclCreationResult(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=message)
        for _ in req.creations])


def _delete_acls_refused(req: Any, version: int, message: str) -> Any:
    from kafka.protocol.admin.acl import DeleteAclsResponse

    return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=[
        DeleteAclsResponse.DeleteAclsFilterResult(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                  error_message=message, matching_acls=[])
        for _ in req.filters])


def _describe_scram_refused(req: Any, version: int, message: str) -> Any:
    from kafka.protocol.admin.users import DescribeUserScramCredentialsResponse

    return DescribeUserScramCredentialsResponse(version=version, throttle_time_ms=0,
                                                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                error_message=message, results=[])


def _alter_scram_refused(req: Any, version: int, message: str) -> Any:
    from kafka.protocol.admin.users import AlterUserScramCredentialsResponse

    names = list(dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))
    return AlterUserScramCredentialsResponse(version=version, throttle_time_ms=0, results=[
        AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(
            user=n, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=message) for n in names])


def _describe_log_dirs_refused(req: Any, version: int, message: str) -> Any:
    from kafka.protocol.admin.cluster import DescribeLogDirsResponse

    return DescribeLogDirsResponse(version=version, throttle_time_ms=0,
                                   error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])


def _elect_leaders_refused(req: Any, version: int, message: str) -> Any:
    from kafka.protocol.admin.topics import ElectLeadersResponse

    R = ElectLeadersResponse.ReplicaElectionResult
    return ElectLeadersResponse(version=version, throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                replica_election_results=[R(topic=t.topic, partition_result=[
                                    R.PartitionResult(partition_id=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                      error_message=None) for p in t.partitions])
                                    for t in req.topic_partitions or []])


def _list_reassignments_refused(req: Any, version: int, message: str) -> Any:
    from kafka.protocol.admin.topics import ListPartitionReassignmentsResponse

    return ListPartitionReassignmentsResponse(version=version, throttle_time_ms=0,
                                              error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                              error_message=message, topics=[])


def _alter_reassignments_refused(req: Any, version: int, message: str) -> Any:
    from kafka.protocol.admin.topics import AlterPartitionReassignmentsResponse

    return AlterPartitionReassignmentsResponse(version=version, throttle_time_ms=0,
                                               allow_replication_factor_change=True,
                                               error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                               error_message=message, responses=[])


def _open(a: Access, req: Any, version: int) -> Guarded:
    """Needs no authorization (ApiVersions, and the SASL requests: authentication comes first)."""
    return _PASS


POLICIES: dict[int, Policy] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _whole_group(READ, _join_error),
    ApiKey.HEARTBEAT: _whole_group(READ, _heartbeat_error),
    ApiKey.LEAVE_GROUP: _whole_group(READ, _leave_error),
    ApiKey.SYNC_GROUP: _whole_group(READ, _sync_error),
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.SASL_HANDSHAKE: _open,
    ApiKey.API_VERSIONS: _open,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.SASL_AUTHENTICATE: _open,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.DESCRIBE_ACLS: _cluster_op(DESCRIBE, _describe_acls_refused),
    ApiKey.CREATE_ACLS: _cluster_op(ALTER, _create_acls_refused),
    ApiKey.DELETE_ACLS: _cluster_op(ALTER, _delete_acls_refused),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster_op(DESCRIBE, _describe_scram_refused),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _cluster_op(ALTER, _alter_scram_refused),
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DESCRIBE_CONFIGS: _configs(AclOperation.DESCRIBE_CONFIGS, "results", _describe_configs_classes),
    ApiKey.ALTER_CONFIGS: _configs(AclOperation.ALTER_CONFIGS, "responses", _alter_configs_classes),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _configs(AclOperation.ALTER_CONFIGS, "responses",
                                               _incremental_alter_configs_classes),
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    ApiKey.DESCRIBE_LOG_DIRS: _cluster_op(DESCRIBE, _describe_log_dirs_refused),
    ApiKey.ELECT_LEADERS: _cluster_op(ALTER, _elect_leaders_refused),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster_op(DESCRIBE, _list_reassignments_refused),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster_op(ALTER, _alter_reassignments_refused),
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _end_txn,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
}


def _heartbeat_allowed(authorizer: Authorizer, principal: str, host: str, req: Any, api: str) -> bool:
    return authorizer.authorize(principal, host, READ, GROUP, req.group_id, api, False)  # a denial is logged by the policy


def _commit_allowed(authorizer: Authorizer, principal: str, host: str, req: Any, api: str) -> bool:
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


# The hot direct routes' usual case, decided without building anything: True means the policy
# would let the request through unchanged (anything else goes through the policy itself).
ALLOWED_AS_IS: dict[int, Callable[..., bool]] = {
    ApiKey.HEARTBEAT: _heartbeat_allowed,
    ApiKey.OFFSET_COMMIT: _commit_allowed,
}


def register(api: int, policy: Policy) -> None:
    """For APIs added elsewhere (transactions, configs): their authorization, in this table."""
    if api in POLICIES:
        raise RuntimeError(f"two authorization policies for API key {api}")
    POLICIES[api] = policy


def authorize(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str, log: bool = True) -> bool:
    """One authorization check from a handler (True when no authorizer is configured): for
    checks that belong inside a handler's own logic, e.g. the transaction coordinator's
    TRANSACTIONAL_ID checks."""
    authorizer = ctx.broker.security.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, ctx.client_host, op, rtype, name, "", log)
