"""docker-compose.cluster.yml on a real Docker engine (tests/dockerlib.py): Debian's ZooKeeper
(docker/zookeeper) and three kcoord nodes, on the images tests/docker builds once per run.

- the file: each node its broker.id, its own volume and its own sidecar on that volume;
  ZooKeeper's image runs as its own user with a health check;
- the nodes register (read with the image's zookeeper-shell), answer Metadata with their
  EXTERNAL addresses to the host, replicate through INTERNAL, and a container on the compose
  network produces through the nodes' service names (the topic auto-created with the file's
  replication factor 3);
- failover: an acks=all idempotent producer and a committing consumer group run on the host on
  a topic with replication factor 3 while the container leading its partition is SIGKILLed
  (`docker kill`), then, once it is back, the next leader's is stopped (`docker stop`: a
  controlled shutdown). The clients go on with the new leader, every acknowledged record is
  in the log (once) and consumed by the group, whose committed offset reaches the end; each
  stopped node, started again, is back in the ISR in the partition's state znode (read from
  ZooKeeper through its published port) and in Metadata.
The times (compose up, leader change, the producer's longest wait for an acknowledgement,
rejoin) are printed.
"""
from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
import yaml
from conftest import free_port
from dockerlib import (
    LINK_LOCAL,
    ROOT,
    ZOOKEEPER_IMAGE,
    Compose,
    docker,
    engine_for_tests,
    subnets,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.timeout(600)]

NODES = (1, 2, 3)
FILE = ROOT / "docker-compose.cluster.yml"

# The test's settings on top of the file: fewer __consumer_offsets partitions and a shorter
# ZooKeeper session (a SIGKILLed node's registration goes after it), so that the test is quick.
TEST_OVERRIDE = """
x-test: &test
  KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS: "3"
  KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS: "6000"
  KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: "0"
services:
""" + "".join(f"  kcoord-{i}:\n    environment: *test\n" for i in NODES)


def say(capsys, text: str) -> None:
    with capsys.disabled():
        print(f"\n[docker cluster] {text}", flush=True)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = engine_for_tests(tmp_path_factory.mktemp("dockerd"))
    yield eng
    eng.stop()


@pytest.fixture(scope="module")
def images(engine, tmp_path_factory):
    from dockerlib import build_images

    return build_images(tmp_path_factory.mktemp("images"))


def node_services() -> list[str]:
    return [f"kcoord-{i}" for i in NODES]


@pytest.fixture(scope="module")
def cluster(images, tmp_path_factory):
    override = tmp_path_factory.mktemp("compose") / "test-override.yml"
    override.write_text(TEST_OVERRIDE)
    env = {f"KCOORD_PORT_{i}": str(free_port()) for i in NODES} | {"ZOOKEEPER_PORT": str(free_port())}
    c = Compose(f"kcoordcluster{uuid.uuid4().hex[:8]}", [FILE, override], env)
    c.bootstrap = ",".join(f"localhost:{env[f'KCOORD_PORT_{i}']}" for i in NODES)
    c.zk_connect = f"127.0.0.1:{env['ZOOKEEPER_PORT']}"
    started = time.monotonic()
    try:
        # the nodes and ZooKeeper: three Spark sidecars are not what these tests are about
        c("up", "-d", "zookeeper", *node_services())
        for service in ["zookeeper", *node_services()]:
            c.wait_healthy(service)
        admin = admin_client(c.bootstrap)
        wait_for(lambda: set(admin.list_topics(timeout=10).brokers) == set(NODES), 120, "three nodes registered")
        c.up_seconds = time.monotonic() - started
        yield c
    finally:
        # killed first: the nodes' controlled shutdowns one after another are not tested here
        c("kill", check=False)
        c("down", "-v", "--remove-orphans", check=False)


def admin_client(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def partition(admin, topic: str, p: int = 0):
    """(leader, replicas, isr) from Metadata (-1, [], [] while the topic is unknown)."""
    md = admin.list_topics(topic, timeout=10).topics[topic]
    if md.error is not None or p not in md.partitions:
        return -1, [], []
    pm = md.partitions[p]
    return pm.leader, list(pm.replicas), sorted(pm.isrs)


class ZkState:
    """A partition's state znode, read from ZooKeeper (kazoo) as zookeeper-shell would."""

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient

        self.zk = KazooClient(hosts=connect)
        self.zk.start(timeout=30)

    def __call__(self, topic: str, p: int = 0) -> dict:
        return json.loads(self.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])

    def close(self) -> None:
        self.zk.stop()
        self.zk.close()


def volume_sources(service: dict) -> list[str]:
    """The volumes a service mounts (compose v1 prints short syntax, v2 long)."""
    return [v.split(":")[0] if isinstance(v, str) else v["source"] for v in service.get("volumes", [])]


def test_the_file_gives_each_node_its_id_volume_and_sidecar(images):
    config = yaml.safe_load(Compose("kcoordclusterconfig", [FILE], {})("config").stdout)
    services = config["services"]
    assert {"zookeeper", *node_services(), *(f"sidecar-{i}" for i in NODES)} <= services.keys()
    volumes = set()
    for i in NODES:
        node, sidecar = services[f"kcoord-{i}"], services[f"sidecar-{i}"]
        env = node["environment"]
        assert env["KAFKA_BROKER_ID"] == str(i)
        assert env["KAFKA_ZOOKEEPER_CONNECT"] == "zookeeper:2181"
        assert f"INTERNAL://kcoord-{i}:29092" in env["KAFKA_ADVERTISED_LISTENERS"]
        assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
        (volume,) = volume_sources(node)
        volumes.add(volume)
        # the sidecar cleans its own node's log directory
        assert volume_sources(sidecar) == [volume], (i, volume_sources(sidecar), volume)
        assert sidecar["depends_on"][f"kcoord-{i}"]["condition"] == "service_healthy"
        assert node["depends_on"]["zookeeper"]["condition"] == "service_healthy"
    assert len(volumes) == 3, volumes
    cfg = json.loads(docker("image", "inspect", ZOOKEEPER_IMAGE).stdout)[0]["Config"]
    assert cfg["User"] == "zookeeper"
    assert cfg["Volumes"] == {"/var/lib/zookeeper": {}}
    assert cfg["Healthcheck"]["Test"][-1] == "zookeeper-healthcheck"


def test_nodes_answer_the_host_and_containers_on_the_network(cluster, capsys):
    from confluent_kafka import Consumer, TopicPartition

    say(capsys, f"compose up to three registered nodes: {cluster.up_seconds:.1f} s")
    assert all(n.subnet_of(LINK_LOCAL) for n in subnets(cluster.network())), subnets(cluster.network())
    admin = admin_client(cluster.bootstrap)
    md = admin.list_topics(timeout=10)
    # each node advertises its published host port to the host
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {
        i: ("localhost", int(cluster.env[f"KCOORD_PORT_{i}"])) for i in NODES}
    # their registrations, through the image's zookeeper-shell; INTERNAL and EXTERNAL endpoints
    assert "[1, 2, 3]" in cluster("exec", "-T", "zookeeper", "zookeeper-shell", "ls", "/brokers/ids").stdout
    registration = cluster("exec", "-T", "zookeeper", "zookeeper-shell", "get", "/brokers/ids/2").stdout
    assert '"INTERNAL://kcoord-2:29092"' in registration, registration
    # a container on the compose network, through the nodes' INTERNAL listeners (service names);
    # the topic is auto-created with the file's default.replication.factor
    n = 50
    r = docker("run", "--rm", "--network", cluster.network(), "-e",
               "KAFKA_BOOTSTRAP=" + ",".join(f"kcoord-{i}:29092" for i in NODES),
               "kcoord-demo-python:latest", "produce", "inside", str(n), timeout=120)
    assert f"produced {n}" in r.stdout, r
    _, replicas, _ = wait_for(lambda: (s := partition(admin, "inside")) and len(s[2]) == 3 and s, 60,
                              "the auto-created topic's ISR of three")
    assert sorted(replicas) == list(NODES)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "inside-reader"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition("inside", 0), timeout=30)
    finally:
        c.close()
    assert high - low == n


class Producing(threading.Thread):
    """An idempotent acks=all producer writing v-000000, v-000001, ... until stopped; every
    acknowledgement is recorded with its time."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        super().__init__(daemon=True)
        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5})
        self.acked: list[bytes] = []
        self.ack_times: list[float] = []
        self.failed: list[str] = []
        self.stopping = threading.Event()
        self.unflushed = -1

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked.append(msg.value())
            self.ack_times.append(time.monotonic())

    def run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            try:
                self.producer.produce(self.topic, value=b"v-%06d" % i, on_delivery=self._delivered)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.004)
        self.unflushed = self.producer.flush(120)

    def longest_wait(self, since: float) -> float:
        """The longest time between two acknowledgements after `since`."""
        times = [t for t in self.ack_times if t >= since]
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


class Consuming(threading.Thread):
    """A consumer group member that commits (synchronously) what it has read every 50 records
    or half a second; the commits' outcomes are recorded with their times."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        from confluent_kafka import Consumer

        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.consumer.subscribe([topic])
        self.values: list[bytes] = []
        self.commits: list[tuple[float, int]] = []  # (time, committed offset)
        self.commit_errors: list[str] = []
        self.stopping = threading.Event()

    def _commit(self) -> None:
        from confluent_kafka import KafkaException

        try:
            done = self.consumer.commit(asynchronous=False)
        except KafkaException as e:
            self.commit_errors.append(str(e))
            return
        self.commits.append((time.monotonic(), max(tp.offset for tp in done)))

    def run(self) -> None:
        uncommitted, last = 0, time.monotonic()
        try:
            while not self.stopping.is_set():
                m = self.consumer.poll(0.2)
                if m is not None and not m.error():
                    self.values.append(m.value())
                    uncommitted += 1
                if uncommitted and (uncommitted >= 50 or time.monotonic() - last > 0.5):
                    self._commit()
                    uncommitted, last = 0, time.monotonic()
            if uncommitted:
                self._commit()
        finally:
            self.consumer.close()

    def committed_after(self, since: float) -> int:
        return max((o for t, o in self.commits if t > since), default=-1)


def lose_the_leader(cluster, how: str, name: str, zk: ZkState, admin, producer: Producing,
                    consumer: Consuming) -> str:
    """`docker kill` (SIGKILL) or `docker stop` (SIGTERM: a controlled shutdown, the file's
    stop_grace_period) the node leading the partition; the clients go on with the new leader;
    the node started again rejoins the ISR. A line of what it measured."""
    leader = zk(name)["leader"]
    service = f"kcoord-{leader}"
    acked_before, committed_before = len(producer.acked), consumer.committed_after(0)
    stopped = time.monotonic()
    docker(*({"kill": ["kill"], "stop": ["stop", "-t", "30"]}[how]), cluster.container(service), timeout=120)
    command = time.monotonic() - stopped  # `docker stop` returns once the container has exited
    state = wait_for(lambda: (s := zk(name))["leader"] not in (-1, leader) and s, 60,
                     f"a new leader after {how} of node {leader}")
    elected = time.monotonic() - stopped
    assert leader not in state["isr"], state
    # the clients go on with the new leader
    wait_for(lambda: len(producer.acked) >= acked_before + 300, 120,
             f"records acknowledged by the new leader (failed: {producer.failed[-3:]})")
    wait_for(lambda: consumer.committed_after(stopped) > max(committed_before, acked_before), 120,
             f"the group committing past the {how} (errors: {consumer.commit_errors[-3:]})")
    assert partition(admin, name)[0] == state["leader"]
    # the node comes back, catches up and is in the ISR again
    restarted = time.monotonic()
    cluster("start", service)
    wait_for(lambda: sorted(zk(name)["isr"]) == list(NODES), 120, f"node {leader} back in the ISR")
    rejoined = time.monotonic() - restarted
    wait_for(lambda: partition(admin, name)[2] == list(NODES), 60, "Metadata's ISR of three")
    return (f"{how} node {leader} (leader; the command {command:.1f} s): new leader {state['leader']} seen "
            f"{elected:.1f} s after the command started, "
            f"longest wait for an ack {producer.longest_wait(stopped):.1f} s, "
            f"back in the ISR {rejoined:.1f} s after start")


def test_clients_continue_through_the_leaders_loss_and_the_node_rejoins(cluster, capsys):
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import NewTopic

    name, group = "failover", "failover-group"
    admin = admin_client(cluster.bootstrap)
    for f in admin.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})]).values():
        f.result(60)
    wait_for(lambda: len(partition(admin, name)[2]) == 3, 60, "an ISR of three")
    zk = ZkState(cluster.zk_connect)
    producer, consumer = Producing(cluster.bootstrap, name), Consuming(cluster.bootstrap, name, group)
    producer.start()
    consumer.start()
    try:
        wait_for(lambda: len(producer.acked) >= 300 and consumer.commits, 120, "records acknowledged and committed")
        report = [lose_the_leader(cluster, how, name, zk, admin, producer, consumer) for how in ("kill", "stop")]
    finally:
        producer.stopping.set()
        producer.join(180)
        zk.close()
    acked = set(producer.acked)
    wait_for(lambda: acked <= set(consumer.values), 120, "the group consuming every acknowledged record")
    consumer.stopping.set()
    consumer.join(60)
    assert producer.unflushed == 0 and not producer.failed, (producer.unflushed, producer.failed[:5])
    # the partition read back whole: every acknowledged record, once, in order
    reader = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "failover-reader",
                       "enable.auto.commit": False})
    try:
        end = reader.get_watermark_offsets(TopicPartition(name, 0), timeout=30)[1]
        reader.assign([TopicPartition(name, 0, 0)])
        log: list[bytes] = []
        deadline = time.monotonic() + 120
        while len(log) < end and time.monotonic() < deadline:
            m = reader.poll(1)
            if m is not None and not m.error():
                log.append(m.value())
    finally:
        reader.close()
    assert len(log) == end, (len(log), end)
    lost = acked - set(log)
    duplicates = len(log) - len(set(log))
    assert not lost, f"{len(lost)} acknowledged records lost: {sorted(lost)[:10]}"
    assert duplicates == 0, duplicates
    assert log == sorted(log), "the log is not in the order produced"
    # the group's committed offset is the end of the log (its last commit came after the last record)
    got = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert {tp.partition: tp.offset for tp in got.topic_partitions if tp.topic == name} == {0: end}
    for line in report:
        say(capsys, line)
    say(capsys, f"acknowledged {len(acked)}, in the log {len(log)}, lost 0, duplicates 0; consumed by the "
                f"group {len(consumer.values)} (re-deliveries {len(consumer.values) - len(set(consumer.values))}), "
                f"commits {len(consumer.commits)} (failed {len(consumer.commit_errors)})")
