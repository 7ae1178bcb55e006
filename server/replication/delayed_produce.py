"""acks=all: a produce answer parked until every in-sync replica has the records (Kafka's
DelayedProduce). Watched under each (topic, partition) it waits for; the replica manager
retries it whenever a high watermark moves or a partition changes role. Each waiting
partition ends with Partition.replicated's answer: NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND (the
ISR shrank below min.insync.replicas), NOT_LEADER_OR_FOLLOWER (leadership moved), or, when the
produce's timeout_ms passes first, REQUEST_TIMED_OUT."""
from __future__ import annotations

from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.deferred import Deferred
from kcoord.server.purgatory import DelayedOperation


class Waiting:
    """One partition's append waiting for replication: `result` gets the error."""

    __slots__ = ("result", "replica", "required_offset", "min_isr")

    def __init__(self, result: Any, replica: Any, required_offset: int, min_isr: int) -> None:
        self.result = result  # has .error and .message (the Produce handler's _Result)
        self.replica = replica
        self.required_offset = required_offset  # the append's last offset + 1
        self.min_isr = min_isr


class DelayedProduce(DelayedOperation):
    __slots__ = ("waiting", "deferred")

    def __init__(self, timeout_ms: int, waiting: list[Waiting]) -> None:
        super().__init__(max(timeout_ms, 0))
        self.waiting = waiting
        self.deferred: Deferred[None] = Deferred()

    def try_complete(self) -> bool:
        for w in self.waiting:
            done, _ = w.replica.replicated(w.required_offset, w.min_isr)
            if not done:
                return False
        return self.force_complete()

    def on_complete(self) -> None:
        for w in self.waiting:
            done, code = w.replica.replicated(w.required_offset, w.min_isr)
            if not done:
                code = ErrorCode.REQUEST_TIMED_OUT
            if code != ErrorCode.NONE:
                w.result.error = code
                w.result.message = f"{code.name} while waiting for the in-sync replicas"
        self.deferred.complete(None)


def watch(purgatory: Any, timeout_ms: int, waiting: list[Waiting]) -> Deferred[None]:
    op = DelayedProduce(timeout_ms, waiting)
    purgatory.try_complete_else_watch(op, {(w.replica.topic, w.replica.partition) for w in waiting})
    return op.deferred
