"""What the control API and the virtual brokers read of the node: its current parts, each an
accessor read at its use (a reset builds the node's parts anew, server/control/reset.py).
The composition root (server/node.py, `node_state`) builds it."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.topics import TopicRegistry


@dataclass(frozen=True)
class NodeState:
    topics: Callable[[], TopicRegistry]
    coordinator: Callable[[], GroupCoordinator]  # built now if it was not yet
    runtime: Callable[[], Any]  # the group coordinator's runtime (kcoord.server.coordinator.runtime)
    offsets_partitions: Callable[[], int]  # __consumer_offsets' partition count
