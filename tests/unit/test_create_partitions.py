"""CreatePartitions on a real Broker over tmp_path: Kafka's answers for each refusal, the new
partitions' logs and metadata, validate_only, and the count kept across a restart (also when
the process stopped between the registry write and the new logs)."""
from __future__ import annotations

import shutil

import pytest
from kafka.protocol.admin import CreatePartitionsRequest
from kafka.protocol.metadata import MetadataRequest
from test_produce_helpers import batch, call, make_broker, produce

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.broker import Broker
from kcoord.server.config import Config
from kcoord.storage.partition_metadata import read_partition_metadata

T = CreatePartitionsRequest.CreatePartitionsTopic


@pytest.fixture
async def broker(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 2, {})
    yield b
    await b.stop()


async def grow(broker, *topics, validate_only=False, version=3):
    req = CreatePartitionsRequest(version=version, timeout_ms=5000, validate_only=validate_only, topics=list(topics))
    resp = await call(broker, ApiKey.CREATE_PARTITIONS, req, version)
    return [(r.name, r.error_code, r.error_message) for r in resp.results]


def assign(*replicas):
    return [T.CreatePartitionsAssignment(broker_ids=list(r)) for r in replicas]


async def metadata_partitions(broker, topic):
    req = MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                          allow_auto_topic_creation=False)
    resp = await call(broker, ApiKey.METADATA, req, 9)
    return sorted(p.partition_index for p in resp.topics[0].partitions)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_grow_a_topic(broker, version):
    assert await grow(broker, T(name="t", count=5, assignments=None), version=version) == [("t", 0, None)]
    assert broker.topics.get("t").partitions == 5
    assert await metadata_partitions(broker, "t") == [0, 1, 2, 3, 4]
    tid = broker.topics.get("t").topic_id
    for p in (2, 3, 4):
        assert broker.logs.get("t", p) is not None
        assert read_partition_metadata(str(broker.log_dir / f"t-{p}")) == tid
    assert (await produce(broker, "t", 4, batch([b"x"]))).error_code == 0


async def test_validate_only_changes_nothing(broker):
    assert await grow(broker, T(name="t", count=4, assignments=None), validate_only=True) == [("t", 0, None)]
    assert broker.topics.get("t").partitions == 2 and broker.logs.get("t", 2) is None
    # and refuses as the real request would
    got = await grow(broker, T(name="t", count=1, assignments=None), validate_only=True)
    assert got == [("t", E.INVALID_PARTITIONS, "The topic t currently has 2 partition(s); 1 would not be an increase.")]


async def test_refusals_with_kafkas_messages(broker):
    got = await grow(broker,
                     T(name="t", count=2, assignments=None),
                     T(name="nope", count=3, assignments=None),
                     T(name="__consumer_offsets", count=60, assignments=None))
    assert got[0] == ("t", E.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
    assert got[1] == ("nope", E.UNKNOWN_TOPIC_OR_PARTITION, None)
    assert got[2][:2] == ("__consumer_offsets", E.INVALID_TOPIC_EXCEPTION)
    got = await grow(broker, T(name="t", count=1, assignments=None))
    assert got == [("t", E.INVALID_PARTITIONS, "The topic t currently has 2 partition(s); 1 would not be an increase.")]
    assert broker.topics.get("t").partitions == 2
    assert broker.topics.get("__consumer_offsets").partitions == 1


async def test_duplicate_topic_names(broker):
    got = await grow(broker, T(name="t", count=3, assignments=None), T(name="t", count=4, assignments=None))
    assert got == [("t", E.INVALID_REQUEST, "Duplicate topic name.")]
    assert broker.topics.get("t").partitions == 2


async def test_assignments_are_checked_against_the_one_broker(broker):
    node = broker.config.node_id
    cases = [
        (assign([node]), "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        (assign([node], []), "The manual partition assignment includes an empty replica list."),
        (assign([node], [7]), "The manual partition assignment includes broker 7, but no such broker is registered."),
        (assign([node], [node, node]), f"The manual partition assignment includes the broker {node} more than once."),
    ]
    for assignments, message in cases:
        got = await grow(broker, T(name="t", count=4, assignments=assignments))
        assert got == [("t", E.INVALID_REPLICA_ASSIGNMENT, message)]
    assert broker.topics.get("t").partitions == 2
    assert await grow(broker, T(name="t", count=4, assignments=assign([node], [node]))) == [("t", 0, None)]
    assert broker.topics.get("t").partitions == 4


async def test_too_many_partitions_in_one_request(broker):
    got = await grow(broker, T(name="t", count=20_000, assignments=None))
    assert got == [("t", E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")]
    assert broker.topics.get("t").partitions == 2


async def test_kept_across_a_restart_even_without_the_new_logs(broker, tmp_path):
    assert (await grow(broker, T(name="t", count=4, assignments=None)))[0][1] == 0
    await broker.stop()
    shutil.rmtree(broker.log_dir / "t-3")  # as if the process died before creating it
    b = Broker(Config({"log.dirs": str(broker.log_dir), "offsets.topic.num.partitions": 1}))
    await b.start()
    try:
        assert b.topics.get("t").partitions == 4
        assert b.logs.get("t", 3) is not None
        assert read_partition_metadata(str(b.log_dir / "t-3")) == b.topics.get("t").topic_id
    finally:
        await b.stop()
