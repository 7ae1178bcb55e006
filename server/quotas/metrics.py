"""Prometheus families per quota entity (Kafka's per-user/client-id quota metrics: byte-rate
or request-time, and throttle-time, of the Produce, Fetch and Request groups), read from the
quota manager at scrape time. Nothing is yielded while no entity was ever measured."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kcoord.server.quotas.manager import QuotaManager


def quota_metric_families(quotas: QuotaManager) -> Iterator[Any]:
    rows = quotas.rates()
    if not rows:
        return
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    labels = ["quota_type", "user", "client_id"]
    rate = GaugeMetricFamily("kcoord_client_quota_rate", "The rate a quota is checked against, per quota entity "
                             "(bytes/s for Produce and Fetch, percent of one thread for Request)", labels=labels)
    throttle = CounterMetricFamily("kcoord_client_quota_throttle_time_ms", "Throttle time given, per quota entity",
                                   labels=labels)
    throttled = CounterMetricFamily("kcoord_client_quota_throttled_responses", "Answers throttled, per quota entity",
                                    labels=labels)
    for qtype, (user, client_id), value, ms, n in rows:
        rate.add_metric([qtype, user, client_id], value)
        throttle.add_metric([qtype, user, client_id], ms)
        throttled.add_metric([qtype, user, client_id], n)
    yield rate
    yield throttle
    yield throttled
