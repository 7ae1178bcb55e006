"""Jepsen-style: three kcoord nodes and a real ZooKeeper under client workloads while a nemesis
kills and restarts nodes; afterwards a checker (kcoord/testing/jepsen/) reads the recorded
history and the cluster's final state.

Workloads, all at once, for KCOORD_JEPSEN_SECONDS (300 unless set; longer on demand):
- an idempotent acks=all confluent-kafka producer writing numbered records ("P:SEQ") to a
  6-partition topic with replication factor 3 and min.insync.replicas=2;
- two committing consumer groups reading it: the classic protocol (Java kafka-clients 3.9 and
  librdkafka, roundrobin) and the consumer protocol (KIP-848: Java kafka-clients 4.3 and
  librdkafka), each member committing synchronously after every batch (tests/clientlib.py);
- a transactional consume-transform-produce loop (TxnCopier.java, read_committed) copying the
  topic (on unless KCOORD_JEPSEN_TRANSACTIONS=0).

The nemesis (seeded, the seed printed; KCOORD_JEPSEN_SEED repeats a run) picks at random: SIGKILL
the leader of a workload partition, the node coordinating one of the groups, the controller (or,
with transactions, the transactional id's coordinator); or a graceful SIGTERM (controlled
shutdown); or, where network namespaces can be made (root, `ip`, `nft`) and unless
KCOORD_JEPSEN_NETNS=0, cut the leader of a workload partition off from ZooKeeper and the other
nodes (clients still reach it) and heal it once its registration is gone. Each victim is
started again once its ZooKeeper session is gone, and the next fault waits until the ISRs are
full again. An observer records who leads each partition in which
epoch (the state znodes, and every node's Metadata) and which node answers for each group in
which epoch of its __consumer_offsets partition.

Checked (kcoord/testing/jepsen/checker.py): every acknowledged record is present exactly once,
in send order, per partition; every acknowledged commit is the group's committed offset or
superseded by a later one; one leader per partition and one coordinator per group per epoch;
full ISRs at the end; with transactions, the read_committed copy holds each input record below
the copier's committed offsets exactly once. The counts are printed (run with -s to see them on
a pass) and written beside the history (history.jsonl) in the test's directory.
"""
from __future__ import annotations

import os
import random
import threading
import time

import pytest
from clientlib import Background, java4_member, java_classpath, java_member, python_member
from conftest import call
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import MetadataRequest

from kcoord.protocol.partitioner import partition_for
from kcoord.testing.cluster import wait_for
from kcoord.testing.jepsen import Final, History, check
from kcoord.testing.netns import available

pytestmark = pytest.mark.integration

SECONDS = float(os.environ.get("KCOORD_JEPSEN_SECONDS", "300"))
SEED = int(os.environ.get("KCOORD_JEPSEN_SEED", str(random.SystemRandom().randrange(2**32))))
# The one switch for the transactional workload, on unless KCOORD_JEPSEN_TRANSACTIONS=0: the
# copier runs, the nemesis also kills its coordinator, and the read_committed copy is checked.
TRANSACTIONS = os.environ.get("KCOORD_JEPSEN_TRANSACTIONS", "1") != "0"

# Where namespaces can be made (root, ip, nft: CI's machines), each node runs in a network
# namespace of its own, so the nemesis can also cut a node off from ZooKeeper and the other
# nodes (kcoord/testing/netns.py); KCOORD_JEPSEN_NETNS=0 leaves that fault out.
NETNS = os.environ.get("KCOORD_JEPSEN_NETNS", "1") != "0" and available() is None

TOPIC, OUT = "jepsen", "jepsen-out"
PARTITIONS = 6
OFFSETS, OFFSETS_PARTITIONS = "__consumer_offsets", 50
GROUPS = {"classic": "jepsen-classic", "consumer": "jepsen-consumer"}
TXN_GROUP, TXN_ID = "jepsen-txn", "jepsen-copier"
SERVER = {
    "group.consumer.min.session.timeout.ms": "6000",
    "group.consumer.session.timeout.ms": "10000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "1000",
}
RATE = 200  # records/s the producer sends
RECOVER_S = 180.0
STOP_S = 90.0  # a controlled shutdown waits at most a session timeout (6 s), then drains  # a session timeout, elections, a restarted node catching up, on a busy machine
MEMBER_DEADLINE = SECONDS + 900


def metadata(bootstrap: str, topics: list[str]):
    req = MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                          allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                          include_topic_authorized_operations=False)
    return call(bootstrap, req, 9)


class Run:
    """The shared state of one run: the cluster, the history, and the threads' failures."""

    def __init__(self, cluster, tmp_path) -> None:
        self.c = cluster
        self.dir = tmp_path
        self.history = History()
        self.rng = random.Random(SEED)
        self.stop = threading.Event()      # the nemesis is done: producer and observer end
        self.closing = threading.Event()   # the members are being closed: none is started again
        self.errors: list[str] = []
        self.members: dict[str, tuple[str, Background, dict]] = {}   # name -> (group, process, make args)
        self.member_restarts = 0

    def thread(self, name: str, target) -> threading.Thread:
        def body() -> None:
            try:
                target()
            except BaseException as e:  # noqa: BLE001 - reported by the test
                self.errors.append(f"{name}: {e!r}")
                self.stop.set()
        t = threading.Thread(target=body, name=name, daemon=True)
        t.start()
        return t

    # ---- what the cluster says

    def group_partition(self, group: str) -> int:
        return partition_for(group, OFFSETS_PARTITIONS)

    def watched(self) -> list[tuple[str, int]]:
        tps = [(TOPIC, p) for p in range(PARTITIONS)]
        tps += [(OFFSETS, self.group_partition(g)) for g in [*GROUPS.values(), *([TXN_GROUP] if TRANSACTIONS else [])]]
        return tps + ([(OUT, p) for p in range(PARTITIONS)] if TRANSACTIONS else [])

    def isr_full(self, tps: list[tuple[str, int]]) -> bool:
        for topic, p in tps:
            st = self.c.state(topic, p)
            replicas = self.c.assignment(topic)[p]
            if st is None or st["leader"] < 0 or set(st["isr"]) != set(replicas):
                return False
        return True

    # ---- the producer

    def produce(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.c.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 120000, "socket.timeout.ms": 10000,
                             "reconnect.backoff.max.ms": 1000, "log_level": 0})
        h = self.history
        seq = [0] * PARTITIONS

        def delivered(op_id: int):
            # an error here is not proof that nothing was written (a timed-out batch may be): info
            return lambda err, msg: h.complete(op_id, "info" if err is not None else "ok")

        sent, started = 0, time.monotonic()
        while not self.stop.is_set():
            # a steady RATE records/s whatever the cluster is doing (the history stays checkable)
            while (left := started + sent / RATE - time.monotonic()) > 0:
                producer.poll(left)  # returns early when it served a delivery
            for p in range(PARTITIONS):
                value = f"{p}:{seq[p]}"
                seq[p] += 1
                op_id = h.invoke("producer", "send", value)
                while True:
                    try:
                        producer.produce(TOPIC, key=str(p).encode(), value=value.encode(), partition=p,
                                         on_delivery=delivered(op_id))
                        break
                    except BufferError:
                        producer.poll(0.5)
            sent += PARTITIONS
        left = producer.flush(RECOVER_S)
        assert left == 0, f"{left} records still undelivered {RECOVER_S}s after the end"

    # ---- the consumer group members and the copier (processes printing JSON lines)

    def start_member(self, name: str, group: str, make, **kw) -> None:
        self.members[name] = (group, make(name=name, deadline=MEMBER_DEADLINE, **kw), {"make": make, **kw})

    def start_members(self) -> None:
        b = self.c.bootstrap
        self.start_member("java-classic", GROUPS["classic"],
                          lambda **kw: java_member(b, TOPIC, GROUPS["classic"], session_timeout_ms=10000, **kw))
        self.start_member("rdkafka-classic", GROUPS["classic"],
                          lambda **kw: python_member("confluent", b, TOPIC, GROUPS["classic"], **kw))
        self.start_member("java-consumer", GROUPS["consumer"],
                          lambda **kw: java4_member(b, TOPIC, GROUPS["consumer"], **kw))
        self.start_member("rdkafka-consumer", GROUPS["consumer"],
                          lambda **kw: python_member("confluent", b, TOPIC, GROUPS["consumer"],
                                                     group_protocol="consumer", **kw))
        if TRANSACTIONS:
            self.start_member("copier", TXN_GROUP, lambda name, deadline: Background(
                ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                 "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.err",
                 "-cp", java_classpath(), "TxnCopier", b, TOPIC, OUT, TXN_GROUP, TXN_ID], name, deadline=deadline))

    def follow_members(self) -> None:
        """Turn what the members print into history operations, stamped when read (a commit's
        invocation: the member's previous line, printed before it began committing). A member
        that exits while the run goes on is started again (its open operations end as info)."""
        seen = {name: 0 for name in self.members}
        last = {name: self.history.now() for name in self.members}
        while True:
            ending = self.closing.is_set()
            for name, (group, proc, spec) in list(self.members.items()):
                events = proc.events()
                for e in events[seen[name]:]:
                    now = self.history.now()
                    kind = e.get("kind")
                    if kind in ("committed", "commit_error"):
                        offsets = {int(str(k).rsplit("-", 1)[-1]): int(v) for k, v in e["offsets"].items()}
                        self.history.record(name, "commit", {"group": group, "offsets": offsets},
                                            "ok" if kind == "committed" else "info", invoked_at=last[name], at=now)
                    elif kind == "txn":
                        self.history.record(name, "txn", e["records"], invoked_at=last[name], at=now)
                    elif kind == "recovering":
                        self.history.record(name, "txn", 0, "info", invoked_at=last[name], at=now)
                    last[name] = now
                seen[name] = len(events)
                if not proc.alive() and not ending and name in self.members:
                    self.errors_seen(name, proc)
                    make = spec["make"]
                    self.members[name] = (group, make(name=name, deadline=MEMBER_DEADLINE), spec)
                    seen[name], last[name] = 0, self.history.now()
                    self.member_restarts += 1
            if ending and all(not p.alive() for _, p, _ in self.members.values()):
                return
            time.sleep(0.05)

    def errors_seen(self, name: str, proc: Background) -> None:
        tail = [e for e in proc.events() if e.get("kind") == "error"][-1:]
        print(f"jepsen: member {name} exited ({proc.proc.returncode}) {tail}; started again")

    # ---- observations: who leads, who coordinates, in which epoch

    def observe(self) -> None:
        h = self.history
        groups = [*GROUPS.values(), *([TXN_GROUP] if TRANSACTIONS else [])]
        while not self.stop.is_set():
            for topic, p in self.watched():
                st = self.c.state(topic, p)
                if st is not None:
                    h.observe("leader", (topic, p, st["leader_epoch"], st["leader"]), "zk")
            for i, node in list(self.c.nodes.items()):
                if not node.alive():
                    continue
                try:
                    self.observe_node(i, node.bootstrap, groups)
                except Exception:  # noqa: BLE001 - a node going down mid-observation
                    continue
            self.stop.wait(0.5)

    def observe_node(self, node_id: int, bootstrap: str, groups: list[str]) -> None:
        h = self.history
        source = f"node-{node_id}"

        def epochs() -> dict[tuple[str, int], tuple[int, int]]:
            out = {}
            for t in metadata(bootstrap, [TOPIC, OFFSETS]).topics:
                for part in t.partitions:
                    out[(t.name, part.partition_index)] = (part.leader_epoch, part.leader_id)
            return out

        before = epochs()
        for (topic, p), (epoch, leader) in before.items():
            if topic == TOPIC or p in {self.group_partition(g) for g in groups}:
                h.observe("leader", (topic, p, epoch, leader), source)
        acting = [g for g in groups if call(bootstrap, OffsetFetchRequest(
            version=7, group_id=g, topics=None, require_stable=False), 7).error_code == 0]
        after = epochs()
        for g in acting:
            tp = (OFFSETS, self.group_partition(g))
            if tp in before and before[tp] == after.get(tp):  # answered for the group within one epoch
                h.observe("coordinator", (g, before[tp][0], node_id), source)

    # ---- the nemesis

    def victim(self, fault: str) -> int:
        def leader_of(topic: str, p: int) -> int:
            st = self.c.state(topic, p)
            return -1 if st is None else st["leader"]

        if fault == "kill-leader":
            node = leader_of(TOPIC, self.rng.randrange(PARTITIONS))
        elif fault == "kill-coordinator":
            node = leader_of(OFFSETS, self.group_partition(self.rng.choice(sorted(GROUPS.values()))))
        elif fault == "kill-controller":
            node = self.c.controller()
        elif fault == "cut-off":
            node = leader_of(TOPIC, self.rng.randrange(PARTITIONS))
        elif fault == "kill-txn-coordinator":
            node = self.txn_coordinator()
        else:
            node = -1
        return node if node in self.c.nodes else self.rng.choice(sorted(self.c.nodes))

    def txn_coordinator(self) -> int:
        from kafka.protocol.metadata import FindCoordinatorRequest

        r = call(self.c.bootstrap.split(",")[0], FindCoordinatorRequest(version=3, key=TXN_ID, key_type=1), 3)
        return r.node_id if r.error_code == 0 else -1

    def nemesis(self, deadline: float) -> None:
        faults = ["kill-leader", "kill-coordinator", "kill-controller", "restart-graceful"]
        faults += ["kill-txn-coordinator"] if TRANSACTIONS else []
        faults += ["cut-off"] if self.c.netns else []
        h = self.history
        while time.monotonic() < deadline and not self.stop.is_set():
            fault = self.rng.choice(faults)
            node = self.victim(fault)
            if fault == "cut-off":
                self.cut_off(node)
                continue
            graceful = fault == "restart-graceful"
            print(f"jepsen: {h.now():7.1f}s {fault} node {node}", flush=True)
            op = h.invoke("nemesis", "stop" if graceful else "kill", {"fault": fault, "node": node})
            if graceful:
                code = self.c.stop(node, timeout=STOP_S)  # SIGKILL after it: the checker's stop-hung
                h.complete(op, "ok", {"fault": fault, "node": node, "exit": code})
            else:
                self.c.kill(node)
                h.complete(op, "ok")
            # its registration gone (at once for SIGTERM, at the session's expiry for SIGKILL): the
            # controller has moved what it led
            wait_for(lambda n=node: n not in self.c.registered(), RECOVER_S, f"node {node}'s registration to go")
            self.stop.wait(self.rng.uniform(0, 5))
            op = h.invoke("nemesis", "start", node)
            self.c.start(node, timeout=RECOVER_S)
            h.complete(op, "ok")
            wait_for(lambda: self.isr_full(self.watched()), RECOVER_S, "full ISRs after restarting a node")
            self.stop.wait(self.rng.uniform(1, 5))

    def cut_off(self, node: int) -> None:
        """Cut the node off from ZooKeeper and the other nodes (clients still reach it) until its
        session has expired and the controller has moved what it led; heal it, and wait until it
        is registered again and the ISRs are full."""
        h = self.history
        print(f"jepsen: {h.now():7.1f}s cut-off node {node}", flush=True)
        op = h.invoke("nemesis", "cut-off", node)
        self.c.cut_off(node)
        h.complete(op, "ok")
        wait_for(lambda: node not in self.c.registered(), RECOVER_S, f"cut-off node {node}'s registration to go")
        self.stop.wait(self.rng.uniform(0, 5))
        op = h.invoke("nemesis", "heal", node)
        self.c.heal(node)
        wait_for(lambda: node in self.c.registered(), RECOVER_S, f"healed node {node} to register again")
        h.complete(op, "ok")
        wait_for(lambda: self.isr_full(self.watched()), RECOVER_S, "full ISRs after healing a node")
        self.stop.wait(self.rng.uniform(1, 5))

    # ---- the final state

    def read_all(self, topic: str, isolation: str = "read_uncommitted") -> dict[int, list[str]]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.c.bootstrap, "group.id": f"jepsen-reader-{topic}",
                      "enable.auto.commit": False, "isolation.level": isolation})
        out: dict[int, list[str]] = {}
        try:
            for p in range(PARTITIONS):
                _, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                c.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
                values: list[str] = []
                offsets: list[int] = []
                deadline = time.monotonic() + RECOVER_S
                while (not offsets or offsets[-1] < high - 1) and high > 0:
                    assert time.monotonic() < deadline, f"reading {topic}-{p} to {high}: at {offsets[-1:]}"
                    for m in c.consume(1000, 1.0):
                        if m.error() is None:
                            values.append(m.value().decode())
                            offsets.append(m.offset())
                    if isolation == "read_committed" and c.position([TopicPartition(topic, p)])[0].offset >= high:
                        break
                if isolation == "read_uncommitted":
                    assert offsets == list(range(len(offsets))), f"{topic}-{p}: offsets not 0.. contiguous"
                out[p] = values
        finally:
            c.close()
        return out

    def committed(self, group: str, topic: str) -> dict[int, int]:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.c.bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=60)
            return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
        finally:
            c.close()


@pytest.mark.timeout(int(SECONDS) + 1500)
def test_jepsen(kcoord_cluster_factory, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    print(f"\njepsen: seed {SEED} (KCOORD_JEPSEN_SEED={SEED} repeats the nemesis), {SECONDS:.0f} s, "
          f"transactions {'on' if TRANSACTIONS else 'off'}, cut-off {'on' if NETNS else 'off'}")
    cluster = kcoord_cluster_factory(3, overrides=SERVER, netns=NETNS)
    run = Run(cluster, tmp_path)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = [NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"}) for t in [TOPIC, *([OUT] if TRANSACTIONS else [])]]
    for f in admin.create_topics(new, request_timeout=60).values():
        f.result(60)
    wait_for(lambda: run.isr_full([(TOPIC, p) for p in range(PARTITIONS)]), RECOVER_S, "the topic's leaders")
    cluster.coordinator_topics(transactions=TRANSACTIONS)  # created at the first FindCoordinator
    wait_for(lambda: len(cluster.assignment(OFFSETS) or {}) == OFFSETS_PARTITIONS and run.isr_full(
        [(OFFSETS, p) for p in range(OFFSETS_PARTITIONS)]), RECOVER_S, "__consumer_offsets online")

    try:
        run.start_members()
        threads = [run.thread("producer", run.produce), run.thread("observer", run.observe)]
        follower = run.thread("members", run.follow_members)
        for name, (_, proc, _) in run.members.items():  # every workload under way before the first fault
            proc.wait_for(lambda m: m.events("committed") or m.events("txn"), RECOVER_S, f"{name}'s first commit")
        nemesis = run.thread("nemesis", lambda: run.nemesis(time.monotonic() + SECONDS))
        nemesis.join()
        run.stop.set()  # the producer flushes, the observer ends
        for t in threads:
            t.join(RECOVER_S + 60)
        for i, node in cluster.nodes.items():  # the nemesis left none down, unless it failed
            if not node.alive():
                cluster.start(i, timeout=RECOVER_S)
        assert not run.errors, run.errors

        # the groups catch up to the end of the topic, then close (committing what they hold)
        ends = {p: len(v) for p, v in run.read_all(TOPIC).items()}
        stalled = []
        for group in [*GROUPS.values(), *([TXN_GROUP] if TRANSACTIONS else [])]:
            try:
                wait_for(lambda g=group: run.committed(g, TOPIC) == ends, RECOVER_S * 2,
                         f"{group} to commit the end offsets {ends}")
            except AssertionError as e:
                stalled.append(str(e))
        run.closing.set()
        for _, proc, _ in list(run.members.values()):
            proc.close(60)
        follower.join(60)
        run.history.close_open()

        all_partitions = [(TOPIC, p) for p in range(PARTITIONS)] + [(OFFSETS, p) for p in range(OFFSETS_PARTITIONS)]
        try:
            wait_for(lambda: run.isr_full(all_partitions), RECOVER_S, "full ISRs at the end")
        except AssertionError:
            pass  # the checker names the partitions
        final = Final(reads=run.read_all(TOPIC),
                      committed={g: run.committed(g, TOPIC) for g in GROUPS.values()},
                      isr={(t, p): (cluster.assignment(t)[p], cluster.state(t, p)["isr"]) for t, p in all_partitions})
        if TRANSACTIONS:
            final.txn_committed = run.committed(TXN_GROUP, TOPIC)
            final.txn_output = [v for vs in run.read_all(OUT, "read_committed").values() for v in vs]
    finally:
        run.stop.set()
        run.closing.set()
        for _, proc, _ in list(run.members.values()):
            if proc.alive():
                proc.kill()
        run.history.dump(tmp_path / "history.jsonl")
    report = check(run.history, final)
    report.counts["member restarts"] = run.member_restarts
    (tmp_path / "report.txt").write_text(report.summary() + "\n")
    print(report.summary())
    print(f"jepsen: history in {tmp_path / 'history.jsonl'}")
    assert report.counts["faults"] >= 3, report.summary()
    assert report.valid and not stalled, report.summary() + "\n" + "\n".join(stalled)
