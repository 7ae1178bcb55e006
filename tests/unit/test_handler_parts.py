"""Handlers receive the parts they use (issue 22): no part outside the composition root takes
the node, no handler reaches the node through its RequestContext, the hot APIs' routes are
methods of handler areas the composition root (server/node.py) builds with their parts, one
object per area."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from kcoord.protocol.api import ApiKey
from kcoord.server.context import RequestContext
from kcoord.server.handlers.routes import _TABLE, ROUTES

SERVER_DIR = Path(__file__).resolve().parents[2] / "server"
HANDLERS_DIR = SERVER_DIR / "handlers"
# the composition root (server/node.py), the node (server/broker.py) and the process around it
ROOT_MODULES = {"node.py", "broker.py", "app.py"}

# the request paths issue 22 walks from the socket to the answer (two of them direct calls)
WALKED = {ApiKey.OFFSET_COMMIT, ApiKey.HEARTBEAT, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.PRODUCE}


def _node_references(path: Path) -> set[str]:
    """How a module refers to the node: "Broker" (the class named: imported, a parameter's
    type), "import" (its module imported), ".broker" (read off anything), "broker arg" (a
    parameter so named), "parts" (a node's parts read: `broker.parts`, `node.parts`,
    `x.broker.parts`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Name) and node.id == "Broker":
            found.add("Broker")
        elif isinstance(node, ast.ImportFrom) and node.module == "kcoord.server.broker":
            found.add("import")
        elif isinstance(node, ast.arg) and node.arg == "broker":
            found.add("broker arg")
        elif isinstance(node, ast.Attribute) and node.attr == "broker":
            found.add(".broker")
        elif isinstance(node, ast.Attribute) and node.attr == "parts":
            owner = node.value
            if (isinstance(owner, ast.Name) and owner.id in ("broker", "node")) or (
                    isinstance(owner, ast.Attribute) and owner.attr == "broker"):
                found.add("parts")
    return found


def _reaches_the_node(path: Path) -> bool:
    """A module naming Broker (a parameter's type) or reading `.broker` off anything."""
    return bool(_node_references(path) & {"Broker", ".broker", "broker arg"})


def _takes_the_node(path: Path) -> bool:
    """A module naming Broker (importing it, a parameter's type) or reading a node's parts."""
    return bool(_node_references(path) & {"Broker", "import", "parts"})


def test_no_part_outside_the_composition_root_takes_the_node():
    parts = [p for p in SERVER_DIR.rglob("*.py") if not (p.parent == SERVER_DIR and p.name in ROOT_MODULES)]
    assert {str(p.relative_to(SERVER_DIR)) for p in parts if _takes_the_node(p)} == set()


def test_the_request_context_does_not_carry_the_node():
    assert "broker" not in {f.name for f in dataclasses.fields(RequestContext)}


def test_no_handler_module_reaches_the_node():
    reaching = {p.stem for p in HANDLERS_DIR.glob("*.py") if _reaches_the_node(p)}
    assert reaching == set()


def test_every_api_is_a_method_of_an_area_built_by_the_root():
    for d in _TABLE:
        assert ROUTES[d.key].area is not None, d
    for key in WALKED:
        route = ROUTES[key]
        assert route.handler.__qualname__.startswith(route.area + ".")
        assert route.direct is None or route.direct.__qualname__.startswith(route.area + ".")


async def test_the_root_builds_every_area_the_routes_name(tmp_path):
    from kcoord.server.handlers.routes import handler_of
    from tests.unit.test_produce_helpers import make_broker

    broker = await make_broker(tmp_path)
    try:
        named = {ROUTES[d.key].area for d in _TABLE} - {None}
        assert named <= set(broker.parts.areas), sorted(named - set(broker.parts.areas))
        for d in _TABLE:
            handler = handler_of(broker.parts.areas, d.key)
            owner = getattr(handler, "__self__", None)
            if ROUTES[d.key].area is not None:
                assert type(owner).__name__ == ROUTES[d.key].area
                assert owner is broker.parts.areas[ROUTES[d.key].area].get()  # one object per area
    finally:
        await broker.stop()


async def test_a_reset_builds_the_parts_anew_and_the_next_request_uses_them(tmp_path):
    import struct

    from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

    from kcoord.server.broker import Broker
    from kcoord.server.config import Config
    from kcoord.server.node import dispatcher_for
    from kcoord.server.session import Session

    broker = Broker(Config({"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 1}))
    await broker.start()
    broker.start_background()
    await broker.loaded()
    dispatcher, session = dispatcher_for(broker), Session(None, "127.0.0.1")

    def list_groups() -> ListGroupsResponse:
        frame = struct.pack(">hhih", ApiKey.LIST_GROUPS, 2, 1, 1) + b"t" + bytes(ListGroupsRequest(version=2).encode(version=2))
        return ListGroupsResponse.decode(dispatcher.handle(frame, session)[8:], version=2)

    try:
        assert list_groups().error_code == 0
        old_parts, old_area = broker.parts, broker.parts.areas["GroupApis"].built()
        old_coordinator = old_parts.coordinator.built()
        assert old_area is not None and old_coordinator is not None
        broker.reset()
        await broker.loaded()
        assert broker.parts is not old_parts
        assert broker.parts.coordinator.built() is None  # built again at its first use
        assert list_groups().error_code == 0
        new_area = broker.parts.areas["GroupApis"].built()
        assert new_area is not None and new_area is not old_area
        assert new_area.coordinator is broker.parts.coordinator.built() is not old_coordinator
    finally:
        await broker.stop()
