"""What a transaction-coordinator method hands back to its runtime."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode
from protocol.txn_log import TxnRecord


@dataclass(slots=True)
class TxnResult:
    """records: to append to __transaction_state before answering (each to the partition of
    its transactional id).

    With no records, `response` is the answer. With records, the runtime appends them
    durably, replays each through TransactionCoordinator.replay (the only way persisted state
    changes), then calls `on_appended(None)`; if the append fails it calls `on_appended(code)`
    with the code the client should see and replays nothing. `on_appended` returns the answer,
    or a Deferred of it (EndTxn answers once its markers are written)."""

    records: list[TxnRecord] = field(default_factory=list)
    response: Any = None
    on_appended: Callable[[ErrorCode | None], Any] | None = None
    # False only for CompleteCommit / CompleteAbort: replayed once appended, without waiting
    # for its fdatasync. Nothing acknowledged depends on it being on disk (the decision and
    # the markers already are), a restart that lost it finishes the prepared transaction
    # again, and any later record of the id is durable only once it is (one log, in order).
    durable: bool = True


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """A prepared transaction whose COMMIT / ABORT markers must be written to every partition
    it touched before its Complete state is."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]
