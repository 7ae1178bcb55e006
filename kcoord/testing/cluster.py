"""A local kcoord cluster: N `kcoord serve` processes joined through ZooKeeper (one started
from Debian's package unless a connect string is given), each in its own directory on free
loopback ports. `kcoord cluster` runs one for a person; the pytest plugin's
`kcoord_cluster_factory` for a test (docs/cluster.md).

    cluster = KcoordCluster(tmp_path, nodes=3).start()
    cluster.bootstrap            "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
    cluster.kill(2)              SIGKILL node 2 (its ZooKeeper session expires later)
    cluster.stop(2)              SIGTERM: controlled shutdown, then exit
    cluster.start(2)             start it again and wait until it is registered
    cluster.controller()         the broker id in /controller (-1: none)
    cluster.state("t", 0)        /brokers/topics/t/partitions/0/state as a dict (None: absent)
    cluster.coordinator_topics() a FindCoordinator creates __consumer_offsets; wait for its leaders

With `control=True` (the pytest plugin's default) every node serves the control API, and:

    cluster.move_coordinator("g", 2)   the group's coordinator moves to node 2 (a preferred-leader
                                       election of its __consumer_offsets partition, through the
                                       controller); returns once node 2 answers for the group
    cluster.move_leader("t", 0, 2)     the same for a partition: returns once node 2 leads it
    cluster.control(1)                 node 1's ControlClient

Settings: `overrides` for every node, `node_overrides={id: {...}}` for one node (its listeners, say);
`node_env={id: {...}}` adds to one node's environment (KCOORD_STOP_AT, say).
    cluster.close()

With `netns=True` (Linux, root) every node runs in a network namespace of its own on a bridge
in link-local space (kcoord/testing/netns.py), with a ZooKeeper of the cluster's own on the
bridge's address; clients (the test) reach every node at `node(id).bootstrap`:

    cluster.cut_off(2)           node 2 loses ZooKeeper and the other nodes; clients still reach it
    cluster.cut_off(2, clients=False)   nothing reaches it (its link down)
    cluster.cut_off(2, nodes=False)     it loses ZooKeeper alone (the nodes still reach each other)
    cluster.heal(2)
"""
from __future__ import annotations

import json
import signal
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kcoord.testing.process import KcoordProcess, free_port

T = TypeVar("T")


def _ask(bootstrap: str, request: Any, version: int) -> Any:
    """One request to one node, its decoded answer; None when it cannot answer."""
    from kcoord.protocol.api import API_TABLE
    from kcoord.server.healthcheck import read_exactly

    spec = API_TABLE[request.API_KEY]
    header = struct.pack(">hhih", request.API_KEY, version, 1, 7) + b"cluster"
    if spec.request_header_version(version) >= 2:
        header += b"\x00"  # no tagged fields
    payload = header + bytes(request.encode(version=version))
    host, port = bootstrap.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", read_exactly(s, 4))[0]
            body = read_exactly(s, size)[4 + spec.response_header_version(version):]
    except OSError:
        return None
    return spec.response.decode(body, version=version)


def metadata_brokers(bootstrap: str) -> set[int] | None:
    """The broker ids a node's Metadata (v1, no topics) lists; None when it cannot answer."""
    from kafka.protocol.metadata import MetadataRequest

    r = _ask(bootstrap, MetadataRequest[1](topics=[]), 1)
    return None if r is None else {b[0] for b in r.brokers}


def find_coordinator(bootstrap: str, key: str, key_type: int = 0) -> tuple[int, int]:
    """A node's FindCoordinator (v3) answer for a group (key_type 0) or a transactional id (1):
    (error code, coordinator id); (-1, -1) when it cannot answer."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    r = _ask(bootstrap, FindCoordinatorRequest(version=3, key=key, key_type=key_type), 3)
    return (-1, -1) if r is None else (r.error_code, r.node_id)


def wait_for(cond: Callable[[], T], timeout: float, what: str = "condition", interval: float = 0.1) -> T:
    """cond()'s first truthy value within `timeout` seconds, else AssertionError."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = cond()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - a condition that cannot be checked yet is not met
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


class KcoordCluster:
    def __init__(self, directory: Path, nodes: int = 3, zookeeper: str | None = None,
                 overrides: dict[str, str] | None = None, session_timeout_ms: int = 6000,
                 racks: dict[int, str] | None = None, control: bool = False, first_id: int = 1,
                 ports: dict[int, int] | None = None, netns: bool = False,
                 node_overrides: dict[int, dict[str, str]] | None = None,
                 node_env: dict[int, dict[str, str]] | None = None) -> None:
        if netns and control:
            raise ValueError("the control API listens on 127.0.0.1: not reachable in a node's namespace")
        self.directory = Path(directory)
        self.netns = netns
        self.network: Any = None  # kcoord.testing.netns.Network when netns
        self.count = nodes
        self.session_timeout_ms = session_timeout_ms
        self._zk_server: Any = None
        self._zk_connect = zookeeper
        self._zk: Any = None
        self.overrides = dict(overrides or {})
        self.racks = dict(racks or {})
        self.control_on = control
        self.ids = list(range(first_id, first_id + nodes))
        self.ports = dict(ports or {})
        self.node_overrides = {i: dict(o) for i, o in (node_overrides or {}).items()}  # one node's own settings
        self.node_env = {i: dict(e) for i, e in (node_env or {}).items()}  # one node's own environment
        self.nodes: dict[int, KcoordProcess] = {}

    # ---- ZooKeeper

    @property
    def zookeeper(self) -> str:
        assert self._zk_connect is not None, "start() first"
        return self._zk_connect

    def zk(self) -> Any:
        """A kazoo client of the cluster's ZooKeeper (its chroot), for reading znodes."""
        if self._zk is None:
            from kazoo.client import KazooClient

            self._zk = KazooClient(hosts=self.zookeeper, timeout=10)
            self._zk.start(timeout=30)
        return self._zk

    def read(self, path: str) -> Any:
        """A znode's JSON (None when absent)."""
        if not self.zk().exists(path):
            return None
        data, _ = self.zk().get(path)
        return json.loads(data) if data else {}

    def controller(self) -> int:
        c = self.read("/controller")
        return -1 if c is None else int(c["brokerid"])

    def registered(self) -> list[int]:
        return sorted(int(b) for b in self.zk().get_children("/brokers/ids")) if self.zk().exists("/brokers/ids") else []

    def state(self, topic: str, partition: int) -> dict[str, Any] | None:
        return self.read(f"/brokers/topics/{topic}/partitions/{partition}/state")

    def assignment(self, topic: str) -> dict[int, list[int]] | None:
        t = self.read(f"/brokers/topics/{topic}")
        return None if t is None else {int(p): r for p, r in t["partitions"].items()}

    # ---- the nodes

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for i, n in sorted(self.nodes.items()) if n.alive())

    def node(self, broker_id: int) -> KcoordProcess:
        return self.nodes[broker_id]

    def start(self, broker_id: int | None = None, timeout: float = 90.0) -> KcoordCluster:
        """Start ZooKeeper (unless given) and every node, or one node again; returns once the
        node(s) are registered in /brokers/ids and every running node's Metadata lists every
        registered broker (a topic created next gets the replicas it asks for, wherever it is
        asked)."""
        if broker_id is not None:
            self.nodes[broker_id].start(timeout)
            wait_for(lambda: broker_id in self.registered(), timeout, f"broker {broker_id} to register")
            self._wait_agreed(timeout)
            return self
        if self.netns:
            from kcoord.testing.netns import Network

            self.network = Network().create(self.ids)
            self._zk_connect = None  # the nodes reach only a ZooKeeper on the bridge's address
        if self._zk_connect is None:
            from kcoord.server.cluster.zookeeper_server import ZooKeeperServer

            host = self.network.host if self.network is not None else "127.0.0.1"
            self._zk_server = ZooKeeperServer(self.directory / "zookeeper", host=host).start()
            self._zk_connect = self._zk_server.connect
        for i in self.ids:
            overrides = {
                "node.id": str(i),
                "zookeeper.connect": self.zookeeper,
                "zookeeper.session.timeout.ms": str(self.session_timeout_ms),
                "offsets.topic.replication.factor": str(min(3, self.count)),
                "transaction.state.log.replication.factor": str(min(3, self.count)),
                "transaction.state.log.min.isr": str(min(2, self.count)),
                **({"broker.rack": self.racks[i]} if i in self.racks else {}),
                **self.overrides,
                **self.node_overrides.get(i, {}),
            }
            net = {} if self.network is None else {"host": self.network.address(i),
                                                   "prefix": self.network.prefix(i)}
            self.nodes[i] = KcoordProcess(self.directory / f"node-{i}" / "data", port=self.ports.get(i),
                                          overrides=overrides, control=self.control_on,
                                          env=self.node_env.get(i), **net)
        for i in self.ids:
            self.nodes[i].start(timeout)
        wait_for(lambda: set(self.ids) <= set(self.registered()), timeout, "every broker to register")
        self._wait_agreed(timeout)
        return self

    def _wait_agreed(self, timeout: float) -> None:
        def agreed() -> bool:
            registered = set(self.registered())
            for i, proc in self.nodes.items():
                if proc.proc is None or proc.proc.poll() is not None:
                    continue  # not running
                if i in registered and metadata_brokers(proc.bootstrap) != registered:
                    return False
            return True

        wait_for(agreed, timeout, "every node's Metadata to list every registered broker", interval=0.2)

    # ---- moves through the control API (control=True)

    def control(self, broker_id: int | None = None, timeout: float = 30.0) -> Any:
        """A node's ControlClient (None: the first running node's)."""
        from kcoord.server.control.client import ControlClient

        if not self.control_on:
            raise RuntimeError("this cluster was started without the control API (KcoordCluster(control=True))")
        if broker_id is None:
            running = [i for i, n in sorted(self.nodes.items()) if n.alive()]
            if not running:
                raise RuntimeError("no node of the cluster is running")
            broker_id = running[0]
        url = self.nodes[broker_id].control_url
        assert url is not None
        return ControlClient(url, timeout=timeout)

    def move_coordinator(self, group: str, node_id: int, via: int | None = None, timeout: float = 30.0) -> Any:
        """Move the group's coordinator to node `node_id` (its __consumer_offsets partition gets
        the node as preferred leader and a preferred-leader election, through the controller),
        asked of node `via`'s control API (default: the first running node); returns once the
        node answers for the group: {"group_id", "partition", "coordinator", "previous"}.
        ControlError: the node is not live or not in the partition's ISR (400, 409), or it did
        not take over within `timeout` (504)."""
        return self.control(via).move_coordinator(group, node_id, timeout_ms=int(timeout * 1000))

    def move_leader(self, topic: str, partition: int, node_id: int, via: int | None = None,
                    timeout: float = 30.0) -> Any:
        """Move the partition's leader to node `node_id` as move_coordinator does; returns once
        the node leads it: {"topic", "partition", "leader", "previous"}."""
        return self.control(via).move_leader(topic, partition, node_id, timeout_ms=int(timeout * 1000))

    def coordinator_topics(self, transactions: bool = False, timeout: float = 120.0) -> None:
        """Ask the nodes for a group's coordinator (and a transactional id's, transactions=True)
        until one is named, then wait until every partition of __consumer_offsets (and
        __transaction_state) has a leader: as on ZooKeeper-mode Kafka, a cluster creates them at
        the first FindCoordinator that needs them (docs/cluster.md), not before."""
        wanted = [(0, "__consumer_offsets")] + ([(1, "__transaction_state")] if transactions else [])
        for key_type, topic in wanted:
            def named(key_type: int = key_type) -> bool:
                return any(find_coordinator(n.bootstrap, "kcoord-probe", key_type)[0] == 0
                           for n in self.nodes.values() if n.alive())

            wait_for(named, timeout, f"a coordinator in {topic}", interval=0.2)

            def led(topic: str = topic) -> bool:
                a = self.assignment(topic)
                return bool(a) and all((self.state(topic, p) or {}).get("leader", -1) >= 0 for p in a)

            wait_for(led, timeout, f"every partition of {topic} to have a leader", interval=0.2)

    def kill(self, broker_id: int) -> None:
        self.nodes[broker_id].stop(signal.SIGKILL)

    def stop(self, broker_id: int, timeout: float = 60.0) -> int:
        return self.nodes[broker_id].stop(signal.SIGTERM, timeout)

    # ---- partitions (netns=True)

    def cut_off(self, broker_id: int, clients: bool = True, nodes: bool = True) -> None:
        """Cut the node off from ZooKeeper and the other nodes (packets dropped in its
        namespace); clients keep reaching it unless clients=False; nodes=False: from ZooKeeper
        alone."""
        assert self.network is not None and self._zk_server is not None, "KcoordCluster(netns=True)"
        self.network.cut_off(broker_id, zk_port=self._zk_server.port, clients=clients, nodes=nodes)

    def heal(self, broker_id: int) -> None:
        assert self.network is not None, "KcoordCluster(netns=True)"
        self.network.heal(broker_id)

    def close(self) -> None:
        if self.network is not None:
            for i in list(self.network._cut):
                self.network.heal(i)  # a cut-off node's controlled shutdown needs ZooKeeper
        for n in self.nodes.values():
            if n.alive():
                n.stop(signal.SIGTERM, 30.0)
        if self._zk is not None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:  # noqa: BLE001 - closing a client of a stopped server
                pass
            self._zk = None
        if self._zk_server is not None:
            self._zk_server.stop()
            self._zk_server = None
        if self.network is not None:
            self.network.close()
            self.network = None


__all__ = ["KcoordCluster", "free_port", "wait_for"]
