"""Virtual brokers (kcoord.virtual.brokers=3): one kcoord that clients see as three brokers.
What each node answers (raw requests), then a group of Java and librdkafka members that keeps
consuming and committing while its coordinator moves twice and a leader's node goes down and
comes back, with no committed offset lost."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from clientlib import balanced, java_member, kcat_metadata, python_member
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import call, committed, unique
from kafka.protocol.consumer import FetchRequest, HeartbeatRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from kcoord.protocol.errors import ErrorCode
from kcoord.testing import ControlError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

PARTITIONS = 6


@pytest.fixture
def cluster(kcoord_factory):
    return kcoord_factory({"kcoord.virtual.brokers": "3", "num.partitions": str(PARTITIONS)}, control=True)


def endpoints(srv) -> dict[int, str]:
    return {b["node_id"]: b["listeners"][0]["advertised"] for b in srv.control.brokers()}


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def fetch(bootstrap: str, topic_id, partitions: list[int]):
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    req = FetchRequest(version=16, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                       session_epoch=-1, forgotten_topics_data=[], rack_id="", topics=[T(topic_id=topic_id, partitions=[
                           P(partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                             log_start_offset=-1, partition_max_bytes=1 << 20) for p in partitions])])
    return {p.partition_index: p.error_code for t in call(bootstrap, req, 16).responses for p in t.partitions}


def test_each_node_answers_as_a_broker_of_a_three_broker_cluster(cluster):
    nodes = endpoints(cluster)
    assert sorted(nodes) == [1, 2, 3] and nodes[1] == cluster.bootstrap and len(set(nodes.values())) == 3
    topic, group = unique("vb"), unique("vb-group")
    create_topic(cluster.bootstrap, topic)
    md = kcat_metadata(cluster.bootstrap, topic)  # librdkafka's view
    assert sorted(b["id"] for b in md["brokers"]) == [1, 2, 3]
    leaders = {p["partition"]: p["leader"] for p in md["topics"][0]["partitions"]}
    assert set(leaders.values()) == {1, 2, 3}  # spread over the nodes

    meta = call(cluster.bootstrap, MetadataRequest(version=12, topics=[
        MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False), 12)
    topic_id = meta.topics[0].topic_id
    on_1 = [p for p, n in leaders.items() if n == 1]
    elsewhere = [p for p, n in leaders.items() if n != 1]
    # one Fetch to node 1 for every partition: its own are served, the others refused
    got = fetch(nodes[1], topic_id, sorted(leaders))
    assert {p: got[p] for p in on_1} == dict.fromkeys(on_1, ErrorCode.NONE)
    assert {p: got[p] for p in elsewhere} == dict.fromkeys(elsewhere, ErrorCode.NOT_LEADER_OR_FOLLOWER)

    fc = call(cluster.bootstrap, FindCoordinatorRequest(version=3, key=group, key_type=0), 3)
    assert fc.error_code == 0 and f"{fc.host}:{fc.port}" == nodes[fc.node_id]
    coordinator = fc.node_id
    other = next(n for n in nodes if n != coordinator)
    hb = HeartbeatRequest(version=3, group_id=group, generation_id=1, member_id="m", group_instance_id=None)
    assert call(nodes[other], hb, 3).error_code == ErrorCode.NOT_COORDINATOR
    assert call(nodes[coordinator], hb, 3).error_code == ErrorCode.UNKNOWN_MEMBER_ID  # the coordinator's own answer

    moved = cluster.control.move_coordinator(group, other)
    assert moved["previous"] == coordinator
    fc = call(cluster.bootstrap, FindCoordinatorRequest(version=3, key=group, key_type=0), 3)
    assert fc.node_id == other
    assert call(nodes[coordinator], hb, 3).error_code == ErrorCode.NOT_COORDINATOR

    # a node down: no listener, its partitions leaderless, its groups' coordinator unavailable
    down = next(n for n in nodes if n != 1)
    cluster.control.broker_down(down)
    with pytest.raises(OSError):
        call(nodes[down], hb, 3)
    meta = call(cluster.bootstrap, MetadataRequest(version=12, topics=[
        MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)], allow_auto_topic_creation=False,
        include_topic_authorized_operations=False), 12)
    assert sorted(b.node_id for b in meta.brokers) == sorted(n for n in nodes if n != down)
    offline = {p.partition_index: (p.error_code, p.leader_id) for p in meta.topics[0].partitions
               if leaders[p.partition_index] == down}
    assert offline and set(offline.values()) == {(ErrorCode.LEADER_NOT_AVAILABLE, -1)}
    cluster.control.move_coordinator(group, down)
    fc = call(cluster.bootstrap, FindCoordinatorRequest(version=3, key=group, key_type=0), 3)
    assert fc.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    cluster.control.broker_up(down)
    fc = call(cluster.bootstrap, FindCoordinatorRequest(version=3, key=group, key_type=0), 3)
    assert (fc.error_code, fc.node_id, f"{fc.host}:{fc.port}") == (0, down, nodes[down])  # same port again

    with pytest.raises(ControlError) as e:
        cluster.control.move_coordinator(group, 9)
    assert e.value.status == 400 and "node ids [1, 2, 3]" in e.value.message
    out = subprocess.run([sys.executable, "-m", "kcoord.server", "ctl", "--url", cluster.control_url, "move-leader", topic,
                          str(on_1[0]), "3"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert fetch(nodes[3], topic_id, [on_1[0]]) == {on_1[0]: ErrorCode.NONE}
    assert fetch(nodes[1], topic_id, [on_1[0]]) == {on_1[0]: ErrorCode.NOT_LEADER_OR_FOLLOWER}
    cluster.control.reset()  # every node up, every leader back
    assert {b["node_id"]: b["up"] for b in cluster.control.brokers()} == {1: True, 2: True, 3: True}
    assert cluster.control.status()["topics"] == []


class Feeder:
    """An idempotent producer sending keyed records 0, 1, 2, ... to every partition until
    stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.sent = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        # idempotent: a batch whose answer was lost when its node went down is sent again, and
        # the broker must not write it twice
        self._p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 120000,
                            "reconnect.backoff.max.ms": 1000, "enable.idempotence": True})
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(6):
                self._p.produce(self.topic, key=b"%d" % self.sent, partition=self.sent % PARTITIONS,
                                on_delivery=lambda err, msg: err is not None and self.failed.append(str(err)))
                self.sent += 1
            self._p.poll(0.05)
            time.sleep(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._t.join(10)
        assert self._p.flush(120) == 0, "records still undelivered"
        return self.sent


def test_a_java_and_librdkafka_group_keeps_consuming_through_coordinator_moves_and_a_broker_restart(
        cluster, members):
    topic, group = unique("vbg"), unique("vbg-group")
    create_topic(cluster.bootstrap, topic)
    feeder = Feeder(cluster.bootstrap, topic)
    group_members = [java_member(cluster.bootstrap, topic, group, name="vb-java", session_timeout_ms=45000),
                     python_member("confluent", cluster.bootstrap, topic, group, name="vb-confluent",
                                   session_timeout_ms=45000)]
    members.extend(group_members)
    history: list[dict[int, int]] = []

    def progress(what: str, timeout: float = 120) -> None:
        """Both members consume and commit beyond where they were; the group's committed offsets
        never went back."""
        marks = [len(m.events("committed")) for m in group_members]
        deadline = time.monotonic() + timeout
        while not all(len(m.events("committed")) > mark + 1 for m, mark in zip(group_members, marks, strict=True)):
            assert time.monotonic() < deadline, f"no commits after {what}\n" + "\n".join(
                m.describe() for m in group_members)
            time.sleep(0.2)
        now = committed(cluster.bootstrap, group, topic)
        for before in history:
            assert all(now.get(p, -1) >= off for p, off in before.items()), (what, before, now)
        history.append(now)

    deadline = time.monotonic() + 120
    while balanced(group_members, PARTITIONS) is None:
        assert time.monotonic() < deadline, "\n".join(m.describe() for m in group_members)
        time.sleep(0.2)
    progress("the first assignment")

    offsets_partition = cluster.control.group(group)["partition"]
    nodes = sorted(endpoints(cluster))
    first = next(b for b in cluster.control.brokers() if offsets_partition in b["coordinator_partitions"])["node_id"]
    second = next(n for n in nodes if n != first)
    third = next(n for n in nodes if n not in (first, second))
    cluster.control.start_recording(apis=["FindCoordinator"])
    cluster.control.move_coordinator(group, second)
    progress(f"the coordinator moved to node {second}")
    cluster.control.move_coordinator(group, third)
    progress(f"the coordinator moved to node {third}")
    for name in ("vb-java", "vb-confluent"):  # each member looked for its coordinator again
        assert cluster.control.requests(client_id=name, group_id=group), name

    down = next(n for n in nodes if n != third)  # a leader's node, not the coordinator's
    assert cluster.control.broker_down(down)["connections_closed"] > 0  # the members were on it
    time.sleep(1.0)  # a node that is down for a moment: clients must notice, not just retry
    cluster.control.broker_up(down)
    progress(f"node {down} went down and came back")

    sent = feeder.stop()
    assert not feeder.failed, feeder.failed[:5]
    # everything produced is consumed, and committed where it ends
    expected = {p: sent // PARTITIONS + (1 if p < sent % PARTITIONS else 0) for p in range(PARTITIONS)}
    deadline = time.monotonic() + 180
    while committed(cluster.bootstrap, group, topic) != expected:
        assert time.monotonic() < deadline, (committed(cluster.bootstrap, group, topic), expected)
        time.sleep(0.5)
    consumed = {key for m in group_members for (_p, _o, key) in m.consumed()}
    assert consumed == {str(i) for i in range(sent)}  # every record reached one member
