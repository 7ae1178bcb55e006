"""A request that meets its transaction still completing waits for the completion (briefly)
instead of answering CONCURRENT_TRANSACTIONS at once.

EndTxn is answered once PrepareCommit / PrepareAbort is durable, as Kafka answers it; the
markers and the Complete state follow. A client that begins its next transaction at once
sends AddPartitionsToTxn / AddOffsetsToTxn (transactions v2: Produce v12, TxnOffsetCommit v5)
while they are still being written. Kafka answers CONCURRENT_TRANSACTIONS and the client
retries after its backoff (librdkafka: 20 ms for AddPartitionsToTxn, retry.backoff.ms, 100 ms,
for AddOffsetsToTxn; Java: retry.backoff.ms for a Produce answered NOT_ENOUGH_REPLICAS), which
would cost a consume-transform-produce loop about 100 ms per transaction here. kcoord's markers
are local and take one fdatasync round, so the request waits for the transaction's completion
and is then served against the completed state: its answer is the one Kafka gives once the
markers are written.

The wait ends at the completion, at the marker writer's first failure (it keeps retrying), or
after MAX_WAIT_S, whichever comes first; the request is then served as things stand, which
answers CONCURRENT_TRANSACTIONS while the transaction is still completing, as Kafka does.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.server.deferred import Deferred

if TYPE_CHECKING:
    from kcoord.server.txn.coordinator import TransactionCoordinator

MAX_WAIT_S = 0.5


def after_completion(coordinator: TransactionCoordinator, transactional_id: str | None,
                     serve: Callable[[], Any]) -> Any:
    """serve() now, or a Deferred of its answer once `transactional_id`'s transaction is no
    longer completing (or MAX_WAIT_S has passed)."""
    completing = coordinator.completing(transactional_id) if transactional_id else None
    if completing is None or completing.done:
        return serve()
    out: Deferred[Any] = Deferred()
    served = False

    def go(_: object = None) -> None:
        nonlocal served
        if served:
            return
        served = True
        timer.cancel()
        coordinator.waiting_requests -= 1
        answer = serve()
        if isinstance(answer, Deferred):
            answer.add_callback(out.complete)
        else:
            out.complete(answer)

    coordinator.waiting_requests += 1
    timer = asyncio.get_running_loop().call_later(MAX_WAIT_S, go)
    completing.add_callback(go)
    return out
