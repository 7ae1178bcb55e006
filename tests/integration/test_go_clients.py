"""A Go client against kcoord: sarama (Debian's golang-github-shopify-sarama-dev, 1.22), built
from tests/compat/go/sarama. Sarama sends no ApiVersions request; it picks fixed request
versions from its configured Kafka version (2.1: Produce v3, Fetch v4, Metadata v5, JoinGroup v1,
OffsetCommit v2, OffsetFetch v1), which kcoord must serve as Kafka does.

A sarama producer writes keyed messages; a sarama consumer group member reads them, marks each
and commits on close; the offsets it committed are read back through kafka-python's admin
client, and a second member of the group reads only what was produced after them. A sarama
member shares a group with a confluent-kafka one (both roundrobin) and leaves it with a
LeaveGroup, handing its partitions over with nothing read twice."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from clientlib import python_member, sarama, sarama_member
from conftest import committed, removals, unique
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.integration

PARTITIONS = 3


def create_topic(bootstrap: str, name: str, partitions: int) -> str:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


@pytest.fixture
def topic(kcoord) -> Iterator[str]:
    yield create_topic(kcoord.bootstrap, unique("go-sarama"), PARTITIONS)


@pytest.mark.compat("sarama", "bootstrap", "group join", "commit/fetch", "consume", "restart resume")
def test_sarama_produces_and_a_sarama_group_consumes_and_commits(kcoord, topic):
    produced = sarama("produce", kcoord.bootstrap, topic, 30, "first", timeout=90).kinds("produced")
    assert len(produced) == 30
    # the default partitioner hashes the key: 30 keys spread over the 3 partitions
    ends = {p: sum(1 for r in produced if r["partition"] == p) for p in range(PARTITIONS)}
    assert all(ends.values()), ends
    for p in range(PARTITIONS):  # offsets within a partition are dense from 0
        assert sorted(r["offset"] for r in produced if r["partition"] == p) == list(range(ends[p]))

    group = unique("go-sarama-group")
    first = sarama("consume", kcoord.bootstrap, topic, group, 30, timeout=120)
    assigned = first.kinds("assigned")
    assert assigned and sorted(assigned[-1]["claims"][topic]) == list(range(PARTITIONS)), first.describe()
    got = first.kinds("consumed")
    assert sorted(r["value"] for r in got) == sorted(r["value"] for r in produced)
    for r in got:  # each message arrives where it was produced, with its key
        match = next(x for x in produced if x["value"] == r["value"])
        assert (r["partition"], r["offset"]) == (match["partition"], match["offset"])
        assert r["key"] == f"k{r['value'].split('-')[1]}"
    assert first.one("closed")["consumed"] == 30

    assert committed(kcoord.bootstrap, group, topic) == ends  # what sarama committed on close

    more = sarama("produce", kcoord.bootstrap, topic, 6, "second", timeout=90).kinds("produced")
    second = sarama("consume", kcoord.bootstrap, topic, group, 6, timeout=120)
    # resumed from the committed offsets: only the new messages, none of the first 30 again
    assert sorted(r["value"] for r in second.kinds("consumed")) == sorted(r["value"] for r in more)
    after = {p: ends[p] + sum(1 for r in more if r["partition"] == p) for p in range(PARTITIONS)}
    assert committed(kcoord.bootstrap, group, topic) == after


@pytest.mark.compat("sarama", "rebalance on leave")
def test_sarama_shares_a_group_with_librdkafka_and_leaving_hands_its_partitions_over(kcoord, members):
    topic, group = create_topic(kcoord.bootstrap, unique("go-mixed"), 6), unique("go-mixed-group")
    produced: set[tuple[int, int]] = set()

    def produce(n: int, prefix: str) -> None:
        got = sarama("produce", kcoord.bootstrap, topic, n, prefix, timeout=90).kinds("produced")
        produced.update((r["partition"], r["offset"]) for r in got)

    def read(*ms) -> list[tuple[int, int]]:
        return [(p, o) for m in ms for p, o, _ in m.consumed()]

    produce(60, "a")
    stays = python_member("confluent", kcoord.bootstrap, topic, group, name="stays",
                          session_timeout_ms=10_000, heartbeat_interval_ms=1_000)
    members.append(stays)
    stays.wait_for(lambda m: len(m.consumed()) >= 60, 90, "the first 60 records")
    go = sarama_member(kcoord.bootstrap, topic, group, name="go")
    members.append(go)
    go.wait_for(lambda m: m.assignment(), 90, "sarama's assignment")
    stays.wait_for(lambda m: m.assignment() is not None and len(m.assignment()) == 3, 60, "the split")
    assert go.assignment() | stays.assignment() == set(range(6)), (go.describe(), stays.describe())

    produce(60, "b")  # both read their half
    stays.wait_for(lambda m: set(read(m, go)) >= produced, 90, "the next 60 records, read by both")
    assert read(go), go.describe()

    assert go.close() == 0, go.describe()
    assert go.events("closed"), go.describe()
    stays.wait_for(lambda m: m.assignment() == set(range(6)), 60, "the take-over")
    assert removals(kcoord, group) == (1, 0), "sarama's close was not a LeaveGroup"
    produce(30, "c")
    stays.wait_for(lambda m: set(read(m, go)) >= produced, 90, "the last 30 records")
    both = read(stays, go)
    assert sorted(both) == sorted(produced), "a record was read twice (or never)"
    assert not go.events("error") and not stays.events("error") and not stays.events("commit_error")
