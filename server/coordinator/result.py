"""What a coordinator shard's method hands back to the runtime (server/coordinator/runtime.py),
and the one rule by which the records of a result change the shard's state.

The rule (Kafka's CoordinatorRuntime): a write's records are replayed into the shard's state
when the write is made, through the shard's one replay (the same one loading uses), so that
the next operation, even in the same loop turn, sees them. The runtime keeps, per write, the
record that puts back what each touched key held before (the shard's `current_record`), until
the write is durable. The answer, and anything the write lets a client observe as
acknowledged, waits until then. If the records do not reach the log (the append or its
fdatasync fails), the runtime replays those previous records, newest first, so the shard is
exactly as before the write, and then tells the shard (`on_appended(code)`). Reads that
report what is committed (OffsetFetch, the committed offsets of a group, and every request
and read of a transactional id: server/txn/coordinator.py) read the committed value of a key
while a write of it is in flight (`runtime.committed`), as Kafka's reads at the last
committed offset.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from kcoord.protocol.errors import ErrorCode

R = TypeVar("R")


@dataclass(slots=True)
class CoordinatorResult(Generic[R]):
    """records: to append to the shard's topic before answering (each to the partition of its
    key: the group's __consumer_offsets partition, the transactional id's __transaction_state
    partition).

    With no records, `response` is the answer (a response object, or a Deferred completed
    later, e.g. a parked JoinGroup).

    With records, the runtime replays them now (see the module's rule), appends them durably,
    then calls `on_appended(None)`; if the append fails it reverts them and calls
    `on_appended(code)` with the code the client should see (already mapped by the shard's
    append_error). `on_appended` returns the response, or a Deferred of it (EndTxn answers
    once its markers are written).

    With records and a `response` Deferred: that Deferred is the answer from the start (the
    client waits on it like a parked request), and `on_appended` completes it; what it
    returns is ignored. A classic group leader's SyncGroup is answered this way, in the same
    pass as its followers, once the assignment is durable.

    previous: None, unless the shard replayed the records itself while it made them (a
    consumer group's heartbeat reads what its own earlier records did): then the records
    that put back what they replaced, in the order they were made (a key changed before its
    record, such as a group the request created, has its entry too). The runtime reverts a
    failed write from it exactly as from the previous records it takes itself.
    """

    records: list[R] = field(default_factory=list)
    response: Any = None
    on_appended: Callable[[ErrorCode | None], Any] | None = None
    previous: list[R] | None = None
    # False only for CompleteCommit / CompleteAbort: answered once appended, without waiting
    # for its fdatasync. Nothing acknowledged depends on it being on disk (the decision and
    # the markers already are), a restart that lost it finishes the prepared transaction
    # again, and any later record of the id is durable only once it is (one log, in order).
    durable: bool = True
