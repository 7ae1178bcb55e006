"""Network namespaces for a test cluster (Linux, root): one bridge in the host namespace with
169.254.S.1/24 (link-local space only, S picked unused), and one namespace per node joined to
it by a veth pair, the node at 169.254.S.(10+id). ZooKeeper listens on the bridge's address;
the test process (clients) reaches every node through the bridge.

`cut_off(id)` installs an nftables table *inside the node's namespace* that drops every packet
between the node and ZooKeeper's port and between the node and the other nodes' addresses, in
both directions (packets dropped, not refused: TCP connections hang as in a real partition);
clients on the host keep reaching the node; `cut_off(id, nodes=False)` drops only ZooKeeper's
packets (the nodes still reach each other). `cut_off(id, clients=False)` takes its link down
instead (nothing reaches it). `heal(id)` undoes either. Nothing outside the namespaces and the
bridge this object creates is touched; `close()` deletes them.

    net = Network().create([1, 2, 3])
    net.address(1)              "169.254.S.11"
    net.prefix(1)               ["ip", "netns", "exec", "kcoord-<tag>-1"]: run a command in it
    net.cut_off(1, zk_port=2181); net.heal(1)
    net.close()
"""
from __future__ import annotations

import atexit
import fcntl
import os
import random
import re
import secrets
import shutil
import subprocess

LOCK = "/run/kcoord-netns.lock"  # serialises subnet choice between test processes on one machine
TABLE = "kcoord_cutoff"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def available() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nft"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


def used_link_local_subnets() -> set[int]:
    """The third octets S of every 169.254.S.x address or route on the host."""
    out = _ip("-4", "-o", "addr").stdout + _ip("-4", "route").stdout
    return {int(s) for s in re.findall(r"169\.254\.(\d+)\.", out)}


class Network:
    def __init__(self) -> None:
        self.tag = secrets.token_hex(3)[:5]
        self.subnet: int | None = None
        self.bridge = f"kcb{self.tag}"
        self.ids: list[int] = []
        self._cut: dict[int, bool] = {}  # id -> cut with clients=False (link down)

    # ---- names and addresses

    @property
    def host(self) -> str:
        """The bridge's address in the host namespace (ZooKeeper's and the clients')."""
        assert self.subnet is not None, "create() first"
        return f"169.254.{self.subnet}.1"

    def address(self, node: int) -> str:
        assert self.subnet is not None and 0 <= node <= 240, node
        return f"169.254.{self.subnet}.{10 + node}"

    def namespace(self, node: int) -> str:
        return f"kcoord-{self.tag}-{node}"

    def _veth(self, node: int) -> str:
        return f"kcv{self.tag}{node}"

    def prefix(self, node: int) -> list[str]:
        """The command prefix that runs a program in the node's namespace (`ip netns exec`
        execs it: the process id is the program's)."""
        return ["ip", "netns", "exec", self.namespace(node)]

    # ---- life

    def create(self, ids: list[int]) -> Network:
        why = available()
        if why:
            raise RuntimeError(why)
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            # Docker's pools here take the lowest free /24s of 169.254.0.0/16 (and docker0 .200):
            # pick among 100-199, unused
            free = sorted(set(range(100, 200)) - used_link_local_subnets())
            if not free:
                raise RuntimeError("no unused 169.254.S.0/24 subnet")
            self.subnet = random.choice(free)
            atexit.register(self.close)
            _ip("link", "add", self.bridge, "type", "bridge")
            # bridged frames skip the host's iptables (br_netfilter), whatever its FORWARD policy
            _ip("link", "set", self.bridge, "type", "bridge", "nf_call_iptables", "0", check=False)
            _ip("addr", "add", f"{self.host}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        for node in ids:
            self.add(node)
        return self

    def add(self, node: int) -> None:
        ns, veth = self.namespace(node), self._veth(node)
        _ip("netns", "add", ns)
        self.ids.append(node)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", veth, "master", self.bridge, "up")
        _ip("-n", ns, "addr", "add", f"{self.address(node)}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")

    def close(self) -> None:
        for node in list(self.ids):
            _ip("netns", "delete", self.namespace(node), check=False)  # its veth goes with it
            self.ids.remove(node)
        if self.subnet is not None:
            _ip("link", "delete", self.bridge, check=False)
            self.subnet = None

    # ---- partitions

    def cut_off(self, node: int, zk_port: int, clients: bool = True, nodes: bool = True) -> None:
        """Drop everything between the node and ZooKeeper and the other nodes (clients on the
        host still reach it); nodes=False: between the node and ZooKeeper only; clients=False:
        its link down, nothing reaches it."""
        if not clients:
            _ip("-n", self.namespace(node), "link", "set", "eth0", "down")
            self._cut[node] = True
            return
        others = ", ".join(self.address(n) for n in self.ids if n != node) or self.host
        node_in = f"    ip saddr {{ {others} }} drop\n" if nodes else ""
        node_out = f"    ip daddr {{ {others} }} drop\n" if nodes else ""
        rules = (
            f"table inet {TABLE} {{\n"
            "  chain input {\n    type filter hook input priority 0; policy accept;\n"
            f"{node_in}    ip saddr {self.host} tcp sport {zk_port} drop\n  }}\n"
            "  chain output {\n    type filter hook output priority 0; policy accept;\n"
            f"{node_out}    ip daddr {self.host} tcp dport {zk_port} drop\n  }}\n"
            "}\n")
        subprocess.run([*self.prefix(node), "nft", "-f", "-"], input=rules, check=True, capture_output=True,
                       text=True, timeout=30)
        self._cut[node] = False

    def heal(self, node: int) -> None:
        if self._cut.pop(node, None):
            _ip("-n", self.namespace(node), "link", "set", "eth0", "up")
        else:
            subprocess.run([*self.prefix(node), "nft", "delete", "table", "inet", TABLE], check=False,
                           capture_output=True, timeout=30)

    def is_cut(self, node: int) -> bool:
        return node in self._cut
