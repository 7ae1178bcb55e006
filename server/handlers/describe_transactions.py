"""DescribeTransactions v0 (KIP-664, what `kafka-transactions.sh describe` sends): each
transactional id's state as the transaction coordinator holds it: its state name, timeout,
start time, producer id and epoch, and the partitions of its current transaction.
INVALID_REQUEST for an empty id, COORDINATOR_LOAD_IN_PROGRESS while its partition loads,
TRANSACTIONAL_ID_NOT_FOUND for an id the coordinator does not know (or that is expiring).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.transactions import DescribeTransactionsResponse

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from kcoord.server.lazy import Lazy
    from kcoord.server.txn.service import TxnService

_State = DescribeTransactionsResponse.TransactionState
_Topic = _State.TopicData


class DescribeTransactionsApi:
    """DescribeTransactions' handler, built by the composition root (server/node.py) with the transaction coordinator."""

    def __init__(self, txn: Lazy[TxnService]) -> None:
        self.txn = txn

    def handle_describe_transactions(self, ctx: RequestContext, req: Any, version: int) -> Any:
        coordinator = self.txn.get().coordinator
        states = []
        for tid in req.transactional_ids:
            code, meta = coordinator.describe(tid)
            if meta is None or code != ErrorCode.NONE:
                states.append(_State(error_code=code, transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
                                     transaction_start_time_ms=0, producer_id=0, producer_epoch=0, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for t, p in sorted(meta.partitions):
                by_topic.setdefault(t, []).append(p)
            states.append(_State(
                error_code=ErrorCode.NONE, transactional_id=tid, transaction_state=meta.state.wire_name,
                transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
                producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                topics=[_Topic(topic=t, partitions=ps) for t, ps in by_topic.items()]))
        return DescribeTransactionsResponse(version=version, throttle_time_ms=0, transaction_states=states)
