"""Prometheus metrics: the group-coordinator figures Kafka users know, request latency per
API, and consumer lag per group and partition computed by the broker — kept for Empty groups
too, since their committed offsets stay (a consumer that is down still has lag).

Everything is read on the event loop at scrape time (the HTTP endpoint runs on the loop, not
in a thread), so nothing is shared across threads. prometheus_client is imported at the first
scrape: a server without the metrics listener never loads it (start-up time). Request latency is kept in plain counters
on the hot path (a few hundred nanoseconds a request) and exposed as a histogram.
"""
from __future__ import annotations

import asyncio
import bisect
import logging
import time
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from kcoord.protocol.coordinator_records import CoordinatorRecord
    from kcoord.server.connections import Connections
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.quotas.manager import QuotaManager
    from kcoord.server.share.manager import ShareManager
    from kcoord.server.topics import TopicRegistry
    from kcoord.server.txn.service import TxnService
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.metrics")


# (OffsetKey, GroupValue), imported at the first durable write (its records come from that
# module, loaded by then) rather than at start-up
_RECORD_KINDS: tuple[type, type] | None = None


def _record_kinds() -> tuple[type, type]:
    global _RECORD_KINDS
    from kcoord.protocol.coordinator_records import GroupValue, OffsetKey

    _RECORD_KINDS = (OffsetKey, GroupValue)
    return _RECORD_KINDS


LATENCY_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)


class _Latency:
    __slots__ = ("counts", "total", "n")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0
        self.n = 0


class Scraped(NamedTuple):
    """The parts a scrape reads (the composition root's metrics_page, server/node.py, gives
    the current ones): those built at their first use are None until then."""

    coordinator: GroupCoordinator | None
    logs: LogManager
    topics: TopicRegistry
    connections: Connections
    txn: TxnService | None
    quotas: QuotaManager
    share: ShareManager | None
    data_plane: DataPlane | None


class Metrics:
    """Counters the server updates; the rest is computed from broker state when scraped."""

    def __init__(self) -> None:
        self.offset_commits = 0
        self.offset_expirations = 0
        self.offset_deletions = 0
        self.rebalances_completed = 0
        self.partition_load_seconds: dict[int, float] = {}
        self._latency: dict[str, _Latency] = {}

    def observe_request(self, api: str, seconds: float) -> None:
        lat = self._latency.get(api)
        if lat is None:
            lat = self._latency[api] = _Latency()
        lat.counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        lat.total += seconds
        lat.n += 1

    def records_applied(self, records: list[CoordinatorRecord], expired: bool = False) -> None:
        """Count what a durable write changed (the live replay path: every commit)."""
        offset_key, group_value = _RECORD_KINDS or _record_kinds()
        for r in records:
            if r.key.__class__ is offset_key:
                if r.value is not None:
                    self.offset_commits += 1
                elif expired:
                    self.offset_expirations += 1
                else:
                    self.offset_deletions += 1
            elif r.value.__class__ is group_value and r.value.members:
                self.rebalances_completed += 1

    def render(self, parts: Scraped) -> bytes:
        from prometheus_client.exposition import generate_latest
        from prometheus_client.registry import CollectorRegistry

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self, parts))
        return generate_latest(registry)


class _Collector:
    """A prometheus_client collector (anything with collect() registers)."""

    def __init__(self, metrics: Metrics, parts: Scraped) -> None:
        self.m = metrics
        self.parts = parts

    def collect(self):  # noqa: ANN201 - yields prometheus_client metric families
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        from kcoord.server.group.classic.state import GroupState
        from kcoord.server.quotas.metrics import quota_metric_families
        from kcoord.server.share.metrics import share_metric_families
        from kcoord.server.txn.metrics import txn_metric_families

        m, parts = self.m, self.parts
        logs = parts.logs
        groups = GaugeMetricFamily("kcoord_groups", "Consumer groups by state (Kafka: NumGroups<State>)",
                                   labels=["state"])
        by_state = {s.value: 0 for s in GroupState}
        n_offsets = 0
        lag = GaugeMetricFamily("kcoord_consumer_lag",
                                "Log end offset minus committed offset, per group and partition",
                                labels=["group", "topic", "partition"])
        group_lag = GaugeMetricFamily("kcoord_consumer_group_lag", "Total lag of a group", labels=["group"])
        coordinator = parts.coordinator
        for g in coordinator.groups() if coordinator is not None else ():
            state = g.state_name()
            by_state[state] = by_state.get(state, 0) + 1
            total = 0
            any_offset = False
            for topic, partition, value in coordinator.committed_offsets(g.group_id):
                any_offset = True
                n_offsets += 1
                plog = logs.get(topic, partition)
                if plog is None:
                    continue
                behind = max(plog.log_end_offset - value.offset, 0)
                total += behind
                lag.add_metric([g.group_id, topic, str(partition)], behind)
            if any_offset:
                group_lag.add_metric([g.group_id], total)
        for state, n in by_state.items():
            groups.add_metric([state], n)
        yield groups
        yield GaugeMetricFamily("kcoord_offsets", "Committed offsets held (Kafka: NumOffsets)", value=n_offsets)
        yield lag
        yield group_lag
        yield CounterMetricFamily("kcoord_offset_commits", "Offsets committed (durable)", value=m.offset_commits)
        yield CounterMetricFamily("kcoord_offset_expirations", "Offsets removed by retention",
                                  value=m.offset_expirations)
        yield CounterMetricFamily("kcoord_offset_deletions", "Offsets removed by OffsetDelete/DeleteGroups",
                                  value=m.offset_deletions)
        yield CounterMetricFamily("kcoord_group_rebalances_completed", "Rebalances that completed (group "
                                  "metadata written with members)", value=m.rebalances_completed)
        load = GaugeMetricFamily("kcoord_coordinator_partition_load_seconds",
                                 "Time to load each __consumer_offsets partition at start-up",
                                 labels=["partition"])
        for p, s in sorted(m.partition_load_seconds.items()):
            load.add_metric([str(p)], s)
        yield load
        latency = HistogramMetricFamily("kcoord_request_latency_seconds",
                                        "Time from a request's arrival to its response, per API",
                                        labels=["api"])
        for api, lat in sorted(m._latency.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), lat.counts, strict=True):
                cumulative += count
                buckets.append((str(bound) if bound != float("inf") else "+Inf", cumulative))
            latency.add_metric([api], buckets, lat.total)
        yield latency
        yield GaugeMetricFamily("kcoord_connections", "Open client connections", value=len(parts.connections))
        syncs = CounterMetricFamily("kcoord_log_fsyncs", "fdatasync/fsync calls made by the open partition "
                                    "logs, internal topics (__consumer_offsets, ...) apart from data topics",
                                    labels=["kind"])
        counts = {"internal": 0, "data": 0}
        for (name, _), plog in logs:
            topic = parts.topics.get(name)
            counts["internal" if topic is not None and topic.internal else "data"] += plog.sync_count
        for kind, n in counts.items():
            syncs.add_metric([kind], n)
        yield syncs
        yield from txn_metric_families(parts.txn)
        yield from quota_metric_families(parts.quotas)
        yield from share_metric_families(parts.coordinator, parts.share, parts.topics)
        dp = parts.data_plane
        if dp is not None:
            from kcoord.server.fetch_sessions import metric_families as fetch_session_families

            yield from fetch_session_families(dp.fetch_sessions)


class _MetricsHttp(asyncio.Protocol):
    """GET /metrics, one response per connection; everything else 404."""

    def __init__(self, render) -> None:  # noqa: ANN001
        self.render = render
        self.buf = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if b"\r\n\r\n" not in self.buf and len(self.buf) < 8192:
            return
        line = self.buf.split(b"\r\n", 1)[0].split()
        if len(line) >= 2 and line[0] == b"GET" and line[1].split(b"?")[0] in (b"/metrics", b"/"):
            started = time.perf_counter()
            body = self.render()
            status, ctype = b"200 OK", b"text/plain; version=0.0.4; charset=utf-8"
            log.debug("metrics rendered in %.1f ms", (time.perf_counter() - started) * 1000)
        else:
            body, status, ctype = b"not found\n", b"404 Not Found", b"text/plain"
        self.transport.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype + b"\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
        self.transport.close()


async def start_metrics_server(host: str, port: int, render) -> asyncio.base_events.Server:  # noqa: ANN001
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _MetricsHttp(render), host=host, port=port, reuse_address=True)
