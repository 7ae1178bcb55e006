"""EndTxn v0-v5 (Kafka's KafkaApis.handleEndTxnRequest): commit or abort the producer's ongoing
transaction. The coordinator writes PrepareCommit / PrepareAbort, the markers and
CompleteCommit / CompleteAbort (server/txn/); the answer is given once PrepareCommit /
PrepareAbort is durable, as Kafka gives it (kcoord.transaction.end.answer.on.prepare), and a
request meeting the markers still being written waits for them (server/txn/settling.py).
v5 is transactions v2 (KIP-890 part 2): the epoch is bumped by every EndTxn and the answer
carries the producer id and epoch the producer continues with (a new id once the epoch is
exhausted); a retry of an EndTxn that succeeded is recognised by its epoch. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH before v2.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.producer.transaction import EndTxnResponse

from kcoord.protocol.errors import ErrorCode, fenced_for_version
from kcoord.server.context import RequestContext
from kcoord.server.deferred import then
from kcoord.server.txn.settling import after_completion

if TYPE_CHECKING:
    from kcoord.server.lazy import Lazy
    from kcoord.server.txn.service import TxnService


class EndTxnApi:
    """EndTxn's handler, built by the composition root (server/node.py) with the transaction coordinator."""

    def __init__(self, txn: Lazy[TxnService]) -> None:
        self.txn = txn

    def handle_end_txn(self, ctx: RequestContext, req: Any, version: int) -> Any:
        txn = self.txn.get()

        def respond(answer: tuple[ErrorCode, int, int]) -> Any:
            code, pid, epoch = answer
            return EndTxnResponse(version=version, throttle_time_ms=0, error_code=fenced_for_version(code, version, 2),
                                  producer_id=pid, producer_epoch=epoch)

        def serve() -> Any:
            # a v5 request is from a client of transactions v2, as Kafka decides (the request's version)
            result = txn.coordinator.end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                             bool(req.committed), client_version=2 if version >= 5 else 0)
            return then(txn.runtime.submit(result), respond)

        return after_completion(txn.coordinator, req.transactional_id, serve)
