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
- On a cluster node, for a transactional id another node coordinates, both are asked of that
  node (remote_checks: AddPartitionsToTxn v5 as a broker sends it, server/cluster/
  txn_verification.py) before anything is appended.
- Produce v12 (transactions v2): the partitions are added to the transaction instead of
  verified (implicit_adds: one AddPartitions of the request's partitions, written durably
  before anything is appended), whatever transaction.partition.verification.enable says.
- "Already in the transaction" means an open transaction of the producer in the partition at
  the batch's epoch (Kafka's hasOngoingTransaction(producerId, epoch)): with transactions v2 the
  next transaction's first batch (epoch + 1) can arrive before the previous one's marker, and
  must wait for it (the coordinator answers CONCURRENT_TRANSACTIONS until it is complete).
- A non-transactional batch of a producer with a transaction open in the partition is
  INVALID_TXN_STATE.
- Once appended, a transactional batch opens (or extends) its producer's transaction in the
  partition's transaction state (server/partition_txns.py): the LSO stays at its first offset
  until the marker.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.deferred import Deferred, of_coroutine
from kcoord.server.txn.settling import after_completion
from kcoord.storage.batch import BatchHeader
from kcoord.storage.log import PartitionLog

if TYPE_CHECKING:
    from kcoord.server.clock import Clock
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.lazy import Lazy
    from kcoord.server.topics import TopicRegistry
    from kcoord.server.txn.service import TxnService
    from kcoord.storage.log_manager import LogManager

TopicPartition = tuple[str, int]

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
_EPOCH = slice(51, 53)


def transactional_producers(req: Any) -> set[int]:
    """Producer ids of the request's transactional batches (first batch per partition)."""
    out = set()
    for t in req.topic_data:
        for p in t.partition_data:
            r = p.records
            if r and len(r) >= 61 and r[_MAGIC_OFFSET] == 2 and r[22] & _ATTR_TRANSACTIONAL:
                out.add(int.from_bytes(r[_PID], "big", signed=True))
    return out


class ProduceTxn:
    """What Produce checks and records for idempotent and transactional batches, given by the
    composition root's ProduceApi: the data plane's producer and transaction state, the
    transaction coordinator (built at the first transactional batch that needs it)."""

    def __init__(self, verification: bool, clock: Clock, topics: TopicRegistry, logs: LogManager,
                 data_plane: DataPlane, txn: Lazy[TxnService], cluster: Any = lambda: None) -> None:
        self.verification = verification  # transaction.partition.verification.enable
        # the node's ClusterNode on a cluster node (else None): a transactional id another node
        # coordinates is verified or added there (remote_checks)
        self.cluster = cluster
        self._remote: Any = None  # server/cluster/txn_verification.py, at its first use
        self.clock = clock
        self.topics = topics
        self.logs = logs
        self.data_plane = data_plane
        self.txn = txn

    def check_batch(self, transactional_id: str | None, version: int, topic: str, partition: int,
                    plog: PartitionLog, h: BatchHeader,
                    added: dict[TopicPartition, ErrorCode] | None = None) -> tuple[ErrorCode, str] | None:
        """Why this idempotent / transactional batch may not be appended, or None. `added`: the
        answers of implicit_adds (Produce v12)."""
        txns = self.data_plane.txns
        if not h.is_transactional:
            state = txns.loaded(topic, partition)
            if state is not None and state.has_ongoing(h.producer_id):
                return (ErrorCode.INVALID_TXN_STATE,
                        f"Expected transactional write from producer {h.producer_id} at offset "
                        f"{plog.log_end_offset} in partition {topic}-{partition}")
            return None
        if added is not None and (topic, partition) in added:
            code = added[(topic, partition)]  # Produce v12: the implicit add's answer
        else:
            if self._open_in_epoch(topic, partition, plog, h.producer_id, h.producer_epoch) \
                    or not self.verification:
                return None
            code = self.txn.get().coordinator.verify_partitions(transactional_id, h.producer_id, h.producer_epoch,
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


    def appended(self, topic: str, partition: int, plog: PartitionLog, h: BatchHeader, base_offset: int) -> None:
        if h.is_transactional:
            self.data_plane.txns.get(topic, partition, plog).on_data(h.producer_id, base_offset)


    def _open_in_epoch(self, topic: str, partition: int, plog: PartitionLog, producer_id: int,
                       producer_epoch: int) -> bool:
        """The producer has a transaction open in the partition, begun at this epoch."""
        state = self.data_plane.txns.get(topic, partition, plog)
        if not state.has_ongoing(producer_id):
            return False
        entry = self.data_plane.producers.get(topic, partition, plog, self.clock.now_ms()).entries.get(producer_id)
        return entry is not None and entry.epoch == producer_epoch


    def remote_checks(self, req: Any, version: int) -> Deferred[dict[TopicPartition, ErrorCode]] | None:
        """On a cluster node, for a transactional id another node coordinates: the partitions
        whose transactional batch is the producer's first at its epoch there are added to its
        transaction there (Produce v12) or verified there (below v12, with verification on), by
        AddPartitionsToTxn to that node (server/cluster/txn_verification.py), before anything is
        appended. None when there is nothing to ask another node; else a Deferred of each
        partition's answer, which check_batch reads as it reads implicit_adds'."""
        cluster = self.cluster()
        if cluster is None or req.transactional_id is None:
            return None
        verify_only = version < 12
        if verify_only and not self.verification:
            return None
        if self._remote is None:
            from kcoord.server.cluster.txn_verification import RemoteTxnPartitions

            self._remote = RemoteTxnPartitions(cluster)
        remote = self._remote
        if not remote.elsewhere(req.transactional_id):
            return None
        wanted, producer = self._first_batches(req)
        if not wanted or producer is None:
            return None
        return of_coroutine(remote.add(req.transactional_id, producer[0], producer[1], wanted, verify_only),
                            "AddPartitionsToTxn")

    def implicit_adds(self, req: Any) -> Deferred[dict[TopicPartition, ErrorCode]] | None:
        """Produce v12 (transactions v2, Kafka's AddPartitionsToTxnManager with addPartition): the
        partitions whose transactional batch is the producer's first at its epoch there are added
        to its transaction, durably, before the request appends anything. None when there are none;
        else a Deferred of each partition's answer (NONE: added)."""
        wanted, producer = self._first_batches(req)
        if not wanted or producer is None:
            return None
        txn = self.txn.get()
        pid, epoch = producer

        def serve() -> Any:
            return txn.runtime.submit(txn.coordinator.add_partitions(req.transactional_id, pid, epoch, wanted,
                                                                     client_version=2))

        out: Deferred[dict[TopicPartition, ErrorCode]] = Deferred()
        answer = after_completion(txn.coordinator, req.transactional_id, serve)

        def done(code: ErrorCode) -> None:
            out.complete(dict.fromkeys(wanted, code))

        if isinstance(answer, Deferred):
            answer.add_callback(done)
        else:
            done(answer)
        return out

    def _first_batches(self, req: Any) -> tuple[list[TopicPartition], tuple[int, int] | None]:
        """The partitions where the request's transactional batch is its producer's first at
        its epoch, and that (producer id, epoch)."""
        wanted: list[TopicPartition] = []
        producer: tuple[int, int] | None = None
        for t in req.topic_data:
            topic = self.topics.get(t.name)
            if topic is None or topic.internal:
                continue  # answered by the append (UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION)
            for p in t.partition_data:
                r = p.records
                if not (r and len(r) >= 61 and r[_MAGIC_OFFSET] == 2 and r[22] & _ATTR_TRANSACTIONAL):
                    continue
                plog = (self.logs.get(topic.name, p.index) if 0 <= p.index < topic.partitions else None)
                if plog is None:
                    continue
                pid = int.from_bytes(r[_PID], "big", signed=True)
                epoch = int.from_bytes(r[_EPOCH], "big", signed=True)
                producer = (pid, epoch)
                if not self._open_in_epoch(t.name, p.index, plog, pid, epoch):
                    wanted.append((t.name, p.index))
        return wanted, producer
