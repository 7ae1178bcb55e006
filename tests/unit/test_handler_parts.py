"""Handlers receive the parts they use (issue 22): no handler reaches the node through its
RequestContext, the hot APIs' routes are methods of handler areas the composition root
(server/node.py) builds with their parts, and the handler modules that still take the node
are listed here, a list that may only shrink."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from kcoord.protocol.api import ApiKey
from kcoord.server.context import RequestContext
from kcoord.server.handlers.routes import _TABLE, ROUTES

HANDLERS_DIR = Path(__file__).resolve().parents[2] / "server" / "handlers"

# handler modules whose functions still take the node (Broker) as their first argument
STILL_REACHING_THE_NODE = {
    # the config APIs: server/config_admin.py's planning and describing take the node
    "alter_configs", "describe_configs", "incremental_alter_configs",
}

# the request paths the issue walks from the socket to the answer, and the first ones converted
CONVERTED = {ApiKey.OFFSET_COMMIT, ApiKey.HEARTBEAT, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.PRODUCE,
             ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.OFFSET_FETCH, ApiKey.FIND_COORDINATOR,
             ApiKey.API_VERSIONS, ApiKey.LEAVE_GROUP, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS,
             ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE, ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.LIST_OFFSETS,
             ApiKey.INIT_PRODUCER_ID, ApiKey.END_TXN, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS}


def _reaches_the_node(path: Path) -> bool:
    """A module naming Broker (a parameter's type) or reading `.broker` off anything."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "Broker":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "broker":
            return True
        if isinstance(node, ast.arg) and node.arg == "broker":
            return True
    return False


def test_the_request_context_does_not_carry_the_node():
    assert "broker" not in {f.name for f in dataclasses.fields(RequestContext)}


def test_handler_modules_reaching_the_node_are_only_the_listed_ones():
    reaching = {p.stem for p in HANDLERS_DIR.glob("*.py") if _reaches_the_node(p)} - {"routes"}
    assert reaching <= STILL_REACHING_THE_NODE, f"newly reaching the node: {sorted(reaching - STILL_REACHING_THE_NODE)}"
    # a module converted since leaves the list (so that it only shrinks)
    assert STILL_REACHING_THE_NODE <= reaching, f"converted, drop from the list: {sorted(STILL_REACHING_THE_NODE - reaching)}"


def test_the_converted_apis_are_methods_of_areas_built_by_the_root():
    declared = {d.key: d for d in _TABLE}
    for key in CONVERTED:
        route = ROUTES[key]
        assert route.area is not None, f"{key!r} is not served by a handler area"
        module = declared[key].handler.split(".")[0]
        assert module not in STILL_REACHING_THE_NODE
    # every route of a listed module is a plain function (bound to the node), every other an area's
    for d in _TABLE:
        module = d.handler.split(".")[0]
        assert (ROUTES[d.key].area is None) == (module in STILL_REACHING_THE_NODE), d


async def test_the_root_builds_every_area_the_routes_name(tmp_path):
    from kcoord.server.handlers.routes import handler_of
    from tests.unit.test_produce_helpers import make_broker

    broker = await make_broker(tmp_path)
    try:
        named = {ROUTES[d.key].area for d in _TABLE} - {None}
        assert named <= set(broker.parts.areas), sorted(named - set(broker.parts.areas))
        for d in _TABLE:
            handler = handler_of(broker, d.key)
            owner = getattr(handler, "__self__", None)
            if ROUTES[d.key].area is not None:
                assert type(owner).__name__ == ROUTES[d.key].area
                assert owner is broker.parts.areas[ROUTES[d.key].area].get()  # one object per area
    finally:
        await broker.stop()
