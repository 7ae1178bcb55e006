"""The Prometheus endpoint: group and offset figures, per-API latency, and consumer lag that
stays visible after the group has gone Empty."""
from __future__ import annotations

import urllib.request

from confluent_kafka import Producer
from conftest import call, free_port, unique
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest
from prometheus_client.parser import text_string_to_metric_families


def scrape(port: int) -> dict[str, list]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(samples: list, name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_metrics_endpoint(kcoord_factory):
    port = free_port()
    srv = kcoord_factory({"kcoord.metrics.listener": f"http://127.0.0.1:{port}"})
    topic, group = unique("lag"), unique("lag-group")
    CT = CreateTopicsRequest.CreatableTopic
    r = call(srv.bootstrap, CreateTopicsRequest(
        topics=[CT(name=topic, num_partitions=2, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False), 5)
    assert r.topics[0].error_code == 0
    p = Producer({"bootstrap.servers": srv.bootstrap})
    for i in range(10):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(15) == 0
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    resp = call(srv.bootstrap, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=4, committed_metadata="")])]), 8)
    assert resp.topics[0].partitions[0].error_code == 0

    m = scrape(port)
    assert value(m["kcoord_groups"], "kcoord_groups", state="Empty") >= 1
    assert value(m["kcoord_offsets"], "kcoord_offsets") >= 1
    # the group has no members (Empty), and its lag is still reported: 10 produced, 4 committed
    assert value(m["kcoord_consumer_lag"], "kcoord_consumer_lag", group=group, topic=topic, partition="0") == 6
    assert value(m["kcoord_consumer_group_lag"], "kcoord_consumer_group_lag", group=group) == 6
    assert value(m["kcoord_offset_commits"], "kcoord_offset_commits_total") >= 1
    assert value(m["kcoord_request_latency_seconds"], "kcoord_request_latency_seconds_count", api="OffsetCommit") >= 1
    assert value(m["kcoord_request_latency_seconds"], "kcoord_request_latency_seconds_count", api="Produce") >= 1
    loads = [s for s in m["kcoord_coordinator_partition_load_seconds"]]
    assert len(loads) == 50
    assert value(m["kcoord_connections"], "kcoord_connections") >= 0
