"""What a group-coordinator handler hands back to the runtime: the coordinator runtime's
result (server/coordinator/result.py) with __consumer_offsets records (CoordinatorRecord).
Consumer groups apply their records as they make them (applied=True, with undo); offsets
and classic groups change state in replay once the records are durable."""
from __future__ import annotations

from kcoord.server.coordinator.result import CoordinatorResult

__all__ = ["CoordinatorResult"]
