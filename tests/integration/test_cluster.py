"""Three kcoord processes joined through a real ZooKeeper (Debian's package): registration,
the controller's election and failover, replica assignment and leader election, what every
node's Metadata says, controlled shutdown, topic creation and deletion across the cluster.
ZooKeeper's own view is read with kazoo (what zookeeper-shell shows). Sessions time out after
6 s here; the deadlines are generous (the machine is shared)."""
from __future__ import annotations

import time

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import call, unique
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from kcoord.protocol.partitioner import partition_for
from kcoord.testing.cluster import wait_for

pytestmark = pytest.mark.integration

SESSION_S = 6.0
FAILOVER_S = SESSION_S + 30  # a session timeout, then the controller's work, on a busy machine


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create(bootstrap: str, topic: str, partitions: int = 6, rf: int = 3, **kw) -> None:
    a = admin(bootstrap)  # referenced until the result: a destroyed handle fails its futures
    new = NewTopic(topic, partitions, rf, **kw)  # with an assignment: its partition count, rf -1
    fs = a.create_topics([new], request_timeout=30)
    fs[topic].result(30)


def node_metadata(bootstrap: str, topic: str):
    """(controller, brokers, {partition: (leader, replicas, isr)}) as one node answers."""
    md = admin(bootstrap).list_topics(topic, timeout=20)
    t = md.topics[topic]
    assert t.error is None, t.error
    parts = {p.id: (p.leader, tuple(p.replicas), tuple(p.isrs)) for p in t.partitions.values()}
    return md.controller_id, sorted(md.brokers), parts


def zk_view(cluster, topic: str) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    out = {}
    for p, replicas in cluster.assignment(topic).items():
        st = cluster.state(topic, p)
        out[p] = (st["leader"], tuple(replicas), tuple(st["isr"])) if st else None
    return out


def all_online(cluster, topic: str, partitions: int):
    view = zk_view(cluster, topic)
    return view if len(view) == partitions and all(v and v[0] >= 0 for v in view.values()) else None


def raw_partition(bootstrap: str, topic: str, partition: int):
    """(error, leader, isr, offline replicas) of one partition in a Metadata v9 answer."""
    r = call(bootstrap, MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                                        include_topic_authorized_operations=False), 9)
    p = next(p for p in r.topics[0].partitions if p.partition_index == partition)
    return p.error_code, p.leader_id, list(p.isr_nodes), list(p.offline_replicas)


def seen_live_everywhere(cluster, broker_id: int) -> None:
    """Every running node's Metadata lists the broker (its cache has seen the registration):
    what a leader knows before it takes a follower back into the ISR."""
    for n in [n for n in cluster.nodes.values() if n.alive()]:
        wait_for(lambda n=n: broker_id in sorted(admin(n.bootstrap).list_topics(timeout=20).brokers), 30,
                 f"{n.bootstrap} to list broker {broker_id}")


def batch() -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    b.append(0, 1_700_000_000_000, b"k", b"v", [])
    return bytes(b.build())


def produce_to(bootstrap: str, topic: str, partition: int) -> int:
    T = ProduceRequest.TopicProduceData
    r = call(bootstrap, ProduceRequest(version=9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=batch())])]), 9)
    return r.responses[0].partition_responses[0].error_code


def test_three_nodes_elect_one_controller_and_every_node_answers_the_same_metadata(kcoord_cluster):
    c = kcoord_cluster
    controller = wait_for(lambda: c.controller() if c.controller() > 0 else None, 30, "a controller")
    assert controller in (1, 2, 3) and c.registered() == [1, 2, 3]
    assert int(c.zk().get("/controller_epoch")[0]) >= 1
    reg = c.read("/brokers/ids/2")
    assert reg["version"] == 5 and reg["endpoints"] == [f"PLAINTEXT://{c.node(2).bootstrap}"]
    assert c.read("/cluster/id")["id"]

    topic = unique("rf3")
    create(c.bootstrap, topic, 6, 3)
    view = wait_for(lambda: all_online(c, topic, 6), 30, "every partition to get a leader")
    assert all(set(replicas) == {1, 2, 3} for _, replicas, _ in view.values())
    assert {leader for leader, _, _ in view.values()} == {1, 2, 3}  # leaders spread over the nodes
    assert all(leader == replicas[0] and set(isr) == {1, 2, 3} for leader, replicas, isr in view.values())

    def agreed():
        answers = [node_metadata(n.bootstrap, topic) for n in c.nodes.values()]
        return answers if all(a == (controller, [1, 2, 3], view) for a in answers) else None

    wait_for(agreed, 30, "every node's Metadata to agree with ZooKeeper")
    a = admin(c.node(3).bootstrap)
    described = a.describe_cluster(request_timeout=20).result(20)
    assert described.controller.id == controller and sorted(n.id for n in described.nodes) == [1, 2, 3]

    # produce: the leader takes it, another node answers NOT_LEADER_OR_FOLLOWER (6)
    leader = view[0][0]
    follower = next(b for b in (1, 2, 3) if b != leader)
    assert produce_to(c.node(leader).bootstrap, topic, 0) == 0
    assert produce_to(c.node(follower).bootstrap, topic, 0) == 6
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    delivered = []
    for i in range(30):
        p.produce(topic, b"v%d" % i, partition=i % 6, on_delivery=lambda err, m: delivered.append(err))
    assert p.flush(30) == 0 and delivered == [None] * 30


def test_create_topics_checks_the_replication_factor_against_live_brokers_and_keeps_given_assignments(
        kcoord_cluster):
    c = kcoord_cluster
    a = admin(c.bootstrap)
    fs = a.create_topics([NewTopic(unique("rf4"), 1, 4)], request_timeout=30)
    err = next(iter(fs.values())).exception(30)
    assert err is not None and err.args[0].name() == "INVALID_REPLICATION_FACTOR"
    topic = unique("manual")
    create(c.bootstrap, topic, replica_assignment=[[3, 1], [2, 3], [1, 2]], partitions=3, rf=-1)
    assert c.assignment(topic) == {0: [3, 1], 1: [2, 3], 2: [1, 2]}
    view = wait_for(lambda: all_online(c, topic, 3), 30, "leaders")
    assert [view[p][0] for p in range(3)] == [3, 2, 1]  # the first replica of each leads
    fs = a.create_topics([NewTopic(unique("bad"), 1, -1, replica_assignment=[[1, 9]])], request_timeout=30)
    err = next(iter(fs.values())).exception(30)
    assert err is not None and err.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"

    # deletion through /admin/delete_topics: gone from ZooKeeper and from every node's metadata
    a.delete_topics([topic], request_timeout=30)[topic].result(30)
    wait_for(lambda: c.assignment(topic) is None and not c.zk().exists(f"/admin/delete_topics/{topic}"), 30,
             "the controller to delete the topic")
    for n in c.nodes.values():
        wait_for(lambda n=n: topic not in admin(n.bootstrap).list_topics(timeout=20).topics, 30,
                 f"node {n.bootstrap} to forget {topic}")


def test_killing_the_controllers_node_elects_another_within_the_session_timeout(kcoord_cluster):
    c = kcoord_cluster
    old = wait_for(lambda: c.controller() if c.controller() > 0 else None, 30, "a controller")
    epoch = int(c.zk().get("/controller_epoch")[0])
    c.kill(old)
    started = time.monotonic()
    new = wait_for(lambda: c.controller() if c.controller() not in (-1, old) else None, FAILOVER_S,
                   "another controller")
    took = time.monotonic() - started
    assert new != old and int(c.zk().get("/controller_epoch")[0]) > epoch
    assert took < FAILOVER_S
    survivors = [b for b in (1, 2, 3) if b != old]
    for b in survivors:
        wait_for(lambda b=b: admin(c.node(b).bootstrap).list_topics(timeout=20).controller_id == new, 30,
                 f"node {b} to name controller {new}")
        assert sorted(admin(c.node(b).bootstrap).list_topics(timeout=20).brokers) == survivors


def test_sigkill_of_a_leaders_node_moves_leadership_to_an_isr_member(kcoord_cluster):
    c = kcoord_cluster
    topic = unique("failover")
    create(c.bootstrap, topic, 3, 3)
    before = wait_for(lambda: all_online(c, topic, 3), 30, "leaders")
    victim = before[0][0]
    epoch = c.state(topic, 0)["leader_epoch"]
    c.kill(victim)

    def moved():
        st = c.state(topic, 0)
        return st if st["leader"] not in (victim, -1) and victim not in st["isr"] else None

    st = wait_for(moved, FAILOVER_S, "partition 0 to get a new leader")
    assert st["leader"] in before[0][2] and st["leader_epoch"] > epoch
    survivor = next(b for b in (1, 2, 3) if b != victim)

    def agrees():
        return raw_partition(c.node(survivor).bootstrap, topic, 0) == (0, st["leader"], st["isr"], [victim])

    wait_for(agrees, 30, "Metadata to agree with the state znode")
    assert produce_to(c.node(st["leader"]).bootstrap, topic, 0) == 0
    c.start(victim)  # back, out of the ISR (nothing replicates it yet), no longer offline
    wait_for(lambda: raw_partition(c.node(survivor).bootstrap, topic, 0)[3] == [], 30, "the node to be back online")


def test_a_partition_whose_only_replica_died_comes_back_with_it(kcoord_cluster):
    c = kcoord_cluster
    topic = unique("rf1")
    create(c.bootstrap, topic, replica_assignment=[[2]], partitions=1, rf=-1)
    wait_for(lambda: all_online(c, topic, 1), 30, "a leader")
    c.kill(2)
    st = wait_for(lambda: c.state(topic, 0) if c.state(topic, 0)["leader"] == -1 else None, FAILOVER_S,
                  "the partition to go offline")
    assert st["isr"] == [2]  # the last ISR member stays: no unclean election
    assert raw_partition(c.node(1).bootstrap, topic, 0) == (5, -1, [2], [2])  # LEADER_NOT_AVAILABLE
    c.start(2)
    wait_for(lambda: c.state(topic, 0)["leader"] == 2, 30, "node 2 to lead again")


def test_controlled_shutdown_moves_leadership_before_the_node_stops(kcoord_cluster):
    c = kcoord_cluster
    topic = unique("controlled")
    create(c.bootstrap, topic, 6, 3)
    before = wait_for(lambda: all_online(c, topic, 6), 30, "leaders")
    leaving = before[0][0]
    assert c.stop(leaving) == 0
    # at once, not a session timeout later: nothing is led by the node that left, nor waits on it
    after = {p: c.state(topic, p) for p in range(6)}
    assert all(st["leader"] not in (leaving, -1) and leaving not in st["isr"] for st in after.values()), after
    assert leaving not in c.registered()
    assert f"Controlled shutdown of broker {leaving} succeeded" in c.node(leaving).log_text()


def test_internal_topics_are_created_at_the_first_find_coordinator_that_needs_them(kcoord_cluster):
    """As on ZooKeeper-mode Kafka: a fresh cluster has no __consumer_offsets in ZooKeeper until
    the first FindCoordinator of a group, which answers COORDINATOR_NOT_AVAILABLE while the
    node writes the topic (offsets.topic.num.partitions, offsets.topic.replication.factor) and
    the controller elects its leaders, then names the coordinator; likewise __transaction_state
    at the first FindCoordinator of a transactional id (transaction.state.log.*)."""
    c = kcoord_cluster
    assert c.controller() in c.nodes
    topics = c.zk().get_children("/brokers/topics")
    assert "__consumer_offsets" not in topics and "__transaction_state" not in topics, topics
    group = unique("g")
    asked = c.node(min(c.nodes)).bootstrap
    first = call(asked, FindCoordinatorRequest(version=3, key=group, key_type=0), 3)
    assert (first.error_code, first.node_id) == (15, -1)  # COORDINATOR_NOT_AVAILABLE
    offsets = wait_for(lambda: c.assignment("__consumer_offsets"), 30, "__consumer_offsets in /brokers/topics")
    assert len(offsets) == 50 and all(len(r) == 3 for r in offsets.values())
    assert c.read("/config/topics/__consumer_offsets")["config"]["cleanup.policy"] == "compact"
    named = wait_for(lambda: (r := call(asked, FindCoordinatorRequest(version=3, key=group, key_type=0), 3))
                     .error_code == 0 and r.node_id, 60, "a coordinator for the group")
    assert named == c.state("__consumer_offsets", partition_for(group, 50))["leader"]
    assert "__transaction_state" not in c.zk().get_children("/brokers/topics")  # a group's lookup made one topic
    tid = unique("tx")
    first = call(asked, FindCoordinatorRequest(version=3, key=tid, key_type=1), 3)
    assert (first.error_code, first.node_id) == (15, -1)
    txn = wait_for(lambda: c.assignment("__transaction_state"), 30, "__transaction_state in /brokers/topics")
    assert len(txn) == 50 and all(len(r) == 3 for r in txn.values())
    assert c.read("/config/topics/__transaction_state")["config"]["min.insync.replicas"] == "2"
    wait_for(lambda: call(asked, FindCoordinatorRequest(version=3, key=tid, key_type=1), 3).error_code == 0, 60,
             "a coordinator for the transactional id")


def test_consumer_groups_find_the_leader_of_their_offsets_partition(kcoord_cluster):
    c = kcoord_cluster
    c.coordinator_topics()  # created at the first FindCoordinator
    offsets = wait_for(lambda: c.assignment("__consumer_offsets"), 30, "__consumer_offsets")
    assert len(offsets) == 50 and all(len(r) == 3 for r in offsets.values())
    wait_for(lambda: all_online(c, "__consumer_offsets", 50), 60, "__consumer_offsets leaders")
    group = unique("g")
    answers = set()
    for n in c.nodes.values():
        r = call(n.bootstrap, FindCoordinatorRequest(version=3, key=group, key_type=0), 3)
        assert r.error_code == 0
        answers.add((r.node_id, r.host, r.port))
    assert len(answers) == 1  # every node names the same coordinator
    topic = unique("grp")
    create(c.bootstrap, topic, 3, 3)
    wait_for(lambda: all_online(c, topic, 3), 30, "leaders")
    p = Producer({"bootstrap.servers": c.bootstrap})
    for i in range(9):
        p.produce(topic, b"%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 60
    while len(seen) < 9 and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            seen.append(m.value())
    assert sorted(seen) == sorted(b"%d" % i for i in range(9))
    consumer.commit(asynchronous=False)
    assert sum(tp.offset for tp in consumer.committed(consumer.assignment(), timeout=20)) == 9
    consumer.close()


@pytest.mark.java
def test_java_admin_client_sees_the_clusters_replicas_isr_and_controller(kcoord_cluster):
    from test_admin_configs import admin_tool

    c = kcoord_cluster
    topic = unique("jrf3")
    create(c.bootstrap, topic, 3, 3)
    view = wait_for(lambda: all_online(c, topic, 3), 30, "leaders")
    controller = c.controller()
    out = admin_tool(c.node(2).bootstrap, ["describe-topics", topic], ["describe-cluster"])
    described, cluster = out[0], out[1]
    assert described["partitions"] == [[p, view[p][0], list(view[p][1]), list(view[p][2])] for p in range(3)], out
    assert sorted(cluster["nodes"]) == sorted(f"{i}@{c.node(i).bootstrap}" for i in (1, 2, 3))
    assert cluster["controller"] == controller, cluster


def test_leadership_moves_back_to_the_preferred_replica_once_it_is_in_sync(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, overrides={"leader.imbalance.check.interval.seconds": "1"})
    topic = unique("preferred")
    create(c.bootstrap, topic, 3, 3)
    before = wait_for(lambda: all_online(c, topic, 3), 30, "leaders")
    p = 0
    preferred = before[p][1][0]
    c.kill(preferred)
    failover = wait_for(lambda: (s := c.state(topic, p))["leader"] not in (preferred, -1)
                        and preferred not in s["isr"] and s, FAILOVER_S, "a new leader")
    c.start(preferred)
    seen_live_everywhere(c, preferred)
    # the leader takes the caught-up replica back into the ISR (replication, through a
    # version-checked write of the state znode); the controller's imbalance check then
    # elects it again, in a new epoch
    back = wait_for(lambda: (s := c.state(topic, p))["leader"] == preferred and s, 90,
                    "the preferred replica to lead again")
    assert back["leader_epoch"] > failover["leader_epoch"] and preferred in back["isr"]
    wait_for(lambda: raw_partition(c.node(preferred).bootstrap, topic, p)[1] == preferred, 30,
             "Metadata to name the preferred leader")


def test_a_node_that_cannot_reach_zookeeper_does_not_start(tmp_path):
    from kcoord.testing.process import KcoordProcess, free_port

    srv = KcoordProcess(tmp_path / "data", overrides={"zookeeper.connect": f"127.0.0.1:{free_port()}",
                                                      "zookeeper.connection.timeout.ms": "2000"})
    try:
        srv.start()
    except RuntimeError:
        pass  # it may exit before its listener is seen
    assert srv.proc.wait(60) == 1
    assert "Timed out waiting for connection to ZooKeeper" in srv.log_text()


def test_racks_are_registered_answered_and_each_partition_spans_them(kcoord_cluster_factory):
    c = kcoord_cluster_factory(3, racks={1: "ra", 2: "ra", 3: "rb"})
    assert c.read("/brokers/ids/3")["rack"] == "rb"
    topic = unique("racks")
    create(c.bootstrap, topic, 6, 2)
    racks = {1: "ra", 2: "ra", 3: "rb"}
    assert all({racks[b] for b in replicas} == {"ra", "rb"} for replicas in c.assignment(topic).values())
    r = call(c.node(1).bootstrap, MetadataRequest(version=9, topics=[], allow_auto_topic_creation=False,
                                                  include_cluster_authorized_operations=False,
                                                  include_topic_authorized_operations=False), 9)
    assert sorted((b.node_id, b.rack) for b in r.brokers) == [(1, "ra"), (2, "ra"), (3, "rb")]


def test_kcoord_cluster_starts_nodes_prints_their_ports_and_stops_them_all_on_ctrl_c(tmp_path):
    import re
    import signal
    import subprocess

    from kcoord.testing.process import kcoord_command

    proc = subprocess.Popen([*kcoord_command(), "cluster", "-n", "2", "--dir", str(tmp_path),
                             "--session-timeout-ms", "6000"], stdout=subprocess.PIPE, text=True)
    try:
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("bootstrap"):
                break
        nodes = dict(re.findall(r"^node (\d+)\s+(\S+)", "".join(lines), re.M))
        assert sorted(nodes) == ["1", "2"] and (tmp_path / "node-1" / "data").is_dir()
        bootstrap = lines[-1].split()[1]
        a = admin(bootstrap)
        wait_for(lambda: sorted(a.list_topics(timeout=30).brokers) == [1, 2], 30, "both nodes in Metadata")
        assert a.list_topics(timeout=30).controller_id in (1, 2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 0
        for address in nodes.values():
            host, port = address.rsplit(":", 1)
            with pytest.raises(OSError):
                import socket

                socket.create_connection((host, int(port)), timeout=2).close()
    finally:
        if proc.poll() is None:  # a failed assertion: stop it the way a person would, so its nodes stop too
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_create_partitions_extends_the_assignment_and_the_new_partitions_get_leaders(kcoord_cluster):
    from confluent_kafka.admin import NewPartitions

    c = kcoord_cluster
    topic = unique("grow")
    create(c.bootstrap, topic, 2, 2)
    wait_for(lambda: all_online(c, topic, 2), 30, "leaders")
    a = admin(c.bootstrap)
    a.create_partitions([NewPartitions(topic, 5)], request_timeout=30)[topic].result(30)
    grown = c.assignment(topic)
    assert sorted(grown) == [0, 1, 2, 3, 4] and all(len(set(r)) == 2 for r in grown.values())
    wait_for(lambda: all_online(c, topic, 5), 30, "leaders of the new partitions")
    wait_for(lambda: len(admin(c.node(3).bootstrap).list_topics(topic, timeout=20).topics[topic].partitions) == 5,
             30, "Metadata to show 5 partitions")
    leader = c.state(topic, 4)["leader"]
    assert produce_to(c.node(leader).bootstrap, topic, 4) == 0
    fs = a.create_partitions([NewPartitions(topic, 6, replica_assignment=[[1, 9]])], request_timeout=30)
    err = fs[topic].exception(30)
    assert err is not None and err.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"
    a.create_partitions([NewPartitions(topic, 6, replica_assignment=[[3, 1]])], request_timeout=30)[topic].result(30)
    assert c.assignment(topic)[5] == [3, 1]


def test_elect_leaders_preferred_and_unclean_through_the_controller(kcoord_cluster_factory):
    from confluent_kafka import ElectionType, TopicPartition

    c = kcoord_cluster_factory(3, overrides={"auto.leader.rebalance.enable": "false"})
    topic = unique("elect")
    create(c.bootstrap, topic, replica_assignment=[[1, 2, 3], [2, 3, 1]], partitions=2, rf=-1)
    wait_for(lambda: all_online(c, topic, 2), 30, "leaders")

    def elect(kind, partition: int) -> list:
        """The election's result, asked of the controller's node (another answers NOT_CONTROLLER,
        as a ZooKeeper-mode Kafka broker does; a client whose metadata names the old controller
        asks again once it learns the new one)."""
        def once():
            a = admin(c.node(c.controller()).bootstrap)
            got = list(a.elect_leaders(kind, [TopicPartition(topic, partition)]).result(30).values())
            return None if got and got[0] is not None and got[0].name() == "NOT_CONTROLLER" else got
        return wait_for(once, 60, "an answer from the controller")

    result = elect(ElectionType.PREFERRED, 0)
    assert [e.name() for e in result] == ["ELECTION_NOT_NEEDED"]
    # partition 0: its preferred replica (1) goes (not available), comes back, catches up
    # (replication puts it back in the ISR), then the election gives it the partition
    c.kill(1)
    wait_for(lambda: c.state(topic, 0)["leader"] == 2 and 1 not in c.state(topic, 0)["isr"], FAILOVER_S, "leader 2")
    result = elect(ElectionType.PREFERRED, 0)
    assert [e.name() for e in result] == ["PREFERRED_LEADER_NOT_AVAILABLE"]
    c.start(1)
    seen_live_everywhere(c, 1)
    wait_for(lambda: 1 in c.state(topic, 0)["isr"], 60, "broker 1 back in the ISR")
    wait_for(lambda: 1 in raw_partition(c.node(c.controller()).bootstrap, topic, 0)[2], 30, "the ISR change seen")
    assert elect(ElectionType.PREFERRED, 0) == [None] and c.state(topic, 0)["leader"] == 1
    # partition 1 ([2, 3, 1]): 1 and 2 go (3 leads alone), then 3 goes: offline with ISR [3];
    # 2 comes back outside the ISR: only an unclean election gives it the partition
    c.kill(1)
    c.kill(2)
    wait_for(lambda: c.state(topic, 1)["isr"] == [3], FAILOVER_S, "ISR [3]")
    c.kill(3)
    c.start(2)  # the only node: the controller; no clean election, 2 is not in the ISR
    wait_for(lambda: c.state(topic, 1)["leader"] == -1, FAILOVER_S, "partition 1 offline")
    assert elect(ElectionType.UNCLEAN, 1) == [None]
    st = c.state(topic, 1)
    assert (st["leader"], st["isr"]) == (2, [2])


def test_a_node_paused_past_its_session_rejoins_under_a_new_session_without_its_old_leadership(kcoord_cluster):
    import signal

    c = kcoord_cluster
    topic = unique("paused")
    create(c.bootstrap, topic, 3, 3)
    before = wait_for(lambda: all_online(c, topic, 3), 30, "leaders")
    paused = before[0][0]
    proc = c.node(paused).proc
    proc.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: paused not in c.registered(), FAILOVER_S, "its session to expire")
        st = wait_for(lambda: c.state(topic, 0) if c.state(topic, 0)["leader"] not in (paused, -1) else None,
                      FAILOVER_S, "a new leader")
    finally:
        proc.send_signal(signal.SIGCONT)
    wait_for(lambda: paused in c.registered(), 60, "the node to register again")
    assert "New ZooKeeper session: registering again" in c.node(paused).log_text()
    wait_for(lambda: raw_partition(c.node(paused).bootstrap, topic, 0)[1] == st["leader"], 30,
             "the node to answer the new leader")
    assert produce_to(c.node(paused).bootstrap, topic, 0) == 6  # NOT_LEADER_OR_FOLLOWER
    assert produce_to(c.node(st["leader"]).bootstrap, topic, 0) == 0
