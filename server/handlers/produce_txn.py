"""What Produce does for transactions (called by server/handlers/produce.py), as Kafka's
ReplicaManager / ProducerAppendInfo do:

- A request's transactional batches must all come from one producer
  (INVALID_PRODUCER_ID_MAPPING for the whole request otherwise).
- Before a producer's first transactional batch in a partition is appended, the transaction
  coordinator must have that partition in the producer's ongoing transaction (KIP-890
  verification, transaction.partition.verification.enable). Its errors as Produce answers
  them: INVALID_PRODUCER_EPOCH for a fenced epoch, INVALID_TXN_STATE ("Partition was not added
  to the transaction") before v11 and TRANSACTION_ABORTABLE from v11 for a partition that is not
  in it, NOT_ENOUGH_REPLICAS for the retriable ones (CONCURRENT_TRANSACTIONS, the coordinator
  loading or unavailable), which older clients retry without refreshing metadata.
- A non-transactional batch of a producer with a transaction open in the partition is
  INVALID_TXN_STATE.
- Once appended, a transactional batch opens (or extends) its producer's transaction in the
  partition's transaction state (server/partition_txns.py): the LSO stays at its first offset
  until the marker.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode
from storage.batch import BatchHeader
from storage.log import PartitionLog

if TYPE_CHECKING:
    from server.broker import Broker

_RETRIABLE = {
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
}
_ATTR_TRANSACTIONAL = 0x10
_MAGIC_OFFSET = 16
_PID = slice(43, 51)


def transactional_producers(req: Any) -> set[int]:
    """Producer ids of the request's transactional batches (first batch per partition)."""
    out = set()
    for t in req.topic_data:
        for p in t.partition_data:
            r = p.records
            if r and len(r) >= 61 and r[_MAGIC_OFFSET] == 2 and r[22] & _ATTR_TRANSACTIONAL:
                out.add(int.from_bytes(r[_PID], "big", signed=True))
    return out


def check_batch(broker: Broker, transactional_id: str | None, version: int, topic: str, partition: int,
                plog: PartitionLog, h: BatchHeader) -> tuple[ErrorCode, str] | None:
    """Why this idempotent / transactional batch may not be appended, or None."""
    txns = broker.data_plane.txns
    if not h.is_transactional:
        state = txns.loaded(topic, partition)
        if state is not None and state.has_ongoing(h.producer_id):
            return (ErrorCode.INVALID_TXN_STATE,
                    f"Expected transactional write from producer {h.producer_id} at offset "
                    f"{plog.log_end_offset} in partition {topic}-{partition}")
        return None
    state = txns.get(topic, partition, plog)
    if state.has_ongoing(h.producer_id) or not broker.config["transaction.partition.verification.enable"]:
        return None
    code = broker.txn.coordinator.verify_partitions(transactional_id, h.producer_id, h.producer_epoch,
                                                    [(topic, partition)])[(topic, partition)]
    if code == ErrorCode.NONE:
        return None
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH, f"Producer epoch {h.producer_epoch} of {h.producer_id} is fenced"
    if code == ErrorCode.TRANSACTION_ABORTABLE and version <= 10:
        code = ErrorCode.INVALID_TXN_STATE
    if code in (ErrorCode.INVALID_TXN_STATE, ErrorCode.TRANSACTION_ABORTABLE):
        return code, "Partition was not added to the transaction"
    if code in _RETRIABLE:
        return (ErrorCode.NOT_ENOUGH_REPLICAS,
                f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}")
    return code, None


def appended(broker: Broker, topic: str, partition: int, plog: PartitionLog, h: BatchHeader, base_offset: int) -> None:
    if h.is_transactional:
        broker.data_plane.txns.get(topic, partition, plog).on_data(h.producer_id, base_offset)
