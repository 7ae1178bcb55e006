"""What a transaction-coordinator method hands back to its runtime, and the marker jobs of
prepared transactions."""
from __future__ import annotations

from dataclasses import dataclass

from kcoord.server.coordinator.result import CoordinatorResult

# The coordinator runtime's result (server/coordinator/result.py) with __transaction_state
# records (TxnRecord), each appended to the partition of its transactional id. `on_appended`
# may return a Deferred of the answer (EndTxn answers once its markers are written);
# CompleteCommit / CompleteAbort are written with durable=False.
TxnResult = CoordinatorResult


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """A prepared transaction whose COMMIT / ABORT markers must be written to every partition
    it touched before its Complete state is."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]
    # the leader epoch of the transactional id's __transaction_state partition when its
    # coordinator wrote the decision (Kafka's coordinatorEpoch; 0 on one node)
    coordinator_epoch: int = 0
