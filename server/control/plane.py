"""The control API's state and operations (the HTTP layer in api.py calls these): injected
errors, latency, stalled connections, recording, the group operations, reset.

The Kafka listeners pay for none of it while nothing is injected. Each connection carries a
`hook`: the Interceptor for its first request (to learn its client id, so connections can be
closed or stalled by it), then None, a single attribute test per request, the same test the
server makes with the control API off. Injecting anything hooks every connection; removing
the last fault unhooks them.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.control.faults import (
    BadRule,
    ErrorRule,
    Facts,
    LatencyRule,
    StallRule,
    api_key,
    error_code,
    parse_count,
    parse_match,
)
from kcoord.server.control.intercept import Interceptor
from kcoord.server.control.recorder import Recorder
from kcoord.server.control.refusals import NotFound, Refused
from kcoord.server.deferred import Deferred

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from kcoord.server.connection import KafkaConnection
    from kcoord.server.connections import Connections
    from kcoord.server.control.cluster_moves import ClusterMoves
    from kcoord.server.control.ports import NodeState
    from kcoord.server.dispatch import Dispatcher
    from kcoord.server.virtual.cluster import VirtualCluster

log = logging.getLogger("kcoord.control")

MAX_RECORDED = 100_000
DEFAULT_RECORDED = 10_000


class ControlPlane:
    """Built by the composition root (server/node.py, `control_plane`) with what it uses of the
    node: the dispatcher (the answer of a request nothing injected), its connections, its
    current parts (NodeState), and the node's load, reset and identity; on a cluster node its
    moves through the controller (cluster_moves.py)."""

    def __init__(self, dispatcher: Dispatcher, connections: Connections, state: NodeState,
                 loaded: Callable[[], Awaitable[None]], reset: Callable[[], dict[str, int]],
                 identity: Callable[[], dict[str, Any]], moves: ClusterMoves | None = None) -> None:
        self.dispatcher = dispatcher
        self._connections = connections
        self.state = state
        self._loaded = loaded  # until __consumer_offsets is loaded
        self._reset = reset  # the node's reset: its state anew from an emptied directory (reset.py)
        self._identity = identity  # cluster id, node id, the listeners' bound addresses
        # on a cluster node (zookeeper.connect set): its moves through the controller; and no reset
        self.moves = moves
        self.errors: list[ErrorRule] = []
        self.latency: list[LatencyRule] = []
        self.stalls: list[StallRule] = []
        self.recorder: Recorder | None = None
        self.held: dict[KafkaConnection, tuple[Deferred[Any], bytes]] = {}
        self.loading: dict[int, asyncio.Task[None]] = {}
        self.active = False
        self._needs_body: frozenset[ApiKey | None] = frozenset()
        self.virtual: Any = None  # kcoord.server.virtual.cluster.VirtualCluster with kcoord.virtual.brokers > 1
        self.routing: Any = None  # kcoord.server.virtual.routing.Routing, beside it
        self._routed: frozenset[ApiKey] = frozenset()
        self.intercept = Interceptor(self)

    async def start_virtual(self, cluster: VirtualCluster) -> None:
        """kcoord.virtual.brokers > 1: the other nodes' listeners, and every request routed
        (server/virtual/), so every connection stays hooked."""
        from kcoord.server.virtual.routing import ROUTED, Routing

        self.virtual = cluster
        await cluster.start()
        self.routing = Routing(cluster, self.dispatcher.handle, self.state.topics)
        self._routed = ROUTED
        self._refresh()

    def serve(self, conn: KafkaConnection, frame: bytes, parsed: Any, request: Any) -> Any:
        """A request nothing injected answers: the dispatcher's answer, through the virtual
        brokers' routing when they are on."""
        if self.routing is None:
            return self.dispatcher.handle(frame, conn.session)
        spec, version, _, _, _, body_at = parsed
        return self.routing.serve(conn, frame, spec, version, body_at, request)

    # ---------------------------------------------------------------- the per-request side

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        t = self.state.topics().by_id.get(topic_id)
        return t.name if t is not None else None

    def needs_body(self, api: ApiKey) -> bool:
        needs = self._needs_body
        return api in needs or None in needs or (self.routing is not None and api in self._routed)

    def take_error(self, facts: Facts) -> ErrorRule | None:
        for rule in self.errors:
            if rule.match.matches(facts):
                rule.answered += 1
                if rule.count > 0:
                    rule.count -= 1
                    if rule.count == 0:
                        self.errors.remove(rule)
                        self._refresh()
                log.info("Answering %s v%d from %s with injected %s", API_TABLE[facts.api].name, facts.version,
                         facts.client_id, rule.code.name)
                return rule
        return None

    def delay_for(self, facts: Facts) -> int:
        total = 0
        for rule in self.latency:
            if rule.match.matches(facts):
                rule.delayed += 1
                total += rule.ms
        return total

    def hold(self, conn: KafkaConnection, frame: bytes) -> Deferred[Any]:
        conn.stall()
        out: Deferred[Any] = Deferred()
        self.held[conn] = (out, frame)
        return out

    def _refresh(self) -> None:
        """Hook every connection while something is injected, none otherwise (those whose
        client id is not known yet keep the hook for their first request)."""
        self.active = bool(self.errors or self.latency or self.stalls or self.recorder or self.routing)
        needs: set[ApiKey | None] = set()
        for rule in self.errors:
            needs.add(rule.match.api)  # the error answer mirrors the request
        for lat in self.latency:
            if lat.match.needs_body:
                needs.add(lat.match.api)
        self._needs_body = frozenset(needs)
        for conn in self._connections:
            conn.hook = self.intercept if self.active or conn.client_id is None else None

    # ---------------------------------------------------------------- faults

    def inject_error(self, body: dict[str, Any]) -> dict[str, Any]:
        match = parse_match(body, api_required=True)
        code = error_code(body.get("error"))
        message = body.get("message")
        if message is not None and not isinstance(message, str):
            raise BadRule("'message' must be a string")
        rule = ErrorRule(match, code, parse_count(body), message)
        self.errors.append(rule)
        self._refresh()
        log.info("Injected %s into the next %s %s request(s) %s", code.name,
                 "every" if rule.count < 0 else rule.count, API_TABLE[match.api].name, match.to_json())
        return rule.to_json()

    def add_latency(self, body: dict[str, Any]) -> dict[str, Any]:
        match = parse_match(body, api_required=False)
        ms = body.get("ms")
        if isinstance(ms, bool) or not isinstance(ms, int) or not 0 < ms <= 600_000:
            raise BadRule("'ms' must be a delay in milliseconds, 1 to 600000")
        rule = LatencyRule(match, ms)
        self.latency.append(rule)
        self._refresh()
        log.info("Added %d ms of latency to requests %s", ms, match.to_json())
        return rule.to_json()

    def faults(self) -> list[dict[str, Any]]:
        return [r.to_json() for r in (*self.errors, *self.latency, *self.stalls)]

    def remove_fault(self, fault_id: int) -> dict[str, Any]:
        for rules in (self.errors, self.latency):
            for r in rules:
                if r.id == fault_id:
                    rules.remove(r)  # type: ignore[arg-type]
                    self._refresh()
                    return r.to_json()
        for s in self.stalls:
            if s.id == fault_id:
                self.unstall(s.client_id)
                return s.to_json()
        raise NotFound(f"no fault with id {fault_id}")

    def clear_faults(self) -> dict[str, int]:
        n = len(self.errors) + len(self.latency) + len(self.stalls)
        self.errors.clear()
        self.latency.clear()
        self.unstall(None)
        self._refresh()
        return {"removed": n}

    # ---------------------------------------------------------------- connections

    def connections(self) -> list[dict[str, Any]]:
        return [{"id": c.id, "peer": c.peer, "port": c.local_port, "client_id": c.client_id,
                 "stalled": c.stalled} for c in sorted(self._connections, key=lambda c: c.id)]

    def _select(self, body: dict[str, Any]) -> list[KafkaConnection]:
        client_id, conn_id = body.get("client_id"), body.get("connection")
        if client_id is None and conn_id is None:
            raise BadRule("name the connections: 'client_id' or 'connection'")
        if client_id is not None and not isinstance(client_id, str):
            raise BadRule("'client_id' must be a string")
        if conn_id is not None and (isinstance(conn_id, bool) or not isinstance(conn_id, int)):
            raise BadRule("'connection' must be a connection id (GET /connections lists them)")
        return [c for c in self._connections
                if (client_id is None or c.client_id == client_id) and (conn_id is None or c.id == conn_id)]

    def close_connections(self, body: dict[str, Any]) -> dict[str, Any]:
        conns = self._select(body)
        for c in conns:
            log.info("Closing connection %d from %s (client id %s) for the control API", c.id, c.peer, c.client_id)
            self.held.pop(c, None)
            c.close()
        return {"closed": [c.id for c in conns]}

    def stall(self, body: dict[str, Any]) -> dict[str, Any]:
        client_id = body.get("client_id")
        if not isinstance(client_id, str):
            raise BadRule("'client_id' is required: the client whose connections stop being read")
        rule = StallRule(client_id)
        self.stalls.append(rule)
        stalled = [c for c in self._connections if c.client_id == client_id]
        for c in stalled:
            c.stall()
        self._refresh()
        log.info("Stalled connections of client id %s: %s (and its later ones)", client_id, [c.id for c in stalled])
        return {**rule.to_json(), "stalled": [c.id for c in stalled]}

    def unstall(self, client_id: str | None) -> dict[str, Any]:
        """Read the stalled connections again (of one client id, or all) and serve what they
        held back."""
        self.stalls[:] = [s for s in self.stalls if client_id is not None and s.client_id != client_id]
        resumed = []
        for c in list(self._connections):
            if c.stalled and (client_id is None or c.client_id == client_id):
                resumed.append(c.id)
                held = self.held.pop(c, None)
                c.unstall()
                if held is not None:
                    self.intercept.serve(c, held[1], held[0])
        for c in [c for c in self.held if c.closed]:
            del self.held[c]
        self._refresh()
        return {"resumed": resumed}

    # ---------------------------------------------------------------- recording

    def record(self, body: dict[str, Any]) -> dict[str, Any]:
        limit = body.get("max", DEFAULT_RECORDED)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_RECORDED:
            raise BadRule(f"'max' must be how many requests to keep, 1 to {MAX_RECORDED}")
        apis = body.get("apis")
        if apis is not None and not isinstance(apis, list):
            raise BadRule("'apis' must be a list of API names")
        self.recorder = Recorder(limit, frozenset(api_key(a) for a in apis) if apis is not None else None)
        self._refresh()
        return {"recording": True, "max": limit, "apis": None if apis is None else
                sorted(API_TABLE[api_key(a)].name for a in apis)}

    def stop_recording(self) -> dict[str, Any]:
        kept = len(self.recorder.entries) if self.recorder is not None else 0
        self.recorder = None
        self._refresh()
        return {"recording": False, "discarded": kept}

    def requests(self, query: dict[str, str]) -> dict[str, Any]:
        try:
            conn = int(query["connection"]) if "connection" in query else None
            since = int(query.get("since", "0"))
        except ValueError:
            raise BadRule("'connection' and 'since' must be numbers") from None
        api = api_key(query["api"]) if "api" in query else None
        group = query.get("group_id")
        if self.recorder is None:
            return {"recording": False, "requests": [], "dropped": 0}
        out = []
        for r in self.recorder.select(api, query.get("client_id"), conn, since):
            entry = r.to_json()
            if group is not None:
                f = Facts(r.api, r.version, r.client_id, r.connection, r.request, self.topic_name)
                if group not in f.groups:
                    continue
            out.append(entry)
        return {"recording": True, "requests": out, "dropped": self.recorder.dropped}

    # ---------------------------------------------------------------- groups

    # the group coordinator's controls, and reset, load at their first call (start-up time)

    def rebalance(self, group_id: str) -> dict[str, Any]:
        from kcoord.server.group import control as group_control

        err = group_control.force_rebalance(self.state.coordinator(), group_id, "rebalance forced by the control API")
        if err == ErrorCode.GROUP_ID_NOT_FOUND:
            raise NotFound(f"group {group_id} has no members to rebalance")
        if err is not None:
            raise BadRule(f"group {group_id} cannot be made to rebalance now ({err.name})")
        return {"group_id": group_id, "state": self.state.coordinator().group(group_id).state_name()}

    def expire(self, group_id: str, member: str) -> dict[str, Any]:
        from kcoord.server.group import control as group_control

        err, member_id = group_control.expire_member(
            self.state.coordinator(), group_id, member,
            f"removing member {member} on heartbeat expiration (forced by the control API)")
        if err == ErrorCode.GROUP_ID_NOT_FOUND:
            raise NotFound(f"no group {group_id}")
        if err == ErrorCode.UNKNOWN_MEMBER_ID:
            raise NotFound(f"group {group_id} has no member or group.instance.id {member}")
        if err is not None:
            raise BadRule(f"group {group_id}: members cannot be expired ({err.name})")
        g = self.state.coordinator().group(group_id)
        return {"group_id": group_id, "member_id": member_id, "state": g.state_name() if g is not None else "Dead"}

    def group(self, group_id: str) -> dict[str, Any]:
        coordinator = self.state.coordinator()
        g = coordinator.group(group_id)
        if g is None:
            raise NotFound(f"no group {group_id}")
        out: dict[str, Any] = {"group_id": group_id, "type": str(g.TYPE), "state": g.state_name(),
                               "partition": coordinator.partition_of(group_id),
                               "offsets": sum(1 for _ in coordinator.committed_offsets(group_id))}
        members = getattr(g, "members", {})
        out.update({
            "generation": getattr(g, "generation_id", None), "epoch": getattr(g, "group_epoch", None),
            "protocol_type": getattr(g, "protocol_type", None),
            "protocol": getattr(g, "protocol_name", None), "leader": getattr(g, "leader_id", None),
            "members": [{"member_id": mid,
                         "group_instance_id": getattr(m, "group_instance_id", None) or getattr(m, "instance_id", None),
                         "client_id": getattr(m, "client_id", None), "client_host": getattr(m, "client_host", None)}
                        for mid, m in members.items()],
        })
        return out

    def load_in_progress(self, body: dict[str, Any]) -> dict[str, Any]:
        """Unload a __consumer_offsets partition and load it again after `ms`: its groups
        answer COORDINATOR_LOAD_IN_PROGRESS meanwhile, exactly as while a coordinator loads."""
        ms = body.get("ms")
        if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= 600_000:
            raise BadRule("'ms' must be how long to stay loading, 0 to 600000")
        partition = self._partition(body)
        task = self.loading.pop(partition, None)
        if task is not None:
            task.cancel()
        runtime = self.state.runtime()
        self.loading[partition] = t = asyncio.ensure_future(runtime.reload(partition, ms / 1000.0))
        t.add_done_callback(lambda _t: self.loading.pop(partition, None) if self.loading.get(partition) is _t
                            else None)
        log.info("%s-%d loading for %d ms (control API)", OFFSETS_TOPIC, partition, ms)
        return {"partition": partition, "ms": ms}

    def _partition(self, body: dict[str, Any]) -> int:
        group, partition = body.get("group_id"), body.get("partition")
        n = self.state.offsets_partitions()
        if group is not None:
            if not isinstance(group, str):
                raise BadRule("'group_id' must be a string")
            return self.state.coordinator().partition_of(group)
        if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition < n:
            raise BadRule(f"name a 'group_id' or a __consumer_offsets 'partition' (0 to {n - 1})")
        return partition

    # ---------------------------------------------------------------- virtual brokers, a cluster

    # on a cluster node the brokers are processes (cluster_moves.py moves leaders between
    # them); otherwise the virtual brokers of kcoord.virtual.brokers=N inside this one

    def _cluster(self) -> Any:
        if self.virtual is None:
            raise NotFound("virtual brokers are off (kcoord.virtual.brokers=N, N > 1) and this is no cluster node "
                           "(zookeeper.connect)")
        return self.virtual

    def _node(self, node: Any) -> int:
        cluster = self._cluster()
        if isinstance(node, str) and node.isdigit():
            node = int(node)
        if isinstance(node, bool) or not isinstance(node, int) or node not in cluster.nodes:
            raise BadRule(f"'node' must be one of the node ids {cluster.ids()}")
        return node

    def brokers(self) -> dict[str, Any]:
        if self.moves is not None:
            return {"brokers": self.moves.brokers()}
        return {"brokers": self._cluster().describe()}

    def _not_on_a_cluster(self, what: str) -> None:
        if self.moves is not None:
            raise Refused(409, f"{what}: a cluster node is a process of its own; stop, kill and start it "
                               f"(KcoordCluster.stop / kill / start, docs/testing.md)")

    async def broker_down(self, node: str) -> dict[str, Any]:
        self._not_on_a_cluster("no virtual brokers to take down")
        return await self._cluster().down(self._node(node))

    async def broker_up(self, node: str) -> dict[str, Any]:
        self._not_on_a_cluster("no virtual brokers to bring up")
        return await self._cluster().up(self._node(node))

    async def move_leader(self, topic: str, partition: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.moves is not None:
            if not partition.isdigit():
                raise NotFound(f"no partition {partition} of topic {topic}")
            return await self.moves.move_leader(topic, int(partition), body.get("node"), body.get("timeout_ms"))
        cluster = self._cluster()
        t = self.state.topics().get(topic)
        if t is None:
            raise NotFound(f"no topic {topic}")
        if not partition.isdigit() or not int(partition) < t.partitions:
            raise NotFound(f"topic {topic} has partitions 0 to {t.partitions - 1}")
        node = self._node(body.get("node"))
        before = cluster.move_leader(topic, int(partition), node)
        return {"topic": topic, "partition": int(partition), "leader": node, "previous": before}

    async def move_coordinator(self, group_id: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.moves is not None:
            return await self.moves.move_coordinator(group_id, body.get("node"), body.get("timeout_ms"))
        cluster = self._cluster()
        node = self._node(body.get("node"))
        partition = self.state.coordinator().partition_of(group_id)
        before = cluster.move_leader(OFFSETS_TOPIC, partition, node)
        return {"group_id": group_id, "partition": partition, "coordinator": node, "previous": before}

    # ---------------------------------------------------------------- reset

    async def reset(self) -> dict[str, Any]:
        if self.moves is not None:
            # Kafka has no reset, and one node of a cluster cannot be a new server alone: the
            # controller, ZooKeeper and the other nodes' replicas still name its partitions
            # (docs/testing.md, "A cluster in a test")
            raise Refused(409, "reset is refused on a cluster node (zookeeper.connect is set): the cluster's "
                               "topics and replicas live in ZooKeeper and on the other nodes. Delete the test's "
                               "topics and groups (DeleteTopics, DeleteGroups), or start a new cluster "
                               "(kcoord_cluster_factory)")
        started = time.perf_counter()
        self.errors.clear()
        self.latency.clear()
        self.stalls.clear()
        self.held.clear()
        self.recorder = None
        for task in self.loading.values():
            task.cancel()
        self.loading.clear()
        if self.virtual is not None:
            await self.virtual.reset()
        dropped = self._reset()
        self._refresh()
        await self._loaded()
        return {"reset": True, "dropped": dropped, "took_ms": round((time.perf_counter() - started) * 1000, 2)}

    def shutdown(self) -> None:
        """The server stops: drop every fault; stalled connections are closed, not served."""
        for conn in list(self.held):
            conn.close()
        self.held.clear()
        self.errors.clear()
        self.latency.clear()
        self.stalls.clear()
        self.recorder = None
        for task in self.loading.values():
            task.cancel()
        if self.moves is not None:
            self.moves.close()
        self._refresh()

    def status(self) -> dict[str, Any]:
        return {**self._identity(),
                "topics": sorted(t.name for t in self.state.topics().topics.values() if not t.internal),
                "groups": sorted(g.group_id for g in self.state.coordinator().groups() if not g.is_dead()),
                "connections": len(self._connections), "faults": self.faults(),
                "recording": self.recorder is not None,
                "virtual_brokers": self.virtual.ids() if self.virtual is not None else None,
                "cluster": self.moves.summary() if self.moves is not None else None}
