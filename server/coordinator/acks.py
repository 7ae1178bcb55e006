"""A coordinator's appends on a cluster node wait for the in-sync replicas, as Kafka's group
coordinator appends with `offsets.commit.required.acks` (default -1) through its replica
manager (GroupMetadataManager.appendForGroup: a DelayedProduce with the commit timeout).

The writer (server/coordinator/writer.py) asks, per partition batch:
- `refused(replica, topic)` before appending: NOT_LEADER_OR_FOLLOWER when this node no longer
  leads the partition, INVALID_REQUIRED_ACKS for a value the replica manager does not take
  (Kafka's isValidRequiredAcks: -1, 0, 1), NOT_ENOUGH_REPLICAS with acks -1 and an ISR smaller
  than the topic's min.insync.replicas; None: append, stamped with the replica's leader epoch;
- `appended(replica, base_offset)` after the append (the leader's epoch cache, and the high
  watermark of an ISR of one);
- `wait(replica, end_offset, timeout_ms, done)` once the batch is durable locally: with acks
  -1, `done(code)` once every ISR member has the records (the high watermark reached
  `end_offset`) or not: NOT_ENOUGH_REPLICAS_AFTER_APPEND (the ISR shrank below
  min.insync.replicas), NOT_LEADER_OR_FOLLOWER (leadership moved), REQUEST_TIMED_OUT. With
  acks 0 or 1 nothing is waited for (False).

The transaction coordinator's batches in __consumer_offsets (TxnOffsetCommit's offsets, the
markers) go through the same object (server/txn/leader_append.py, from the group runtime's
writer), as do the markers it writes to data partitions (with -1).

The codes are the replica manager's; the shard's `append_error` (protocol/errors.py, the one
place) maps them to what its clients see. Only a cluster node builds this
(server/cluster/coordinators.py): on one node the writer has none and nothing changes.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.replication.delayed_produce import Waiting, watch

VALID_ACKS = (-1, 0, 1)


class _Outcome:
    """What a DelayedProduce writes its answer into (the Produce handler's result shape)."""

    __slots__ = ("error", "message")

    def __init__(self) -> None:
        self.error = ErrorCode.NONE
        self.message: str | None = None


class ReplicaAcks:
    def __init__(self, manager: Any, required_acks: int, min_isr: Callable[[str], int]) -> None:
        """manager: the node's ReplicaManager (server/replication/replica_manager.py: its
        produce purgatory and leader_appended); required_acks: offsets.commit.required.acks;
        min_isr(topic): the topic's effective min.insync.replicas."""
        self.manager = manager
        self.required_acks = required_acks
        self.min_isr = min_isr

    def requiring(self, required_acks: int) -> ReplicaAcks:
        """The same replica manager and min.insync.replicas with other required acks (the
        transaction markers a group coordinator's partition takes are appended with -1, as
        Kafka's WriteTxnMarkers handler appends them)."""
        return self if required_acks == self.required_acks else ReplicaAcks(self.manager, required_acks, self.min_isr)

    def refused(self, replica: Any, topic: str) -> ErrorCode | None:
        if not replica.is_leader or replica.stopped:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.required_acks not in VALID_ACKS:
            return ErrorCode.INVALID_REQUIRED_ACKS
        if self.required_acks == -1 and len(replica.isr) < self.min_isr(topic):
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return None

    def appended(self, replica: Any, base_offset: int) -> None:
        self.manager.leader_appended(replica, base_offset)

    def wait(self, replica: Any, end_offset: int, timeout_ms: int, done: Callable[[ErrorCode], None]) -> bool:
        if self.required_acks != -1:
            return False
        outcome = _Outcome()
        waiting = Waiting(outcome, replica, end_offset, self.min_isr(replica.topic))
        watch(self.manager.produce_purgatory, timeout_ms, [waiting]).add_callback(lambda _: done(outcome.error))
        return True
