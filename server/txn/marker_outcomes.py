"""What the marker writer does with each partition's answer to a transaction marker (Kafka's
TransactionMarkerRequestCompletionHandler), as one table.

Before any answer is looked at, the coordinator checks it still owns the transaction: when it
no longer leads the transactional id's __transaction_state partition (NOT_COORDINATOR), is
loading it again (COORDINATOR_LOAD_IN_PROGRESS) or the id's coordinator epoch changed, every
pending marker of the transaction is dropped: the partition's next leader loads the prepared
transaction and writes them itself.

Then, per partition:

| outcome | error codes | what happens |
|---|---|---|
| WRITTEN | NONE, UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION | the partition is done (the last two: the producer could not have written there, Kafka removes it) |
| RETRY | UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR; NETWORK_EXCEPTION (the destination could not be reached: Kafka's disconnect); COORDINATOR_LOAD_IN_PROGRESS (kcoord's __consumer_offsets leader still loading) | sent again after the backoff, routed to the partition's leader as it is then |
| DROP | TRANSACTION_COORDINATOR_FENCED, INVALID_PRODUCER_EPOCH | a newer coordinator (or producer epoch) owns the transaction: every pending marker of it is dropped, not retried |
| FATAL | CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_REQUIRED_ACKS, and every code not named here | logged as an error and the writer stops; the transaction stays prepared until its partition is loaded again (Kafka throws IllegalStateException there, which leaves it so) |

A DROP or FATAL anywhere in one attempt decides the whole attempt.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping

from kcoord.protocol.errors import ErrorCode


class Outcome(enum.Enum):
    WRITTEN = "written"
    RETRY = "retry"
    DROP = "drop"
    FATAL = "fatal"


OUTCOMES: dict[ErrorCode, Outcome] = {
    ErrorCode.NONE: Outcome.WRITTEN,
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: Outcome.WRITTEN,
    ErrorCode.UNSUPPORTED_VERSION: Outcome.WRITTEN,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: Outcome.RETRY,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: Outcome.RETRY,
    ErrorCode.NOT_ENOUGH_REPLICAS: Outcome.RETRY,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: Outcome.RETRY,
    ErrorCode.REQUEST_TIMED_OUT: Outcome.RETRY,
    ErrorCode.KAFKA_STORAGE_ERROR: Outcome.RETRY,
    ErrorCode.NETWORK_EXCEPTION: Outcome.RETRY,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: Outcome.RETRY,
    ErrorCode.TRANSACTION_COORDINATOR_FENCED: Outcome.DROP,
    ErrorCode.INVALID_PRODUCER_EPOCH: Outcome.DROP,
    ErrorCode.CORRUPT_MESSAGE: Outcome.FATAL,
    ErrorCode.MESSAGE_TOO_LARGE: Outcome.FATAL,
    ErrorCode.RECORD_LIST_TOO_LARGE: Outcome.FATAL,
    ErrorCode.INVALID_REQUIRED_ACKS: Outcome.FATAL,
}


def outcome_of(code: ErrorCode | None) -> Outcome:
    """One partition's answer (None: written)."""
    return Outcome.WRITTEN if code is None else OUTCOMES.get(code, Outcome.FATAL)


class Decision:
    """One attempt's answers, decided: `outcome` for the transaction (WRITTEN: every marker is
    written; RETRY: `retry` holds the partitions to send again; DROP / FATAL: stop, `cause`
    names the partition and code that decided it)."""

    __slots__ = ("cause", "outcome", "retry")

    def __init__(self, outcome: Outcome, retry: dict[tuple[str, int], ErrorCode],
                 cause: tuple[tuple[str, int], ErrorCode] | None = None) -> None:
        self.outcome = outcome
        self.retry = retry
        self.cause = cause

    def __repr__(self) -> str:
        return f"Decision({self.outcome.name}, retry={sorted(self.retry)}, cause={self.cause})"


def decide(still_coordinator: bool, errors: Mapping[tuple[str, int], ErrorCode | None]) -> Decision:
    """The transaction's fate after one attempt: `still_coordinator` is whether this node still
    owns it at the same coordinator epoch; `errors` each partition's answer."""
    if not still_coordinator:
        return Decision(Outcome.DROP, {})
    retry: dict[tuple[str, int], ErrorCode] = {}
    dropped: tuple[tuple[str, int], ErrorCode] | None = None
    for tp in sorted(errors):
        code = errors[tp]
        outcome = outcome_of(code)
        if outcome is Outcome.FATAL:
            return Decision(Outcome.FATAL, {}, (tp, code if code is not None else ErrorCode.NONE))
        if outcome is Outcome.DROP and dropped is None:
            dropped = (tp, code if code is not None else ErrorCode.NONE)
        elif outcome is Outcome.RETRY:
            retry[tp] = code  # type: ignore[assignment]
    if dropped is not None:
        return Decision(Outcome.DROP, {}, dropped)
    return Decision(Outcome.RETRY if retry else Outcome.WRITTEN, retry)
