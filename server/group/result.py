"""What a group-coordinator handler hands back to the runtime: the coordinator runtime's
result (server/coordinator/result.py, which states the one rule every group type follows)
with __consumer_offsets records (CoordinatorRecord). Consumer and share groups replay their
records as they make them and hand the runtime what they replaced (`previous`); offsets and
classic groups return their records, which the runtime replays as the request returns."""
from __future__ import annotations

from kcoord.server.coordinator.result import CoordinatorResult

__all__ = ["CoordinatorResult"]
