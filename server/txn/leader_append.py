"""How the transaction coordinator's batches (COMMIT / ABORT markers, TxnOffsetCommit's
transactional offsets) reach a partition's log, and when they count as written.

On one node (no `acks`, or a partition without a replica): appended at leader epoch 0,
written once fdatasync'd. On a cluster node the partition's log has a replica
(server/replication/) and the appends are acknowledged as the coordinators' own
(server/coordinator/acks.py ReplicaAcks, one copy of the rules): only the leader appends
(NOT_LEADER_OR_FOLLOWER elsewhere, the sender looks for the new leader), with acks -1 only
with an ISR of at least min.insync.replicas (NOT_ENOUGH_REPLICAS), the batch carries the
leader's epoch, the replica manager is told (its high watermark), and the batch is written
once it is durable here and, with acks -1, every member of the ISR has it (Kafka appends
markers with acks -1: a marker only the old leader had would leave the transaction open on
the new one; TxnOffsetCommit's offsets with offsets.commit.required.acks).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kcoord.protocol.errors import ErrorCode, KafkaError, error_code_of
from kcoord.storage.flusher import group_commit
from kcoord.storage.log import PartitionLog

if TYPE_CHECKING:
    from kcoord.server.coordinator.acks import ReplicaAcks

LEADER_EPOCH = 0  # one node: no leader epochs


def append_as_leader(plog: PartitionLog, data: bytes | bytearray, acks: ReplicaAcks | None) -> tuple[int, int]:
    """Append `data` (whole batches); (base offset, last offset). Raises KafkaError with the
    replica manager's code when `acks` refuses the append (NOT_LEADER_OR_FOLLOWER,
    NOT_ENOUGH_REPLICAS, INVALID_REQUIRED_ACKS)."""
    replica = plog.replica if acks is not None else None
    epoch = LEADER_EPOCH
    if replica is not None:
        refused = acks.refused(replica, replica.topic)  # type: ignore[union-attr]
        if refused is not None:
            raise KafkaError(refused, f"{plog.path}: {refused.name}")
        epoch = replica.leader_epoch
    base, last, _ = plog.append_batches(data, None, epoch)
    if replica is not None:
        acks.appended(replica, base)  # type: ignore[union-attr]
    return base, last


def when_written(plog: PartitionLog, last: int, acks: ReplicaAcks | None, timeout_ms: int,
                 done: Callable[[ErrorCode | None], None]) -> None:
    """done(None) once `last` is durable here and, on a replicated partition with acks -1, in
    every ISR member; done(code) at the first failure (the fdatasync's, or the ISR wait's:
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT)."""
    replica = plog.replica if acks is not None else None

    def replicated(code: ErrorCode) -> None:
        done(None if code == ErrorCode.NONE else code)

    def on_durable(exc: BaseException | None) -> None:
        if exc is not None:
            done(error_code_of(exc))
        elif replica is None or not acks.wait(replica, last + 1, timeout_ms, replicated):  # type: ignore[union-attr]
            done(None)

    group_commit(plog).when_durable(last, on_durable)
