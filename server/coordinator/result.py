"""What a coordinator shard's method hands back to the runtime (server/coordinator/runtime.py)."""
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

    With records, the runtime appends them durably, replays each through the shard's replay
    (the only way persisted state changes), then calls `on_appended(None)`; if the append
    fails it calls `on_appended(code)` with the code the client should see (already mapped by
    the shard's append_error) and replays nothing. `on_appended` returns the response, or a
    Deferred of it (EndTxn answers once its markers are written).

    With records and a `response` Deferred: that Deferred is the answer from the start (the
    client waits on it like a parked request), and the replay of the records, or on failure
    `on_appended`, completes it; what `on_appended` returns is ignored. A classic group
    leader's SyncGroup is answered this way, in the same pass as the followers its record
    answers.
    """

    records: list[R] = field(default_factory=list)
    response: Any = None
    on_appended: Callable[[ErrorCode | None], Any] | None = None
    # True when the records were already replayed as they were made (consumer groups, as
    # Kafka's timeline): the runtime then does not replay them again once durable, and if
    # the append fails (the records never reached the log) it calls `undo` first, which
    # replays the previous value of every key they touched, newest first.
    applied: bool = False
    undo: Callable[[], None] | None = None
    # False only for CompleteCommit / CompleteAbort: replayed once appended, without waiting
    # for its fdatasync. Nothing acknowledged depends on it being on disk (the decision and
    # the markers already are), a restart that lost it finishes the prepared transaction
    # again, and any later record of the id is durable only once it is (one log, in order).
    durable: bool = True
