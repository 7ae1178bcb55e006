"""AddPartitionsToTxn v0-v5 (Kafka's KafkaApis.handleAddPartitionsToTxnRequest).

- v0-v3 (clients): one transaction. Internal topics are refused with
  TOPIC_AUTHORIZATION_FAILED (Kafka never authorizes clients to add them: offsets go through
  AddOffsetsToTxn), topics or partitions that do not exist with UNKNOWN_TOPIC_OR_PARTITION;
  if any partition is refused the others answer OPERATION_NOT_ATTEMPTED and nothing changes.
  Otherwise the transaction coordinator's answer (server/txn/state.py) for every partition;
  PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
- v4-v5 (brokers, KIP-890): a batch of transactions, each either added (as transactions v2
  adds them, for a broker's Produce v12 / TxnOffsetCommit v5) or, with verify_only, checked
  (TRANSACTION_ABORTABLE for each partition not in the ongoing transaction). Kafka requires
  CLUSTER_ACTION for these; without an authorizer everyone has it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.producer.transaction import AddPartitionsToTxnResponse

from kcoord.protocol.errors import ErrorCode, fenced_for_version
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import log_of
from kcoord.server.deferred import gather, then
from kcoord.server.txn.settling import after_completion

if TYPE_CHECKING:
    from kcoord.server.lazy import Lazy
    from kcoord.server.topics import TopicRegistry
    from kcoord.server.txn.service import TxnService
    from kcoord.storage.log_manager import LogManager

_Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
_TopicResult = _Result.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult

TopicPartition = tuple[str, int]


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (t, p), code in errors.items():
        by_topic.setdefault(t, []).append(_PartitionResult(partition_index=p, partition_error_code=code))
    return [_TopicResult(name=t, results_by_partition=parts) for t, parts in by_topic.items()]


def _requested(topics: Any) -> list[TopicPartition]:
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


class AddPartitionsToTxnApi:
    """AddPartitionsToTxn's handler, built by the composition root (server/node.py) with the parts it uses."""

    def __init__(self, txn: Lazy[TxnService], logs: LogManager, topics: TopicRegistry) -> None:
        self.txn = txn
        self.logs = logs
        self.topics = topics

    def _refusals(self, ctx: RequestContext, partitions: list[TopicPartition], clients: bool) -> dict[TopicPartition, ErrorCode]:
        """Kafka's checks before the coordinator: empty when every partition may be added."""
        bad: dict[TopicPartition, ErrorCode] = {}
        for t, p in partitions:
            topic = self.topics.get(t)
            if clients and topic is not None and topic.internal:
                bad[(t, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif topic is None or log_of(self.logs, topic, p) is None:
                bad[(t, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if bad:
            return {tp: bad.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in partitions}
        return {}

    def _one(self, ctx: RequestContext, version: int, transactional_id: str, producer_id: int, producer_epoch: int,
             topics: Any, verify_only: bool) -> Any:
        """The per-partition errors of one transaction (or a Deferred of them)."""
        partitions = _requested(topics)
        refused = self._refusals(ctx, partitions, clients=version < 4)
        if refused:
            return refused
        coordinator = self.txn.get().coordinator
        if verify_only:
            return coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

        def per_partition(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(partitions, fenced_for_version(code, version, 2))

        def serve() -> Any:
            result = coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions,
                                                client_version=2 if version >= 4 else 0)
            return then(self.txn.get().runtime.submit(result), per_partition)

        return after_completion(coordinator, transactional_id, serve)

    def handle_add_partitions_to_txn(self, ctx: RequestContext, req: Any, version: int) -> Any:
        if version < 4:
            answer = self._one(ctx, version, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                          req.v3_and_below_producer_epoch, req.v3_and_below_topics, verify_only=False)
            return then(answer, lambda errors: AddPartitionsToTxnResponse(
                version=version, throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors)))
        txns = list(req.transactions)
        answers = [self._one(ctx, version, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only)
                   for t in txns]

        def respond(results: list[dict[TopicPartition, ErrorCode]]) -> Any:
            return AddPartitionsToTxnResponse(
                version=version, throttle_time_ms=0, error_code=ErrorCode.NONE,
                results_by_transaction=[_Result(transactional_id=t.transactional_id, topic_results=_topic_results(r))
                                        for t, r in zip(txns, results, strict=True)])

        return then(gather(answers), respond)
