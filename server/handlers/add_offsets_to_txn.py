"""AddOffsetsToTxn v0-v4 (Kafka's KafkaApis.handleAddOffsetsToTxnRequest): the group's
__consumer_offsets partition (abs(javaHash(group)) % offsets.topic.num.partitions) joins the
transaction, exactly as AddPartitionsToTxn would add it; PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.producer.transaction import AddOffsetsToTxnResponse

from kcoord.protocol.errors import ErrorCode, fenced_for_version
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.context import RequestContext
from kcoord.server.deferred import then
from kcoord.server.txn.settling import after_completion

if TYPE_CHECKING:
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.lazy import Lazy
    from kcoord.server.txn.service import TxnService


class AddOffsetsToTxnApi:
    """AddOffsetsToTxn's handler, built by the composition root (server/node.py) with the parts it uses."""

    def __init__(self, txn: Lazy[TxnService], coordinator: Lazy[GroupCoordinator]) -> None:
        self.txn = txn
        self.coordinator = coordinator

    def handle_add_offsets_to_txn(self, ctx: RequestContext, req: Any, version: int) -> Any:
        partition = self.coordinator.get().partition_of(req.group_id)
        txn = self.txn.get()

        def respond(code: ErrorCode) -> Any:
            return AddOffsetsToTxnResponse(version=version, throttle_time_ms=0,
                                           error_code=fenced_for_version(code, version, 2))

        def serve() -> Any:
            result = txn.coordinator.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch,
                                                    [(OFFSETS_TOPIC, partition)])
            return then(txn.runtime.submit(result), respond)

        return after_completion(txn.coordinator, req.transactional_id, serve)
