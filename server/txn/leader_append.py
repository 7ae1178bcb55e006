"""How the transaction coordinator's batches (COMMIT / ABORT markers, TxnOffsetCommit's
transactional offsets) reach a partition's log, and when they count as written.

On one node: appended at leader epoch 0, written once fdatasync'd. On a cluster node the
partition's log has a replica (server/replication/): only its leader appends (anything else
is NOT_LEADER_OR_FOLLOWER, the sender looks for the new leader), the batch carries the
leader's epoch, the replica manager is told (its high watermark), and the batch is written
once it is durable here and every member of the ISR has it (Kafka appends markers with
acks=-1: a marker only the old leader had would leave the transaction open on the new one).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.protocol.errors import ErrorCode, KafkaError, error_code_of
from kcoord.server.deferred import Deferred
from kcoord.storage.flusher import group_commit
from kcoord.storage.log import PartitionLog

LEADER_EPOCH = 0  # one node: no leader epochs


def append_as_leader(plog: PartitionLog, data: bytes | bytearray, manager: Any) -> tuple[int, int]:
    """Append `data` (whole batches); (base offset, last offset). Raises KafkaError
    NOT_LEADER_OR_FOLLOWER when this node does not lead the partition's replica."""
    replica = plog.replica
    epoch = LEADER_EPOCH
    if replica is not None:
        if not replica.is_leader or replica.stopped:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"not the leader of {plog.path}")
        epoch = replica.leader_epoch
    base, last, _ = plog.append_batches(data, None, epoch)
    if replica is not None and manager is not None:
        manager.leader_appended(replica, base)
    return base, last


class _Outcome:
    """What the acks=all purgatory writes its answer into (server/replication/delayed_produce.py)."""

    __slots__ = ("error", "message")

    def __init__(self) -> None:
        self.error = ErrorCode.NONE
        self.message = ""


def when_written(plog: PartitionLog, last: int, manager: Any, timeout_ms: int,
                 done: Callable[[ErrorCode | None], None]) -> None:
    """done(None) once `last` is durable here and, on a replicated partition, in every ISR
    member; done(code) at the first failure (the ISR wait's code, or REQUEST_TIMED_OUT)."""
    replica = plog.replica
    waits = 2 if replica is not None and manager is not None else 1
    finished = False

    def one(code: ErrorCode | None) -> None:
        nonlocal waits, finished
        if finished:
            return
        waits -= 1
        if code is not None or waits == 0:
            finished = True
            done(code)

    group_commit(plog).when_durable(last, lambda exc: one(None if exc is None else error_code_of(exc)))
    if waits == 2:
        from kcoord.server.replication.delayed_produce import Waiting, watch

        outcome = _Outcome()
        acked: Deferred[None] = watch(manager.produce_purgatory, timeout_ms,
                                      [Waiting(outcome, replica, last + 1, 1)])
        acked.add_callback(lambda _: one(None if outcome.error == ErrorCode.NONE else outcome.error))
