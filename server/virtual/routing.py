"""What makes the virtual nodes separate brokers to a client (cluster.py holds who leads
what). Applied to every request while virtual brokers are on, on the node the connection came
in on:

- Metadata, DescribeCluster: every node that is up, each at its endpoint on the client's
  listener; each partition's leader (none while its node is down: LEADER_NOT_AVAILABLE).
- FindCoordinator: the node leading the group's __consumer_offsets partition
  (COORDINATOR_NOT_AVAILABLE while it is down).
- Produce, Fetch, ListOffsets: partitions this node does not lead are answered
  NOT_LEADER_OR_FOLLOWER, the others served as usual, in one response.
- The group APIs: NOT_COORDINATOR unless this node coordinates the group(s); ListGroups lists
  the groups this node coordinates.
- Everything else (ApiVersions, admin APIs, InitProducerId) as usual, on any node.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.protocol.api import ApiKey, ApiSpec
from kcoord.protocol.error_response import encode, error_response, present
from kcoord.protocol.errors import ErrorCode
from kcoord.server.control.faults import request_groups
from kcoord.server.deferred import Deferred
from kcoord.server.handlers.routes import ROUTES

if TYPE_CHECKING:
    from kcoord.server.topics import TopicRegistry
    from kcoord.server.virtual.cluster import VirtualCluster, VirtualNode

# API key -> how it is routed: the `virtual` of its route (server/handlers/routes.py)
_KINDS: dict[int, str] = {k: d.virtual for k in ROUTES if (d := ROUTES.declared(k)) is not None and d.virtual}
ROUTED = frozenset(_KINDS)

_TOPIC_ARRAYS = ("topic_data", "topics")
_PARTITION_ARRAYS = ("partition_data", "partitions")
_PARTITION_IDS = ("partition_index", "partition", "index")


class Routing:
    def __init__(self, cluster: VirtualCluster, handle: Callable[[bytes, Any], Any],
                 topics: Callable[[], TopicRegistry]) -> None:
        self.cluster = cluster
        self.handle = handle  # the dispatcher's: (frame, session) -> answer
        self.topics = topics  # the node's current topic registry

    def serve(self, conn: Any, frame: bytes, spec: ApiSpec, version: int, body_at: int, request: Any) -> Any:
        node = self.cluster.node_of(conn)
        kind = _KINDS.get(spec.key)
        if node is None or request is None or kind is None:
            return self.handle(frame, conn.session)
        if kind == "group":
            return self._group_api(conn, frame, spec, version, request, node)
        if kind == "partitioned":
            return self._partitioned(conn, frame, spec, version, body_at, request, node)
        rewrite = {"metadata": self._metadata, "find_coordinator": self._find_coordinator,
                   "describe_cluster": self._describe_cluster, "list_groups": self._list_groups}[kind]
        listener = conn.session.listener.name
        return _after(self.handle(frame, conn.session), spec, version,
                      lambda resp: rewrite(resp, request, version, listener, node))

    # ---------------------------------------------------------------- groups

    def _group_api(self, conn: Any, frame: bytes, spec: ApiSpec, version: int, request: Any,
                   node: VirtualNode) -> Any:
        groups = set(request_groups(spec.key, request))
        if all(self._coordinates(node, g) for g in groups):
            return self.handle(frame, conn.session)
        return _framed(spec, version, frame, error_response(spec, version, request, ErrorCode.NOT_COORDINATOR))

    def _coordinates(self, node: VirtualNode, group_id: str) -> bool:
        return node.up and self.cluster.coordinator_of(group_id) == node.node_id

    def _list_groups(self, resp: Any, request: Any, version: int, listener: str, node: VirtualNode) -> Any:
        resp.groups = [g for g in resp.groups if self.cluster.coordinator_of(g.group_id) == node.node_id]
        return resp

    def _find_coordinator(self, resp: Any, request: Any, version: int, listener: str, node: VirtualNode) -> Any:
        if version >= 4:
            for c in resp.coordinators:
                if c.error_code == ErrorCode.NONE:
                    self._point(c, c.key, listener)
        elif resp.error_code == ErrorCode.NONE:
            self._point(resp, request.key, listener)
        return resp

    def _point(self, entry: Any, group_id: str, listener: str) -> None:
        """Fill a FindCoordinator answer (or one of its v4+ entries) with the group's node."""
        target = self.cluster.nodes[self.cluster.coordinator_of(group_id)]
        endpoint = target.endpoint(listener) if target.up else None
        if endpoint is None:
            entry.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            entry.error_message = "The coordinator is not available."
            entry.node_id, entry.host, entry.port = -1, "", -1
        else:
            entry.node_id, (entry.host, entry.port) = target.node_id, endpoint

    # ---------------------------------------------------------------- the cluster's shape

    def _brokers(self, item_class: Any, listener: str) -> list[Any]:
        out = []
        for n in self.cluster.up_nodes():
            endpoint = n.endpoint(listener)
            if endpoint is not None:
                out.append(item_class(node_id=n.node_id, host=endpoint[0], port=endpoint[1], rack=None))
        return out

    def _metadata(self, resp: Any, request: Any, version: int, listener: str, node: VirtualNode) -> Any:
        if not resp.brokers:  # this listener is not advertised: left as the handler answered
            return resp
        resp.brokers = self._brokers(type(resp.brokers[0]), listener)
        up = self.cluster.up_nodes()
        resp.controller_id = up[0].node_id if up else -1
        for t in resp.topics:
            for p in t.partitions or ():
                if p.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
                    continue
                leader = self.cluster.leader(t.name, p.partition_index)
                p.replica_nodes = [leader]
                if self.cluster.nodes[leader].up:
                    p.error_code, p.leader_id, p.isr_nodes, p.offline_replicas = ErrorCode.NONE, leader, [leader], []
                else:
                    p.error_code, p.leader_id, p.isr_nodes = ErrorCode.LEADER_NOT_AVAILABLE, -1, []
                    p.offline_replicas = [leader]
        return resp

    def _describe_cluster(self, resp: Any, request: Any, version: int, listener: str, node: VirtualNode) -> Any:
        if resp.error_code == ErrorCode.NONE and resp.brokers:
            resp.brokers = self._brokers(type(resp.brokers[0]), listener)
            up = self.cluster.up_nodes()
            resp.controller_id = up[0].node_id if up else -1
        return resp

    # ---------------------------------------------------------------- partitions

    def _partitioned(self, conn: Any, frame: bytes, spec: ApiSpec, version: int, body_at: int, request: Any,
                     node: VirtualNode) -> Any:
        names = self.topics()

        def here(topic_item: Any, part_item: Any) -> bool:
            name = present(topic_item, "name") or present(topic_item, "topic")
            if not name and present(topic_item, "topic_id") is not None:
                t = names.by_id.get(topic_item.topic_id)
                name = t.name if t is not None else None
            if not name or names.get(name) is None:
                return True  # an unknown topic: the handler answers it
            return self.cluster.live_leader(name, _partition_id(part_item)) == node.node_id

        local, foreign = _split(request, here)
        if foreign is None:
            return self.handle(frame, conn.session)
        errors = error_response(spec, version, foreign, ErrorCode.NOT_LEADER_OR_FOLLOWER, at_items=True)
        if spec.key == ApiKey.PRODUCE and getattr(request, "acks", 1) == 0:
            errors = None  # acks=0: nothing is answered
        if local is None:
            return _framed(spec, version, frame, errors) if errors is not None else None
        body = encode(local, version)
        result = self.handle(frame[:body_at] + body, conn.session)
        if errors is None:
            return result
        return _after(result, spec, version, lambda resp: _merge(resp, errors))


def _partition_id(item: Any) -> int:
    for attr in _PARTITION_IDS:
        value = present(item, attr)
        if isinstance(value, int):
            return value
    return -1


def _split(request: Any, here: Callable[[Any, Any], bool]) -> tuple[Any | None, Any | None]:
    """(the request with only this node's partitions, the request with only the others');
    None for an empty one."""
    topics_attr = next(a for a in _TOPIC_ARRAYS if isinstance(present(request, a), list))
    local_topics, foreign_topics = [], []
    for t in getattr(request, topics_attr):
        parts_attr = next(a for a in _PARTITION_ARRAYS if isinstance(present(t, a), list))
        mine = [p for p in getattr(t, parts_attr) if here(t, p)]
        theirs = [p for p in getattr(t, parts_attr) if not here(t, p)]
        for parts, out in ((mine, local_topics), (theirs, foreign_topics)):
            if parts:
                c = copy.copy(t)
                setattr(c, parts_attr, parts)
                out.append(c)
    if not foreign_topics:
        return request, None
    local = foreign = None
    if local_topics:
        local = copy.copy(request)
        setattr(local, topics_attr, local_topics)
    foreign = copy.copy(request)
    setattr(foreign, topics_attr, foreign_topics)
    return local, foreign


def _merge(resp: Any, errors: Any) -> Any:
    """Add the error response's topic entries to `resp`'s (same topic: its partitions join)."""
    attr = next(a for a in ("responses", "topics") if isinstance(present(resp, a), list))
    ours = getattr(resp, attr)
    for t in getattr(errors, attr):
        same = next((o for o in ours if _topic_key(o) == _topic_key(t)), None)
        if same is None:
            ours.append(t)
            continue
        parts_attr = next(a for a in ("partition_responses", "partitions") if isinstance(present(t, a), list))
        getattr(same, parts_attr).extend(getattr(t, parts_attr))
    return resp


def _topic_key(t: Any) -> Any:
    return present(t, "name") or present(t, "topic") or present(t, "topic_id")


def _framed(spec: ApiSpec, version: int, frame: bytes, response: Any) -> bytes:
    from kcoord.protocol.headers import encode_response_header

    body = encode(response, version)
    header = encode_response_header(int.from_bytes(frame[4:8], "big", signed=True), spec.response_header_version(version))
    return (len(header) + len(body)).to_bytes(4, "big") + header + body


def _after(result: Any, spec: ApiSpec, version: int, change: Callable[[Any], Any]) -> Any:
    """Apply `change` to the response inside the dispatcher's framed answer (now, or when a
    parked answer completes)."""
    if isinstance(result, Deferred):
        out: Deferred[Any] = Deferred()
        result.add_callback(lambda r: out.complete(_after(r, spec, version, change)))
        return out
    if type(result) is not bytes:
        return result  # None (no response) or a CloseConnection
    header_len = 4 + (1 if spec.response_header_version(version) >= 1 else 0)
    header, body = result[4:4 + header_len], result[4 + header_len:]
    new_body = encode(change(spec.response.decode(body, version=version)), version)
    return (len(header) + len(new_body)).to_bytes(4, "big") + header + new_body

