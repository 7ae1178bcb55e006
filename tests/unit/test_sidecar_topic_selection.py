"""Which topics the compaction sidecar cleans and with which settings (sidecar/compact.py):
__consumer_offsets always, every topic whose cleanup.policy (its own, else the broker's
log.cleanup.policy, dynamic over static) has `compact`; each topic's segment.bytes,
delete.retention.ms and min.cleanable.dirty.ratio over the broker's; the plan of a pass
over several topics (no Spark here: tests/integration/test_sidecar_topics.py runs it)."""
from __future__ import annotations

import json
import os

from kcoord.sidecar.checkpoint import write_checkpoint
from kcoord.sidecar.compact import (
    compacted_topics,
    default_cleanup_policy,
    find_partitions,
    pass_settings,
    plan_pass,
)
from kcoord.storage.log import PartitionLog


def registry(log_dir, topics: dict[str, dict]) -> None:
    with open(os.path.join(log_dir, "kcoord-topics.json"), "w") as f:
        json.dump({"version": 1, "topics": [
            {"name": n, "topic_id": f"00000000-0000-0000-0000-{i:012d}", "partitions": 1, "configs": c}
            for i, (n, c) in enumerate(topics.items())]}, f)


def fill(log_dir, topic: str, records: int = 60) -> None:
    plog = PartitionLog(os.path.join(log_dir, f"{topic}-0"), segment_bytes=600)
    for i in range(records):
        plog.append_records([(b"k%d" % (i % 4), b"v" * 20)], 1_700_000_000_000)
    plog.close()


def test_which_topics_are_compacted(tmp_path):
    registry(tmp_path, {"__consumer_offsets": {"cleanup.policy": "compact"}, "changelog": {"cleanup.policy": "compact"},
                        "both": {"cleanup.policy": "delete,compact"}, "events": {"cleanup.policy": "delete"},
                        "plain": {}})
    assert set(compacted_topics(str(tmp_path))) == {"__consumer_offsets", "changelog", "both"}
    # the broker's default policy covers the topics without their own
    assert set(compacted_topics(str(tmp_path), "compact")) == {"__consumer_offsets", "changelog", "both", "plain"}
    assert default_cleanup_policy(str(tmp_path)) == "delete"
    assert default_cleanup_policy(str(tmp_path), "compact") == "compact"
    with open(tmp_path / "kcoord-broker-configs.json", "w") as f:
        json.dump({"version": 1, "cluster": {"log.cleanup.policy": "compact"}, "brokers": {}}, f)
    assert default_cleanup_policy(str(tmp_path), "delete") == "compact"  # dynamic over static


def test_no_registry_means_consumer_offsets_only(tmp_path):
    assert set(compacted_topics(str(tmp_path))) == {"__consumer_offsets"}


def test_partitions_of_compacted_topics_only(tmp_path):
    registry(tmp_path, {"changelog": {"cleanup.policy": "compact"}, "events": {}})
    for name in ("__consumer_offsets-0", "__consumer_offsets-3", "changelog-0", "changelog-1", "events-0",
                 "changelog-0.0123456789abcdef0123456789abcdef-delete"):
        os.makedirs(tmp_path / name)
    got = find_partitions(str(tmp_path), None)
    assert list(got) == [("__consumer_offsets", 0), ("__consumer_offsets", 3), ("changelog", 0), ("changelog", 1)]
    assert list(find_partitions(str(tmp_path), {0})) == [("__consumer_offsets", 0), ("changelog", 0)]


def test_pass_settings_take_the_topics_configs_over_the_brokers(tmp_path):
    registry(tmp_path, {"changelog": {"cleanup.policy": "compact", "segment.bytes": "4096",
                                      "delete.retention.ms": "10", "min.cleanable.dirty.ratio": "0.1"},
                        "defaults": {"cleanup.policy": "compact"}})
    topics = compacted_topics(str(tmp_path))
    kw = dict(offsets_segment_bytes=1000, log_segment_bytes=2000, delete_retention_ms=99, min_ratio=0.5)
    assert pass_settings(topics["changelog"], **kw) == {"segment_bytes": 4096, "delete_retention_ms": 10,
                                                        "min_ratio": 0.1, "verify_mode": "records"}
    assert pass_settings(topics["defaults"], **kw) == {"segment_bytes": 2000, "delete_retention_ms": 99,
                                                       "min_ratio": 0.5, "verify_mode": "records"}
    assert pass_settings(topics["__consumer_offsets"], **kw) == {"segment_bytes": 1000, "delete_retention_ms": 99,
                                                                 "min_ratio": 0.5}


def test_a_pass_plans_each_topic_with_its_own_settings_and_dirty_ratio(tmp_path):
    registry(tmp_path, {"a": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.9"},
                        "b": {"cleanup.policy": "compact", "segment.bytes": "5000"}})
    fill(tmp_path, "a")
    fill(tmp_path, "b")
    topics = compacted_topics(str(tmp_path))
    settings = {n: pass_settings(t, offsets_segment_bytes=1, log_segment_bytes=2, delete_retention_ms=3, min_ratio=0.5)
                for n, t in topics.items()}
    parts = find_partitions(str(tmp_path), None, topics)
    plans, skipped = plan_pass(str(tmp_path), parts, output_dir=None, min_ratio=0.5, settings=settings)
    assert [(p.topic, p.partition) for p in plans] == [("a", 0), ("b", 0)]
    assert plans[1].settings == {"segment_bytes": 5000, "delete_retention_ms": 3, "verify_mode": "records"}
    assert all(p.active_base is not None and p.bases for p in plans)
    # once a's closed segments are cleaned (checkpointed), its dirty ratio is below its 0.9
    write_checkpoint(str(tmp_path), {("a", 0): plans[0].active_base})
    plans, skipped = plan_pass(str(tmp_path), parts, output_dir=None, min_ratio=0.5, settings=settings)
    assert [(p.topic, p.partition) for p in plans] == [("b", 0)]
    assert skipped[("a", 0)].startswith("dirty ratio 0.00 below 0.9")
