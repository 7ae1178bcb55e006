"""ListTransactions v0-v1 (KIP-664; v1 adds DurationFilter, KIP-994): the transactional ids
the coordinator holds, filtered by state names (unknown names are echoed in
unknown_state_filters), by producer ids and (v1) by how long their transaction has been
running (longer than duration_filter ms; -1: any). COORDINATOR_LOAD_IN_PROGRESS while any
__transaction_state partition loads; COORDINATOR_NOT_AVAILABLE before __transaction_state exists.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.transactions import ListTransactionsResponse

from kcoord.server.context import RequestContext

if TYPE_CHECKING:
    from kcoord.server.lazy import Lazy
    from kcoord.server.txn.service import TxnService

_State = ListTransactionsResponse.TransactionState


class ListTransactionsApi:
    """ListTransactions' handler, built by the composition root (server/node.py) with the transaction coordinator."""

    def __init__(self, txn: Lazy[TxnService]) -> None:
        self.txn = txn

    def handle_list_transactions(self, ctx: RequestContext, req: Any, version: int) -> Any:
        duration = req.duration_filter if version >= 1 else -1
        code, unknown, found = self.txn.get().coordinator.list_transactions(
            req.producer_id_filters, req.state_filters, duration)
        return ListTransactionsResponse(
            version=version, throttle_time_ms=0, error_code=code, unknown_state_filters=unknown,
            transaction_states=[_State(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                       transaction_state=m.state.wire_name) for m in found])
