"""The topic lifecycle admin APIs through three real admin clients against a kcoord process:
confluent-kafka's AdminClient (librdkafka), kafka-python's KafkaAdminClient and Java
kafka-clients' Admin (tests/compat/java/TopicAdmin.java), each with its error paths and a
restart after each change.

DeleteTopics: the topic, its files and every group's committed offsets gone; the name
recreated at once with a new id and an empty log; unknown names and ids, internal topics and
delete.topic.enable=false refused as Kafka refuses them.
"""
from __future__ import annotations

import os
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


def produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 20000})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
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
