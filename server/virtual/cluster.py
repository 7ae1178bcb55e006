"""Virtual brokers: one kcoord serving N node ids (`kcoord.virtual.brokers=N`), each on its
own listener sockets, so that clients' multi-broker paths (a leader on another broker, a
coordinator that moves, a broker lost and back) run against one process.

The first node is node.id on the configured listeners; the others take node.id+1, ... with one
listener per configured listener (same name, protocol and host, a free port, advertised with
the port bound). Partition leaders are spread across the nodes (partition p of a topic on node
(p + crc32(topic)) mod N, __consumer_offsets partition p on node p mod N) until a test moves
one; a node that is down has no listening socket and its connections are closed, its
partitions have no leader (LEADER_NOT_AVAILABLE) and its coordinator partitions are unloaded,
to be loaded again when it comes back, as a broker's restart would.

Every node shares the one log and coordinator: the routing (routing.py) is what makes them
separate brokers to a client. Leader epochs stay 0: clients apply a leader change at the
same epoch (librdkafka, Java), and kcoord's data plane checks epochs against 0.
"""
from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.listeners import EndPoint, Listener

if TYPE_CHECKING:
    from kcoord.server.control.ports import NodeState

log = logging.getLogger("kcoord.virtual")


@dataclass(eq=False)
class VirtualNode:
    node_id: int
    listeners: list[Listener]
    up: bool = True
    servers: list[Any] = field(default_factory=list)  # asyncio servers of its listeners

    def endpoint(self, listener_name: str) -> tuple[str, int] | None:
        for lst in self.listeners:
            if lst.name == listener_name:
                return lst.advertised
        return None


class VirtualCluster:
    """Built by the composition root (server/node.py, `virtual_cluster`): the first node's id,
    listeners and their asyncio servers, `bind` (serves a listener, returns its asyncio
    servers), the node's connections and its current parts (NodeState)."""

    def __init__(self, first_id: int, count: int, listeners: list[Listener], servers: list[Any],
                 bind: Callable[[Listener], Awaitable[list[Any]]], connections: Iterable[Any],
                 state: NodeState) -> None:
        self.first_id = first_id
        self.count = count
        self._configured, self._servers = listeners, servers  # the first node's
        self._serve = bind
        self._connections = connections
        self.state = state
        self.nodes: dict[int, VirtualNode] = {}
        self.by_listener: dict[int, VirtualNode] = {}  # id(Listener) -> its node
        self.leaders: dict[tuple[str, int], int] = {}  # moved partitions only
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---------------------------------------------------------------- start-up

    async def start(self) -> None:
        """After the configured listeners are bound: they are the first node's; bind the others."""
        first, configured = self.first_id, self._configured
        self._add(VirtualNode(first, configured, servers=self._servers))
        for i in range(1, self.count):
            node = VirtualNode(first + i, [self._twin(lst) for lst in configured])
            self._add(node)
            await self._bind(node)
        log.info("Virtual brokers: %s", "; ".join(
            f"node {n.node_id} on {', '.join(lst.describe() for lst in n.listeners)}" for n in self.nodes.values()))

    def _add(self, node: VirtualNode) -> None:
        self.nodes[node.node_id] = node
        for lst in node.listeners:
            self.by_listener[id(lst)] = node

    @staticmethod
    def _twin(lst: Listener) -> Listener:
        adv = lst.advertised_endpoint
        return Listener(lst.name, lst.protocol, lst.host, 0,
                        EndPoint(adv.name, adv.host, 0) if adv is not None else None,
                        lst.ssl_context, lst.sasl, lst.principal_mapper)

    async def _bind(self, node: VirtualNode) -> None:
        node.servers = []
        for lst in node.listeners:
            if lst.bound:  # a node coming back binds the port it had
                lst.port = lst.bound_port
            node.servers.extend(await self._serve(lst))

    # ---------------------------------------------------------------- who leads what

    def node_of(self, conn: Any) -> VirtualNode | None:
        listener = getattr(conn.session, "listener", None)
        return self.by_listener.get(id(listener)) if listener is not None else None

    def ids(self) -> list[int]:
        return sorted(self.nodes)

    def default_leader(self, topic: str, partition: int) -> int:
        ids = self.ids()
        offset = 0 if topic == OFFSETS_TOPIC else zlib.crc32(topic.encode())
        return ids[(partition + offset) % len(ids)]

    def leader(self, topic: str, partition: int) -> int:
        return self.leaders.get((topic, partition)) or self.default_leader(topic, partition)

    def live_leader(self, topic: str, partition: int) -> int | None:
        node = self.nodes[self.leader(topic, partition)]
        return node.node_id if node.up else None

    def coordinator_of(self, group_id: str) -> int:
        return self.leader(OFFSETS_TOPIC, self.state.coordinator().partition_of(group_id))

    def up_nodes(self) -> list[VirtualNode]:
        return [self.nodes[i] for i in self.ids() if self.nodes[i].up]

    # ---------------------------------------------------------------- what a test changes

    def move_leader(self, topic: str, partition: int, node_id: int) -> int:
        """Returns the node that led it before."""
        before = self.leader(topic, partition)
        self.leaders[(topic, partition)] = node_id
        if topic == OFFSETS_TOPIC and before != node_id:
            # the new coordinator loads the partition: members' requests meanwhile get
            # COORDINATOR_LOAD_IN_PROGRESS, parked ones NOT_COORDINATOR, as in a fail-over
            self._spawn(self.state.runtime().reload(partition))
        log.info("Leader of %s-%d moved from node %d to node %d", topic, partition, before, node_id)
        return before

    async def down(self, node_id: int) -> dict[str, Any]:
        node = self.nodes[node_id]
        if not node.up:
            return {"node_id": node_id, "up": False}
        node.up = False
        for srv in node.servers:
            srv.close()
        closed = 0
        for conn in list(self._connections):
            if self.node_of(conn) is node:
                conn.close()
                closed += 1
        for srv in node.servers:
            await srv.wait_closed()
        node.servers = []
        coordinator = self.state.coordinator()
        for p in self._offsets_partitions_of(node_id):
            coordinator.begin_loading(p)  # its coordinator state is gone with it
        log.info("Node %d is down (%d connections closed)", node_id, closed)
        return {"node_id": node_id, "up": False, "connections_closed": closed}

    async def up(self, node_id: int) -> dict[str, Any]:
        node = self.nodes[node_id]
        if node.up:
            return {"node_id": node_id, "up": True}
        await self._bind(node)
        node.up = True
        for p in self._offsets_partitions_of(node_id):
            self._spawn(self.state.runtime().reload(p))
        log.info("Node %d is up again", node_id)
        return {"node_id": node_id, "up": True}

    def _offsets_partitions_of(self, node_id: int) -> list[int]:
        n = self.state.offsets_partitions()
        return [p for p in range(n) if self.leader(OFFSETS_TOPIC, p) == node_id]

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def reset(self) -> None:
        """Every node up, every leader back where it started."""
        for task in list(self._tasks):
            task.cancel()
        self.leaders.clear()
        for node in self.nodes.values():
            if not node.up:
                await self._bind(node)
                node.up = True

    def describe(self) -> list[dict[str, Any]]:
        n = self.state.offsets_partitions()
        return [{"node_id": node.node_id, "up": node.up,
                 "listeners": [{"name": lst.name, "bound": [f"{h}:{p}" for h, p in lst.bound],
                                "advertised": "{}:{}".format(*lst.advertised) if lst.advertised else None}
                               for lst in node.listeners],
                 "coordinator_partitions": [p for p in range(n) if self.leader(OFFSETS_TOPIC, p) == node.node_id]}
                for node in (self.nodes[i] for i in self.ids())]
