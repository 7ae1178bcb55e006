"""Prometheus metrics per share group, computed from the live state at scrape time (as
server/metrics.py computes consumer lag): members (the share group coordinator), in-flight and
acquired records per share partition, lag (records from the share-partition start offset to the
log end not yet acknowledged or archived, Kafka's share-partition lag), and open share sessions.

Nothing is built to answer a scrape: without a share manager there are no share partitions or
sessions to report, and the members come from the group coordinator only if it exists."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kcoord.server.group.share.group import ShareGroup
from kcoord.server.group.share.partition import RecordState

if TYPE_CHECKING:
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.share.manager import ShareManager
    from kcoord.server.topics import TopicRegistry


def share_metric_families(coordinator: GroupCoordinator | None, manager: ShareManager | None,
                          topics: TopicRegistry) -> Iterator[Any]:
    """`coordinator`, `manager`: the group coordinator and the share manager, None until built."""
    from prometheus_client.core import GaugeMetricFamily

    members = GaugeMetricFamily("kcoord_share_group_members", "Members of each share group", labels=["group"])
    for g in coordinator.groups() if coordinator is not None else ():
        if isinstance(g, ShareGroup) and not g.dead:
            members.add_metric([g.group_id], len(g.members))
    yield members

    in_flight = GaugeMetricFamily("kcoord_share_partition_in_flight_records",
                                  "Records in a share partition's in-flight window (start offset to end)",
                                  labels=["group", "topic", "partition"])
    acquired = GaugeMetricFamily("kcoord_share_partition_acquired_records",
                                 "Records acquired by a share consumer and not yet acknowledged",
                                 labels=["group", "topic", "partition"])
    lag = GaugeMetricFamily("kcoord_share_partition_lag",
                            "Records from the share-partition start offset to the log end not yet "
                            "acknowledged or archived", labels=["group", "topic", "partition"])
    group_lag = GaugeMetricFamily("kcoord_share_group_lag", "Total lag of a share group", labels=["group"])
    sessions = GaugeMetricFamily("kcoord_share_sessions", "Open share sessions per share group", labels=["group"])
    if manager is not None:
        by_id = topics.by_id
        for (group, topic_id, p), sp in sorted(manager.partitions.items(), key=lambda kv: (kv[0][0], str(kv[0][1]),
                                                                                            kv[0][2])):
            topic = by_id.get(topic_id)
            if topic is None:
                continue
            labels = [group, topic.name, str(p)]
            in_flight.add_metric(labels, sp.in_flight())
            acquired.add_metric(labels, sum(r.last - r.first + 1 for r in sp.runs
                                            if r.state == RecordState.ACQUIRED))
        totals: dict[str, int] = {}
        for (group, topic_id, p) in sorted(manager.shard.states, key=lambda k: (k[0], str(k[1]), k[2])):
            topic = by_id.get(topic_id)
            if topic is None:
                continue
            behind = manager.lag(group, topic, p)
            if behind < 0:
                continue
            lag.add_metric([group, topic.name, str(p)], behind)
            totals[group] = totals.get(group, 0) + behind
        for group, total in totals.items():
            group_lag.add_metric([group], total)
        per_group: dict[str, int] = {}
        for (group, _member) in manager.sessions.sessions:
            per_group[group] = per_group.get(group, 0) + 1
        for group, n in sorted(per_group.items()):
            sessions.add_metric([group], n)
    yield in_flight
    yield acquired
    yield lag
    yield group_lag
    yield sessions
