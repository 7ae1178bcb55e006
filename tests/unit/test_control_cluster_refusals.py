"""The control API of a cluster node before anything reaches the cluster: reset is refused
(409, nothing touched), a move before the node has joined is refused (409), and a malformed
move is a 400. The cluster tests (tests/integration/test_cluster_control.py) cover the moves."""
from __future__ import annotations

import pytest

from kcoord.server.control.api import make_handler
from kcoord.server.control.cluster_moves import ClusterMoves
from kcoord.server.control.http import HttpError
from kcoord.server.control.plane import ControlPlane


def plane() -> ControlPlane:
    def never(*_a: object) -> None:
        raise AssertionError("a refused request touched the node")

    # the node's parts are never reached by these requests
    return ControlPlane(None, [], None, never, never, lambda: {}, ClusterMoves(lambda: None, "test"))  # type: ignore[arg-type]


async def status_of(method: str, path: str, body: object = None) -> tuple[int, str]:
    handle = make_handler(plane())
    try:
        status, answer = await handle(method, path.strip("/").split("/"), {}, body)
    except HttpError as e:
        return e.status, str(e)
    return status, str(answer)


async def test_reset_is_refused_on_a_cluster_node():
    status, message = await status_of("POST", "/reset")
    assert status == 409 and "cluster node" in message


async def test_moves_before_the_node_has_joined_are_refused():
    assert (await status_of("POST", "/groups/g/coordinator", {"node": 2}))[0] == 409
    assert (await status_of("POST", "/partitions/t/0/leader", {"node": 2}))[0] == 409
    assert (await status_of("POST", "/brokers/2/down"))[0] == 409


@pytest.mark.parametrize("body", [{"node": 2, "timeout_ms": -1}, {"node": 2, "timeout_ms": "soon"}])
async def test_a_bad_timeout_is_a_400(body):
    assert (await status_of("POST", "/groups/g/coordinator", body))[0] == 400
