"""Prometheus figures of the transaction coordinator (added to /metrics by server/metrics.py):
transactional ids by state, transactions completed by outcome, and transactions the
coordinator aborted because they outlived their timeout."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kcoord.server.txn.service import TxnService


class TxnCounters:
    """What the transaction coordinator counts as it runs (the rest is read when scraped)."""

    def __init__(self) -> None:
        self.completed = {"commit": 0, "abort": 0}
        self.timed_out = 0
        # marker jobs given up (server/txn/marker_outcomes.py): dropped to a newer coordinator,
        # or stopped at an error Kafka treats as fatal
        self.markers_dropped = 0
        self.markers_failed = 0


def txn_metric_families(txn: TxnService | None) -> Iterator[object]:
    """`txn`: the transaction coordinator, None until a transactional client came."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # at the first scrape

    if txn is None:
        return
    states = GaugeMetricFamily("kcoord_transactions", "Transactional ids by the state of their transaction",
                               labels=["state"])
    for state, n in txn.coordinator.counts_by_state().items():
        states.add_metric([state.wire_name], n)
    yield states
    done = CounterMetricFamily("kcoord_transactions_completed", "Transactions completed (markers written)",
                               labels=["result"])
    for result, n in txn.counters.completed.items():
        done.add_metric([result], n)
    yield done
    yield CounterMetricFamily("kcoord_transactions_timed_out", "Transactions aborted by the coordinator after "
                              "transaction.timeout.ms", value=txn.counters.timed_out)
    yield CounterMetricFamily("kcoord_transaction_markers_dropped", "Prepared transactions whose pending markers "
                              "this node dropped: a newer coordinator owns them", value=txn.counters.markers_dropped)
    yield CounterMetricFamily("kcoord_transaction_markers_failed", "Prepared transactions whose markers met an "
                              "error Kafka treats as fatal (not retried)", value=txn.counters.markers_failed)
