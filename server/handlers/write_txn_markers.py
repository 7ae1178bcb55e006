"""WriteTxnMarkers v1-v2 (Kafka's KafkaApis.handleWriteTxnMarkersRequest): a transaction
coordinator on another node asks this node to append COMMIT / ABORT markers to partitions it
leads (server/cluster/txn_markers.py sends them). Each partition is answered once its marker
is written (durable here and in every ISR member: server/txn/leader_append.py), or with its
error: NOT_LEADER_OR_FOLLOWER where this node does not lead it (the coordinator looks for the
new leader and sends again), UNKNOWN_TOPIC_OR_PARTITION where it does not exist (the
coordinator skips it), COORDINATOR_LOAD_IN_PROGRESS for a __consumer_offsets partition still
loading. A __consumer_offsets marker turns the producer's pending offsets into committed ones
(or drops them) through the group coordinator, as a local marker does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.producer.transaction import WriteTxnMarkersResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine, wait

if TYPE_CHECKING:
    from kcoord.server.lazy import Lazy
    from kcoord.server.txn.service import TxnService

Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = Result.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


class WriteTxnMarkersApi:
    """Built by the composition root (server/node.py) with the transaction coordinator, whose
    marker writer appends markers to the partitions this node leads."""

    def __init__(self, txn: Lazy[TxnService]) -> None:
        self.txn = txn

    def handle_write_txn_markers(self, ctx: RequestContext, req: Any, version: int) -> Any:
        writer = self.txn.get().markers
        pending = []
        for m in req.markers:
            tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
            written = writer.write_here(m.producer_id, m.producer_epoch, bool(m.transaction_result), tps,
                                        m.coordinator_epoch)
            pending.append((m, written))
        return of_coroutine(self._answer(version, pending), "WriteTxnMarkers")

    @staticmethod
    async def _answer(version: int, pending: list[tuple[Any, Any]]) -> Any:
        markers = []
        for m, written in pending:
            topics = []
            for t in m.topics:
                parts = []
                for p in t.partition_indexes:
                    code = await wait(written[(t.name, p)])
                    parts.append(PartitionResult(partition_index=p, error_code=ErrorCode.NONE if code is None else code))
                topics.append(TopicResult(name=t.name, partitions=parts))
            markers.append(Result(producer_id=m.producer_id, topics=topics))
        return WriteTxnMarkersResponse(version=version, markers=markers)
