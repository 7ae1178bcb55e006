"""The parts around the node's request path are built by the composition root
(server/node.py) with what they use (issue 22): the control plane, the virtual brokers, the
node's loops, the connections, the listeners' security settings and the cluster layer take
neither the Broker nor the Server, and read nothing off them."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BUILT_BY_THE_ROOT = [
    "server/control/plane.py", "server/control/intercept.py", "server/control/ports.py",
    "server/virtual/cluster.py", "server/virtual/routing.py",
    "server/connection.py", "server/connections.py", "server/security/setup.py",
    "server/log_flush.py", "server/topic_retention.py", "server/swap_adoption.py",
    "server/cluster/builder.py", "server/cluster/replicas.py", "server/cluster/local_replicas.py",
    "server/replication/wiring.py",
]


def _reaches(path: Path) -> list[str]:
    """Where a module names Broker or Server, takes a `broker` or `server`, or reads `.broker`,
    `.server`, `.parts` off anything."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name) and node.id in ("Broker", "Server"):
            found.append(f"{node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in ("broker", "server", "parts"):
            found.append(f"{node.lineno}: .{node.attr}")
        elif isinstance(node, ast.arg) and node.arg in ("broker", "server"):
            found.append(f"{node.lineno}: parameter {node.arg}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("kcoord.server.broker", "kcoord.server.app"):
            found.append(f"{node.lineno}: imports {node.module}")
    return found


def test_no_part_the_root_builds_around_the_node_reaches_the_node():
    reaching = {name: where for name in BUILT_BY_THE_ROOT if (where := _reaches(ROOT / name))}
    assert reaching == {}


def test_the_root_names_a_factory_for_each():
    import kcoord.server.node as root

    for factory in ("configured_listener", "connection_factory", "control_plane", "virtual_cluster",
                    "start_cluster_node", "replica_manager_for", "build_parts"):
        assert callable(getattr(root, factory)), factory
