"""The topic lifecycle admin APIs through three real admin clients against a kcoord process:
confluent-kafka's AdminClient (librdkafka), kafka-python's KafkaAdminClient and Java
kafka-clients' Admin (tests/compat/java/TopicAdmin.java), each with its error paths and a
restart after each change.

DeleteTopics: the topic, its files and every group's committed offsets gone; the name
recreated at once with a new id and an empty log; unknown names and ids, internal topics and
delete.topic.enable=false refused as Kafka refuses them.
CreatePartitions: grown (validate_only, assignments), refused as Kafka refuses.
DeleteRecords: the log start offset moves and ListOffsets, consumers and segment files follow;
refused beyond the high watermark, on compacted-only and internal topics.
"""
from __future__ import annotations

import os
import time
import uuid

import pytest
from clientlib import run_java
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import committed, unique

pytestmark = pytest.mark.integration


# ---------------------------------------------------------------- helpers


def ck_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


def ck_create(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = ck_admin(bootstrap)  # kept alive until the answer: a destroyed handle fails its futures
    futs = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=20)
    futs[topic].result(30)


def ck_delete_error(bootstrap: str, topic: str) -> int | None:
    """The KafkaError code librdkafka reports for deleting `topic` (None: deleted)."""
    admin = ck_admin(bootstrap)
    fut = admin.delete_topics([topic], operation_timeout=20)[topic]
    try:
        fut.result(30)
    except KafkaException as e:
        return e.args[0].code()
    return None


def produce(bootstrap: str, topic: str, n: int, partitions: int = 1, batch: int = 0) -> None:
    """n records spread over the partitions; with `batch`, flushed every `batch` records (so
    each partition gets many small batches, e.g. to fill many small segments)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 20000})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i + b"x" * 50, partition=i % partitions)
        if batch and (i + 1) % batch == 0:
            assert p.flush(30) == 0
    assert p.flush(30) == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        res = c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
        assert all(tp.error is None for tp in res), res
    finally:
        c.close()


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


def topic_dirs(srv, topic: str) -> list[str]:
    """Partition directories of `topic` (and any `-delete` leftovers of it) in the log dir."""
    return sorted(n for n in os.listdir(srv.log_dir) if n.startswith(f"{topic}-"))


def topic_ids(srv, topic: str) -> dict[str, str]:
    """partition.metadata topic id per partition directory of `topic`."""
    out = {}
    for d in topic_dirs(srv, topic):
        with open(os.path.join(srv.log_dir, d, "partition.metadata")) as f:
            out[d] = f.read().split("topic_id:")[1].strip()
    return out


def java_admin(bootstrap: str, *ops: str, timeout: float = 120) -> list[dict]:
    res = run_java("TopicAdmin", bootstrap, *ops, timeout=timeout)
    got = res.kinds("result")
    assert [r["op"] for r in got] == list(ops), res.describe()
    return got


def kp_admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)


def listed(bootstrap: str) -> set[str]:
    admin = ck_admin(bootstrap)
    md = admin.list_topics(timeout=10)
    return set(md.topics)


# ---------------------------------------------------------------- DeleteTopics


def test_delete_topics_confluent(kcoord):
    b = kcoord.bootstrap
    topic, keep = unique("del-ck"), unique("keep-ck")
    ck_create(b, topic, 3)
    ck_create(b, keep, 1)
    produce(b, topic, 30, partitions=3)
    commit(b, "g-del-ck", {(topic, 0): 4, (topic, 2): 6, (keep, 0): 1})
    old_ids = set(topic_ids(kcoord, topic).values())
    assert ck_delete_error(b, topic) is None
    assert topic not in listed(b) and keep in listed(b)
    assert topic_dirs(kcoord, topic) == []
    assert committed(b, "g-del-ck", topic) == {} and committed(b, "g-del-ck", keep) == {0: 1}
    # refusals
    assert ck_delete_error(b, topic) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert ck_delete_error(b, "__consumer_offsets") == KafkaError.TOPIC_EXCEPTION
    # the name at once, with a new id and nothing of the old data
    ck_create(b, topic, 2)
    assert watermarks(b, topic) == (0, 0)
    assert not set(topic_ids(kcoord, topic).values()) & old_ids
    kcoord.restart()
    assert topic in listed(b) and watermarks(b, topic) == (0, 0)
    assert committed(b, "g-del-ck", topic) == {} and committed(b, "g-del-ck", keep) == {0: 1}
    assert topic_dirs(kcoord, topic) == [f"{topic}-0", f"{topic}-1"]


def test_delete_topics_kafka_python_by_name_and_id(kcoord):
    from kafka.errors import InvalidTopicError, UnknownTopicIdError, UnknownTopicOrPartitionError

    b = kcoord.bootstrap
    by_name, by_id = unique("del-kp"), unique("del-kp-id")
    admin = kp_admin(b)
    try:
        ck_create(b, by_name, 2)
        ck_create(b, by_id, 2)
        produce(b, by_id, 10, partitions=2)
        commit(b, "g-del-kp", {(by_id, 1): 3})
        tid = admin.describe_topics([by_id])[0]["topic_id"]
        tid = tid if isinstance(tid, uuid.UUID) else uuid.UUID(str(tid))
        res = admin.delete_topics([by_name])
        assert [(t["name"], t["error_code"]) for t in res["topics"]] == [(by_name, 0)]
        res = admin.delete_topics([tid])  # DeleteTopics v6 by topic id
        assert [(t["name"], t["error_code"]) for t in res["topics"]] == [(by_id, 0)]
        assert topic_dirs(kcoord, by_id) == [] and committed(b, "g-del-kp", by_id) == {}
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics([by_name])
        with pytest.raises(UnknownTopicIdError):
            admin.delete_topics([uuid.uuid4()])
        with pytest.raises(InvalidTopicError):
            admin.delete_topics(["__consumer_offsets"])
    finally:
        admin.close()
    kcoord.restart()
    assert not ({by_name, by_id} & listed(b))
    assert topic_dirs(kcoord, by_name) == [] and topic_dirs(kcoord, by_id) == []


def test_delete_topics_java(kcoord):
    b = kcoord.bootstrap
    t1, t2 = unique("del-java"), unique("del-java-id")
    got = java_admin(b, f"create:{t1}:2", f"create:{t2}:3", f"describe:{t2}", f"delete:{t1}", f"deleteid:{t2}",
                     f"delete:{t1}", "deleteid-random", "delete:__consumer_offsets", f"create:{t1}:1",
                     f"describe:{t1}", f"latest:{t1}:0")
    r = {g["op"]: g for g in got}
    assert r[f"create:{t1}:2"]["error"] is None and r[f"create:{t2}:3"]["error"] is None
    assert r[f"deleteid:{t2}"]["error"] is None and r[f"deleteid:{t2}"]["id"] == r[f"describe:{t2}"]["id"]
    assert [g["error"] for g in got if g["op"] == f"delete:{t1}"] == [None, "UnknownTopicOrPartitionException"]
    assert r["deleteid-random"]["error"] == "UnknownTopicIdException"
    assert r["delete:__consumer_offsets"]["error"] == "InvalidTopicException"
    assert r[f"describe:{t1}"]["partitions"] == 1 and r[f"latest:{t1}:0"]["offset"] == 0
    assert topic_dirs(kcoord, t2) == []
    kcoord.restart()
    got = java_admin(b, f"describe:{t1}", f"describe:{t2}")
    assert got[0]["error"] is None and got[0]["partitions"] == 1
    assert got[1]["error"] == "UnknownTopicOrPartitionException"


def test_delete_topic_enable_false_is_refused_by_every_client(kcoord_factory):
    from kafka.errors import TopicDeletionDisabledError

    srv = kcoord_factory({"delete.topic.enable": "false"})
    b = srv.bootstrap
    topic = unique("nodel")
    ck_create(b, topic, 1)
    assert ck_delete_error(b, topic) == KafkaError.TOPIC_DELETION_DISABLED
    admin = kp_admin(b)
    try:
        with pytest.raises(TopicDeletionDisabledError):
            admin.delete_topics([topic])
    finally:
        admin.close()
    got = java_admin(b, f"delete:{topic}")
    assert got[0]["error"] == "TopicDeletionDisabledException"
    assert topic in listed(b) and topic_dirs(srv, topic) == [f"{topic}-0"]


# ---------------------------------------------------------------- CreatePartitions


def ck_grow_error(bootstrap: str, topic: str, count: int, assignment=None, validate_only=False) -> int | None:
    from confluent_kafka.admin import NewPartitions

    admin = ck_admin(bootstrap)
    np = NewPartitions(topic, count, assignment) if assignment is not None else NewPartitions(topic, count)
    fut = admin.create_partitions([np], operation_timeout=20, validate_only=validate_only)[topic]
    try:
        fut.result(30)
    except KafkaException as e:
        return e.args[0].code()
    return None


def partition_count(bootstrap: str, topic: str) -> int:
    admin = ck_admin(bootstrap)
    md = admin.list_topics(topic, timeout=10)
    return len(md.topics[topic].partitions)


def test_create_partitions_confluent(kcoord):
    b = kcoord.bootstrap
    topic = unique("grow-ck")
    ck_create(b, topic, 2)
    assert ck_grow_error(b, topic, 4, validate_only=True) is None and partition_count(b, topic) == 2
    assert ck_grow_error(b, topic, 4) is None and partition_count(b, topic) == 4
    assert ck_grow_error(b, topic, 6, assignment=[[1], [1]]) is None and partition_count(b, topic) == 6
    assert ck_grow_error(b, topic, 6) == KafkaError.INVALID_PARTITIONS
    assert ck_grow_error(b, topic, 3) == KafkaError.INVALID_PARTITIONS
    assert ck_grow_error(b, topic, 7, assignment=[[2]]) == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert ck_grow_error(b, topic, 8, assignment=[[1]]) == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert ck_grow_error(b, unique("nope"), 3) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert ck_grow_error(b, "__consumer_offsets", 60) == KafkaError.TOPIC_EXCEPTION
    produce(b, topic, 60, partitions=6)
    assert [watermarks(b, topic, p) for p in range(6)] == [(0, 10)] * 6
    kcoord.restart()
    assert partition_count(b, topic) == 6
    assert [watermarks(b, topic, p) for p in range(6)] == [(0, 10)] * 6


def test_create_partitions_kafka_python(kcoord):
    from kafka.errors import (
        InvalidPartitionsError,
        InvalidReplicationAssignmentError,
        UnknownTopicOrPartitionError,
    )

    b = kcoord.bootstrap
    topic = unique("grow-kp")
    ck_create(b, topic, 1)
    admin = kp_admin(b)
    try:
        admin.create_partitions({topic: 3}, validate_only=True)
        assert partition_count(b, topic) == 1
        admin.create_partitions({topic: 3})
        admin.create_partitions({topic: {"count": 4, "assignments": [[1]]}})
        assert partition_count(b, topic) == 4
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({topic: 2})
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_partitions({topic: {"count": 5, "assignments": [[1, 1]]}})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.create_partitions({unique("nope"): 2})
    finally:
        admin.close()
    kcoord.restart()
    assert partition_count(b, topic) == 4


def test_create_partitions_java(kcoord):
    b = kcoord.bootstrap
    topic = unique("grow-java")
    got = java_admin(b, f"create:{topic}:1", f"validate-partitions:{topic}:3", f"describe:{topic}",
                     f"partitions:{topic}:3", f"partitions:{topic}:5:1;1", f"describe:{topic}",
                     f"partitions:{topic}:5", f"partitions:{topic}:2", f"partitions:{topic}:6:3",
                     f"partitions:{topic}:7:1", "partitions:__consumer_offsets:60",
                     f"partitions:{unique('nope')}:2")
    errors = [g["error"] for g in got]
    assert errors == [None, None, None, None, None, None, "InvalidPartitionsException",
                      "InvalidPartitionsException", "InvalidReplicaAssignmentException",
                      "InvalidReplicaAssignmentException", "InvalidTopicException",
                      "UnknownTopicOrPartitionException"], got
    assert got[2]["partitions"] == 1 and got[5]["partitions"] == 5
    assert got[6]["message"] == "Topic already has 5 partition(s)."
    assert got[7]["message"] == f"The topic {topic} currently has 5 partition(s); 2 would not be an increase."
    kcoord.restart()
    assert java_admin(b, f"describe:{topic}")[0]["partitions"] == 5


# ---------------------------------------------------------------- DeleteRecords


def ck_delete_records(bootstrap: str, topic: str, partition: int, offset: int) -> tuple[int | None, int]:
    """(error code or None, low watermark) as librdkafka reports them."""
    admin = ck_admin(bootstrap)
    tp = TopicPartition(topic, partition, offset)
    fut = admin.delete_records([tp], operation_timeout=20)[tp]
    try:
        return None, fut.result(30).low_watermark
    except KafkaException as e:
        return e.args[0].code(), -1


def consume_from_beginning(bootstrap: str, topic: str, partition: int, n: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, partition, -2)])  # OFFSET_BEGINNING: the log start offset
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.offset())
        return got
    finally:
        c.close()


def segment_files(srv, topic: str, partition: int) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(srv.log_dir, f"{topic}-{partition}")) if n.endswith(".log"))


def test_delete_records_confluent(kcoord):
    b = kcoord.bootstrap
    topic = unique("dr-ck")
    ck_create(b, topic, 1, {"segment.bytes": "1024"})
    produce(b, topic, 100, batch=5)
    before = segment_files(kcoord, topic, 0)
    assert len(before) > 3
    assert ck_delete_records(b, topic, 0, 60) == (None, 60)
    assert watermarks(b, topic) == (60, 100)
    assert consume_from_beginning(b, topic, 0, 40) == list(range(60, 100))
    after = segment_files(kcoord, topic, 0)
    assert len(after) < len(before) and after[0] > before[0]
    assert ck_delete_records(b, topic, 0, 101)[0] == KafkaError.OFFSET_OUT_OF_RANGE
    assert ck_delete_records(b, topic, 0, 10) == (None, 60)  # never backwards
    # an unknown topic has no leader in Metadata: librdkafka refuses before asking the broker
    assert ck_delete_records(b, unique("nope"), 0, 1)[0] == KafkaError._NOENT
    kcoord.restart()
    assert watermarks(b, topic) == (60, 100)
    assert consume_from_beginning(b, topic, 0, 40) == list(range(60, 100))
    assert ck_delete_records(b, topic, 0, -1) == (None, 100)  # OFFSET_END: everything
    kcoord.restart()
    assert watermarks(b, topic) == (100, 100)


def test_delete_records_kafka_python(kcoord):
    from kafka import KafkaConsumer
    from kafka.errors import OffsetOutOfRangeError, PolicyViolationError
    from kafka.structs import TopicPartition as KTP

    b = kcoord.bootstrap
    topic, compacted = unique("dr-kp"), unique("dr-kp-compact")
    ck_create(b, topic, 2)
    ck_create(b, compacted, 1, {"cleanup.policy": "compact"})
    produce(b, topic, 40, partitions=2)
    admin = kp_admin(b)
    try:
        got = admin.delete_records({KTP(topic, 0): 5, KTP(topic, 1): 20})
        assert {tp.partition: r["low_watermark"] for tp, r in got.items()} == {0: 5, 1: 20}
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({KTP(topic, 0): 21})
        with pytest.raises(PolicyViolationError):
            admin.delete_records({KTP(compacted, 0): 0})
    finally:
        admin.close()
    kcoord.restart()
    c = KafkaConsumer(bootstrap_servers=b, request_timeout_ms=15000)
    try:
        assert c.beginning_offsets([KTP(topic, 0), KTP(topic, 1)]) == {KTP(topic, 0): 5, KTP(topic, 1): 20}
    finally:
        c.close()


def test_delete_records_java(kcoord):
    b = kcoord.bootstrap
    topic = unique("dr-java")
    ck_create(b, topic, 1)
    produce(b, topic, 30)
    got = java_admin(b, f"deleterecords:{topic}:0:12", f"earliest:{topic}:0", f"latest:{topic}:0",
                     f"deleterecords:{topic}:0:31", "deleterecords:__consumer_offsets:0:0",
                     f"deleterecords:{topic}:0:-1", f"earliest:{topic}:0")
    assert [g["error"] for g in got] == [None, None, None, "OffsetOutOfRangeException", "InvalidTopicException",
                                         None, None], got
    assert got[0]["low_watermark"] == 12 and got[1]["offset"] == 12 and got[2]["offset"] == 30
    assert got[5]["low_watermark"] == 30 and got[6]["offset"] == 30
    kcoord.restart()
    got = java_admin(b, f"earliest:{topic}:0", f"latest:{topic}:0")
    assert [g["offset"] for g in got] == [30, 30]
