"""Share groups in kcoord's Prometheus metrics (server/share/metrics.py): members, in-flight and
acquired records, lag and share sessions per share group, as raw share requests change them; and
the control API's injected errors on the share APIs: ShareFetch answering a retriable error a few
times, a confluent-kafka ShareConsumer goes on and consumes every record."""
from __future__ import annotations

import re
import time
import urllib.request

import pytest
from conftest import call, free_port, unique
from test_share_consumers import PyWorker, earliest, expected, joined, produce
from test_share_fetch_wire import ACCEPT, _ack, _acquired, _fetch, _offsets, _topic

from kcoord.protocol.share_messages import AlterShareGroupOffsetsRequest, ShareGroupHeartbeatRequest

pytestmark = pytest.mark.integration


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(kcoord_share_\w+)(?:\{(.*)\})? (\S+)$", line)
        if m:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def test_share_group_metrics(kcoord_factory) -> None:
    port = free_port()
    server = kcoord_factory({"kcoord.metrics.listener": f"http://127.0.0.1:{port}"})
    b = server.bootstrap
    group = unique("share-g")
    topic = group + "-t"
    tid = _topic(b, topic, 10)
    T = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    assert call(b, AlterShareGroupOffsetsRequest(version=0, group_id=group, topics=[T(topic_name=topic, partitions=[
        T.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])]), 0).error_code == 0
    hb = call(b, ShareGroupHeartbeatRequest(version=1, group_id=group, member_id="m-1", member_epoch=0, rack_id=None,
                                            subscribed_topic_names=[topic]), 1)
    assert hb.error_code == 0
    got = _acquired(_fetch(b, group, "m-1", 0, tid))
    assert _offsets(got) == set(range(10))
    part = (("group", group), ("partition", "0"), ("topic", topic))
    m = scrape(port)
    assert m[("kcoord_share_group_members", (("group", group),))] == 1
    assert m[("kcoord_share_partition_in_flight_records", part)] == 10
    assert m[("kcoord_share_partition_acquired_records", part)] == 10
    assert m[("kcoord_share_partition_lag", part)] == 10
    assert m[("kcoord_share_group_lag", (("group", group),))] == 10
    assert m[("kcoord_share_sessions", (("group", group),))] == 1
    r = _ack(b, group, "m-1", 1, tid, {0: [(0, 5, [ACCEPT])]})
    assert r.responses[0].partitions[0].error_code == 0
    m = scrape(port)
    assert m[("kcoord_share_partition_acquired_records", part)] == 4
    assert m[("kcoord_share_partition_in_flight_records", part)] == 4  # the window moved past 0-5
    assert m[("kcoord_share_partition_lag", part)] == 4
    assert _ack(b, group, "m-1", -1, tid, {}).error_code == 0  # closing the session releases the rest
    hb = call(b, ShareGroupHeartbeatRequest(version=1, group_id=group, member_id="m-1", member_epoch=-1, rack_id=None,
                                            subscribed_topic_names=None), 1)
    assert hb.error_code == 0
    m = scrape(port)
    assert m[("kcoord_share_group_members", (("group", group),))] == 0
    assert m[("kcoord_share_partition_acquired_records", part)] == 0
    assert m[("kcoord_share_partition_lag", part)] == 4
    assert ("kcoord_share_sessions", (("group", group),)) not in m


def test_injected_share_fetch_errors_are_retried(kcoord_factory) -> None:
    server = kcoord_factory({
        "group.share.min.session.timeout.ms": "6000", "group.share.session.timeout.ms": "10000",
        "group.share.min.heartbeat.interval.ms": "500", "group.share.heartbeat.interval.ms": "1000",
        "group.share.record.lock.duration.ms": "5000"}, control=True)
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = unique("share-t"), unique("share-g")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    earliest(server, group, topic)
    w = PyWorker(server.bootstrap, group, topic)
    try:
        joined(server, group, 1)
        rule = server.control.inject_error("ShareFetch", "NOT_LEADER_OR_FOLLOWER", count=3, group_id=group)
        n = 200
        produce(server.bootstrap, topic, n)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and set(w.got) < expected(n):
            time.sleep(0.2)
        assert set(w.got) == expected(n), f"{len(set(w.got))} of {n}"
        # all three were answered (a rule whose count runs out is removed)
        assert rule["id"] not in {f["id"] for f in server.control.faults()}
    finally:
        w.close()
