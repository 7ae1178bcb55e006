"""TxnOffsetCommit v0-v5 (Kafka's KafkaApis.handleTxnOffsetCommitRequest and the group
coordinator's commitTransactionalOffsets): a consumer group's offsets, written inside the
producer's transaction.

In Kafka's order: partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION (the others
go on); an empty group id is INVALID_GROUP_ID; the group's __consumer_offsets partition must
be part of the producer's ongoing transaction (KIP-890 verification, on by default:
transaction.partition.verification.enable), else INVALID_TXN_STATE before v4 and
TRANSACTION_ABORTABLE from v4, INVALID_PRODUCER_EPOCH for a fenced epoch,
INVALID_PRODUCER_ID_MAPPING for a producer id that is not the transactional id's. v5 is
transactions v2: the partition is added to the transaction instead (written durably first;
CONCURRENT_TRANSACTIONS while the previous transaction completes, which clients retry); then the
group's own checks (server/group/txn_offset_commit.py). The offsets are written as one
transactional batch (server/txn/group_log.py) and answered once durable; they become the group's
committed offsets with the transaction's COMMIT marker. COORDINATOR_LOAD_IN_PROGRESS is
COORDINATOR_NOT_AVAILABLE before v2 (clients of 0.11-2.0 did not retry it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.producer.transaction import TxnOffsetCommitResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import log_of
from kcoord.server.deferred import Deferred, of_coroutine, then
from kcoord.server.group.txn_offset_commit import Row, txn_offset_records, validate_txn_offset_commit
from kcoord.server.txn.settling import after_completion

if TYPE_CHECKING:
    from kcoord.server.clock import Clock
    from kcoord.server.config import Config
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.lazy import Lazy
    from kcoord.server.topics import TopicRegistry
    from kcoord.server.txn.service import TxnService
    from kcoord.storage.log_manager import LogManager

_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Partition = _Topic.TxnOffsetCommitResponsePartition

# verification errors as the group coordinator's clients know them (AddPartitionsToTxnManager)
_VERIFY_ERRORS = {ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH}


def _response(version: int, rows: list[Row]) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for t, p, code in rows:
        if version < 2 and code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        by_topic.setdefault(t, []).append(_Partition(partition_index=p, error_code=code))
    return TxnOffsetCommitResponse(version=version, throttle_time_ms=0,
                                   topics=[_Topic(name=t, partitions=ps) for t, ps in by_topic.items()])


class TxnOffsetCommitApi:
    """TxnOffsetCommit's handler, built by the composition root (server/node.py) with the parts it uses."""

    def __init__(self, txn: Lazy[TxnService], coordinator: Lazy[GroupCoordinator], logs: LogManager, topics: TopicRegistry, config: Config, clock: Clock,
                 cluster: Any = lambda: None) -> None:
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None
        self._remote: Any = None  # server/cluster/txn_verification.py, at its first use
        self.txn = txn
        self.coordinator = coordinator
        self.logs = logs
        self.topics = topics
        self.config = config
        self.clock = clock

    def handle_txn_offset_commit(self, ctx: RequestContext, req: Any, version: int) -> Any:
        unknown: list[Row] = []
        known = []
        cluster = self.cluster()
        for t in req.topics:
            topic = self.topics.get(t.name) if cluster is None else None
            # on a cluster node, the cluster's partitions: a group's coordinator need not host
            # the topics its groups commit (as OffsetCommit, server/handlers/groups.py)
            in_cluster = None if cluster is None else cluster.topic(t.name)
            parts = []
            for p in t.partitions:
                if in_cluster is not None:
                    if p.partition_index in in_cluster.replicas:
                        parts.append(p)
                    else:
                        unknown.append((t.name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                if topic is None or log_of(self.logs, topic, p.partition_index) is None:
                    unknown.append((t.name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                else:
                    parts.append(p)
            if parts:
                t.partitions = parts
                known.append(t)
        req.topics = known
        if not known:
            return _response(version, unknown)

        def all_rows(code: ErrorCode) -> Any:
            return _response(version, [(t.name, p.partition_index, code) for t in known for p in t.partitions] + unknown)

        if not req.group_id:
            return all_rows(ErrorCode.INVALID_GROUP_ID)
        partition = self.coordinator.get().partition_of(req.group_id)
        txn = self.txn.get()
        remote = self._remote_for(req.transactional_id)
        if remote is not None and (version >= 5 or self.config["transaction.partition.verification.enable"]):
            # another node coordinates the transactional id: it adds (v5) or verifies the group's
            # offsets partition, as Kafka's group coordinator asks it through AddPartitionsToTxn
            out_remote: Deferred[Any] = Deferred()

            async def ask() -> ErrorCode:
                answer = await remote.add(req.transactional_id, req.producer_id, req.producer_epoch,
                                          [(OFFSETS_TOPIC, partition)], verify_only=version < 5)
                return answer[(OFFSETS_TOPIC, partition)]

            def asked(code: ErrorCode) -> None:
                code = _VERIFY_ERRORS.get(code, code)
                if code == ErrorCode.TRANSACTION_ABORTABLE and version < 4:
                    code = ErrorCode.INVALID_TXN_STATE
                answer = all_rows(code) if code != ErrorCode.NONE else self._commit(ctx, req, version, partition, unknown)
                if isinstance(answer, Deferred):
                    answer.add_callback(out_remote.complete)
                else:
                    out_remote.complete(answer)

            of_coroutine(ask(), "AddPartitionsToTxn").add_callback(asked)
            return out_remote
        if version >= 5:  # transactions v2: the group's offsets partition joins the transaction
            def add() -> Any:
                result = txn.coordinator.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                                        [(OFFSETS_TOPIC, partition)], client_version=2)
                return txn.runtime.submit(result)

            out: Deferred[Any] = Deferred()

            def added(code: ErrorCode) -> None:
                code = _VERIFY_ERRORS.get(code, code)
                answer = all_rows(code) if code != ErrorCode.NONE else self._commit(ctx, req, version, partition, unknown)
                if isinstance(answer, Deferred):
                    answer.add_callback(out.complete)
                else:
                    out.complete(answer)

            then(after_completion(txn.coordinator, req.transactional_id, add), added)
            return out
        if self.config["transaction.partition.verification.enable"]:
            code = txn.coordinator.verify_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                                     [(OFFSETS_TOPIC, partition)])[(OFFSETS_TOPIC, partition)]
            code = _VERIFY_ERRORS.get(code, code)
            if code == ErrorCode.TRANSACTION_ABORTABLE and version < 4:
                code = ErrorCode.INVALID_TXN_STATE
            if code != ErrorCode.NONE:
                return all_rows(code)
        return self._commit(ctx, req, version, partition, unknown)

    def _remote_for(self, transactional_id: str) -> Any:
        """The way to the id's coordinator when another cluster node is it, else None."""
        cluster = self.cluster()
        if cluster is None:
            return None
        if self._remote is None:
            from kcoord.server.cluster.txn_verification import RemoteTxnPartitions

            self._remote = RemoteTxnPartitions(cluster)
        return self._remote if self._remote.elsewhere(transactional_id) else None

    def _commit(self, ctx: RequestContext, req: Any, version: int, partition: int, unknown: list[Row]) -> Any:
        """The group's checks, then the offsets as one transactional batch, answered once durable."""
        known = req.topics

        def all_rows(code: ErrorCode) -> Any:
            return _response(version, [(t.name, p.partition_index, code) for t in known for p in t.partitions] + unknown)

        err = validate_txn_offset_commit(self.coordinator.get().group_manager, req, version)
        if err is not None:
            return all_rows(err)
        rows, records = txn_offset_records(req, version, self.clock.now_ms(), self.config["offset.metadata.max.bytes"])
        if not records:
            return _response(version, rows + unknown)
        written = self.txn.get().group_log.write_offsets(partition, req.producer_id, req.producer_epoch, records)

        def respond(error: ErrorCode | None) -> Any:
            if error is None:
                return _response(version, rows + unknown)
            return _response(version, [(t, p, error if code == ErrorCode.NONE else code) for t, p, code in rows] + unknown)

        return then(written, respond)
