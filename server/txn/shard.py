"""What the coordinator runtime (server/coordinator/) needs to know of the transaction
coordinator beyond the TransactionCoordinator itself: how its records sit in
__transaction_state (the partition of a transactional id, the codec and its value version,
the codes a failed append answers with)."""
from __future__ import annotations

from collections.abc import Callable

from kcoord.protocol.errors import ErrorCode, txn_append_error
from kcoord.protocol.topics import TXN_TOPIC
from kcoord.protocol.txn_log import (
    VALUE_VERSION,
    TxnCodecError,
    TxnRecord,
    decode_txn_record,
    encode_txn_key,
    encode_txn_value,
)

__all__ = ["TXN_TOPIC", "TxnRecords"]


class TxnRecords:
    """Transaction-coordinator records in __transaction_state: each in its id's partition.
    value_version: Kafka writes TransactionLogValue v1 (flexible, tagged fields) from
    transaction.version 1, v0 below."""

    topic = TXN_TOPIC
    timeout_config = "request.timeout.ms"
    decode_errors = (TxnCodecError,)

    def __init__(self, partition_of: Callable[[str], int], value_version: int = VALUE_VERSION) -> None:
        self._partition_of = partition_of
        self.value_version = value_version

    def partition_of(self, record: TxnRecord) -> int:
        return self._partition_of(record.key.transactional_id)

    def encode(self, record: TxnRecord) -> tuple[bytes, bytes | None]:
        return encode_txn_key(record.key), encode_txn_value(record.value, self.value_version)

    decode = staticmethod(decode_txn_record)

    @staticmethod
    def append_error(code: ErrorCode) -> ErrorCode:
        return txn_append_error(code)
