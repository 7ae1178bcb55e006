"""One transactional id's state as the coordinator holds it (Kafka's TransactionMetadata).

Everything in here except `pending` is exactly what the latest TransactionLogValue of the id
says (`last_producer_epoch` too: memory only in Kafka, it rides along with a live record):
`apply` (replay) is the only code that sets it, and `record_value()` gives it back as a value
that, replayed, puts it back exactly (how the runtime reverts a failed write). `pending` is never in a record: it is
the Complete state a prepared transaction waits for while its markers are written (and
PrepareEpochFence for the length of a fence). A record being written is not marked here: the
coordinator asks its runtime whether a write of the id is in flight (server/txn/coordinator.py).
`value()` builds the record of a transition from the current state.
"""
from __future__ import annotations

from dataclasses import dataclass

from kcoord.protocol.txn_log import NO_PRODUCER_ID, TxnValue
from kcoord.server.txn.state import TxnState, check_transition

NO_PRODUCER_EPOCH = -1
INT16_MAX = 2**15 - 1

TopicPartition = tuple[str, int]


def epoch_exhausted(epoch: int) -> bool:
    """Kafka's TransactionMetadata.isEpochExhausted: the last two epochs are kept for fencing."""
    return epoch >= INT16_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """The transaction coordinator's settings (Kafka's names, dots as underscores)."""

    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    # the finalized transaction.version feature (Kafka 4's default: 2): the TransactionLogValue
    # version written (1 from level 1) and the path of aborts the coordinator starts itself
    transaction_version: int = 2


class TxnMetadata:
    __slots__ = (
        "transactional_id",
        "producer_id",
        "previous_producer_id",
        "next_producer_id",
        "producer_epoch",
        "last_producer_epoch",
        "timeout_ms",
        "state",
        "partitions",
        "start_ms",
        "last_update_ms",
        "client_transaction_version",
        "pending",
    )

    def __init__(self, transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = NO_PRODUCER_ID
        self.next_producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.timeout_ms = timeout_ms
        self.state = TxnState.EMPTY
        self.partitions: set[TopicPartition] = set()
        self.start_ms = -1
        self.last_update_ms = now_ms
        self.client_transaction_version = 0
        self.pending: TxnState | None = None

    @classmethod
    def from_value(cls, transactional_id: str, v: TxnValue) -> TxnMetadata:
        m = cls(transactional_id, v.producer_id, v.timeout_ms, v.last_update_ms)
        m.apply(v)
        return m

    # ---------------------------------------------------------------- replay

    def apply(self, v: TxnValue) -> None:
        """Take on the state a record says (replay: live as the write is made, at loading, and
        when a failed write is reverted); `pending` is not the record's and is left alone."""
        self.state = TxnState.from_id(v.state)
        self.producer_id = v.producer_id
        self.previous_producer_id = v.previous_producer_id
        self.next_producer_id = v.next_producer_id
        self.producer_epoch = v.producer_epoch
        self.last_producer_epoch = v.last_producer_epoch
        self.timeout_ms = v.timeout_ms
        self.partitions = {(t, p) for t, ps in v.partitions.items() for p in ps}
        self.start_ms = v.start_ms
        self.last_update_ms = v.last_update_ms
        self.client_transaction_version = v.client_transaction_version

    # ---------------------------------------------------------------- transitions

    def value(self, target: TxnState, now_ms: int, *, producer_id: int | None = None,
              producer_epoch: int | None = None, last_producer_epoch: int | None = None,
              timeout_ms: int | None = None, partitions: set[TopicPartition] | None = None,
              start_ms: int | None = None, previous_producer_id: int | None = None,
              next_producer_id: int | None = None, client_transaction_version: int | None = None) -> TxnValue:
        """The record moving this id to `target` (checked against the transition table);
        every field not given keeps its current value."""
        check_transition(self.transactional_id, self.state, target)
        parts = self.partitions if partitions is None else partitions
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(parts):
            by_topic.setdefault(t, []).append(p)
        return TxnValue(
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=target.id,
            partitions=by_topic,
            last_update_ms=now_ms,
            start_ms=self.start_ms if start_ms is None else start_ms,
            previous_producer_id=self.previous_producer_id if previous_producer_id is None else previous_producer_id,
            next_producer_id=self.next_producer_id if next_producer_id is None else next_producer_id,
            client_transaction_version=(self.client_transaction_version if client_transaction_version is None
                                        else client_transaction_version),
            last_producer_epoch=self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
        )

    def record_value(self) -> TxnValue:
        """What the id holds now, as a value: replaying it puts every persisted field back."""
        by_topic: dict[str, list[int]] = {}
        if self.partitions:
            for t, p in sorted(self.partitions):
                by_topic.setdefault(t, []).append(p)
        # positional, in TxnValue's field order: this runs for every write (its revert)
        return TxnValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state.value[0], by_topic,
                        self.last_update_ms, self.start_ms, self.previous_producer_id, self.next_producer_id,
                        self.client_transaction_version, self.last_producer_epoch)

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    def snapshot(self) -> tuple:
        """The persisted fields (tests compare live state with replayed state)."""
        return (self.transactional_id, self.producer_id, self.previous_producer_id, self.next_producer_id,
                self.producer_epoch, self.timeout_ms, self.state, frozenset(self.partitions), self.start_ms,
                self.last_update_ms, self.client_transaction_version)

    def __repr__(self) -> str:
        return (f"TxnMetadata({self.transactional_id!r}, pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"state={self.state}, pending={self.pending}, partitions={sorted(self.partitions)})")
