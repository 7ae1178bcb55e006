"""kcoord's images and docker-compose.yml, run on a real Docker engine (tests/dockerlib.py).

The images are built here from Debian-package bases with the host's wheels (no network inside
the build); then, on compose projects of their own:
- a confluent-kafka and a Java consumer on the host (through EXTERNAL, advertised as
  localhost) and the demo's Python consumer in a container on the compose network (through
  INTERNAL, advertised as the service name) consume one topic in one group and commit;
- the sidecar compacts __consumer_offsets while the server runs: the partition's segments
  shrink, the committed offsets stay;
- `restart kcoord`, and `down` then `up`, keep every committed offset and record (the volume);
- the control API answers from the host;
- the SASL_SSL variant (docker-compose.sasl-ssl.yml, certificates from scripts/docker-certs.sh)
  with a client on the host;
- testcontainers-python starts the image as a generic container, a consumer group runs on it;
  container start to the first answered ApiVersions is measured.
Image sizes and start-to-ready times are printed (to the terminal, whatever the capture mode).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest
from clientlib import java_classpath
from conftest import committed, free_port
from dockerlib import (
    LINK_LOCAL,
    ROOT,
    Compose,
    docker,
    engine_for_tests,
    image_size,
    subnets,
    wait_for,
)

from kcoord.server.healthcheck import check as api_versions

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.timeout(900)]

EXAMPLES = ROOT / "examples"


def say(capsys, text: str) -> None:
    """A line in the test output whatever pytest's capture mode."""
    with capsys.disabled():
        print(f"\n[docker] {text}", flush=True)


# module scope: a dockerd started here stops once this module's tests are done
@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    eng = engine_for_tests(tmp_path_factory.mktemp("dockerd"))
    yield eng
    eng.stop()


@pytest.fixture(scope="module")
def images(engine, tmp_path_factory):
    from dockerlib import build_images

    return build_images(tmp_path_factory.mktemp("images"))


def compose_env(**extra: str) -> dict[str, str]:
    return {"KCOORD_PORT": str(free_port()), "KCOORD_CONTROL_PORT": str(free_port()), **extra}


# The test's settings on top of docker-compose.yml: small __consumer_offsets segments and a
# quick sidecar, so that compaction happens within the test.
TEST_OVERRIDE = """
x-test: &test
  KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS: "1"
  KAFKA_OFFSETS_TOPIC_SEGMENT_BYTES: "32768"
  KAFKA_LOG_CLEANER_MIN_CLEANABLE_RATIO: "0.3"
  KAFKA_LOG_CLEANER_BACKOFF_MS: "500"
  KAFKA_KCOORD_COMPACTION_HANDOFF_CHECK_MS: "200"
  KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: "0"
services:
  kcoord:
    environment: *test
  sidecar:
    environment:
      <<: *test
      KCOORD_COMPACT_DRIVER_MEMORY: 1g
    command: ["sidecar", "--master", "local[1]"]
"""


@pytest.fixture(scope="module")
def stack(images, tmp_path_factory):
    override = tmp_path_factory.mktemp("compose") / "test-override.yml"
    override.write_text(TEST_OVERRIDE)
    c = Compose(f"kcoordtest{uuid.uuid4().hex[:8]}", [ROOT / "docker-compose.yml", override], compose_env())
    c.port = int(c.env["KCOORD_PORT"])
    c.bootstrap = f"localhost:{c.port}"
    started = time.monotonic()
    try:
        c("up", "-d")
        c.wait_healthy("kcoord")
        c.up_seconds = time.monotonic() - started
        yield c
    finally:
        c("down", "-v", "--remove-orphans", check=False)


def topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(60)


def produce(bootstrap: str, name: str, n: int, prefix: str = "m") -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(name, key=f"key-{i}".encode(), value=f"{prefix}-{i}".encode())
        p.poll(0)
    assert p.flush(60) == 0


def end_offsets(bootstrap: str, name: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(name, p), timeout=30)[1] for p in range(partitions)}
    finally:
        c.close()


class Lines:
    """A child process's stdout lines, read by a thread."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.lines = proc, []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(line.rstrip("\n"))

    def records(self) -> list[str]:
        return [x.split(" ", 1)[0] for x in list(self.lines) if x.startswith("demo[")]


def test_images_are_small_non_root_with_stop_signal_and_healthcheck(images, capsys):
    say(capsys, images.report())
    for tag in ("kcoord:latest", "kcoord-compactor:latest"):
        cfg = json.loads(docker("image", "inspect", tag).stdout)[0]["Config"]
        assert cfg["User"] == "kcoord", tag
        assert cfg["StopSignal"] == "SIGTERM", tag
        assert cfg["Volumes"] == {"/data": {}}, tag
    cfg = json.loads(docker("image", "inspect", "kcoord:latest").stdout)[0]["Config"]
    assert "kcoord.server.healthcheck" in " ".join(cfg["Healthcheck"]["Test"])
    assert "KAFKA_LOG_DIRS=/data" in cfg["Env"]
    # no compiler, no pip, no pip cache in the server's image
    r = docker("run", "--rm", "--entrypoint", "sh", "kcoord:latest", "-c",
               "command -v gcc cc pip pip3; ls -d /root/.cache/pip ~/.cache/pip 2>/dev/null; stat -c %U /data; id -u")
    assert r.stdout.split() == ["kcoord", "1000"], r.stdout
    assert image_size("kcoord:latest") < 250e6, images.report()


def test_host_and_network_clients_share_one_group(stack, tmp_path, capsys):
    say(capsys, f"compose up to kcoord healthy: {stack.up_seconds:.1f} s")
    # the compose network is link-local too
    assert all(n.subnet_of(LINK_LOCAL) for n in subnets(stack.network())), subnets(stack.network())
    name, parts, n = "demo", 3, 300
    topic(stack.bootstrap, name, parts)
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", java_classpath(),
                    str(EXAMPLES / "java" / "src" / "main" / "java" / "demo" / "DemoConsumer.java")],
                   check=True, timeout=180, capture_output=True)
    env = {**os.environ, "KAFKA_BOOTSTRAP": stack.bootstrap}
    inside = f"{stack.project}-demo-consumer"
    procs = {
        # the demo's Python consumer in a container on the compose network: kcoord:29092
        "network-python": subprocess.Popen([*stack.cmd, "run", "--rm", "-T", "--name", inside,
                                            "demo-consumer-python"],
                                           env=stack.env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                           stdin=subprocess.DEVNULL, text=True),
        # on the host, through the published port: localhost:PORT
        "host-confluent": subprocess.Popen([sys.executable, str(EXAMPLES / "python" / "demo.py"), "consume",
                                            name, "demo-group"], env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.DEVNULL, text=True),
        "host-java": subprocess.Popen(["java", "-cp", f"{classes}{os.pathsep}{java_classpath()}",
                                       "demo.DemoConsumer", stack.bootstrap, name, "demo-group"],
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True),
    }
    out = {k: Lines(p) for k, p in procs.items()}
    try:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": stack.bootstrap})

        def stable_with_three() -> bool:
            for p in procs.values():
                assert p.poll() is None, {k: o.lines[-5:] for k, o in out.items()}
            g = admin.describe_consumer_groups(["demo-group"])["demo-group"].result(30)
            return str(g.state).endswith("STABLE") and len(g.members) == 3

        wait_for(stable_with_three, 240, "three members in demo-group", interval=1)
        produce(stack.bootstrap, name, n)
        wait_for(lambda: sum(len(o.records()) for o in out.values()) >= n, 180,
                 f"{n} records consumed ({ {k: len(o.records()) for k, o in out.items()} })")
        ends = end_offsets(stack.bootstrap, name, parts)
        wait_for(lambda: committed(stack.bootstrap, "demo-group", name) == ends, 60, "every offset committed")
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        docker("rm", "-f", inside, check=False)
    records = [r for o in out.values() for r in o.records()]
    assert len(records) == n and len(set(records)) == n, {k: len(o.records()) for k, o in out.items()}
    for k, o in out.items():
        assert o.records(), f"{k} consumed nothing: {({k: len(o.records()) for k, o in out.items()})}"
    say(capsys, "demo-group: " + ", ".join(f"{k} {len(o.records())}" for k, o in out.items()))


def offsets_partition_bytes(stack) -> int:
    r = stack("exec", "-T", "kcoord", "python3", "-c",
              "import os; d='/data/__consumer_offsets-0'; "
              "print(sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith('.log')))")
    return int(r.stdout.strip())


def test_sidecar_compacts_offsets_while_the_server_runs(stack, capsys):
    from confluent_kafka import Consumer, TopicPartition

    name = "compacted"
    topic(stack.bootstrap, name, 2)
    stack("stop", "sidecar")  # the commits first, then the sidecar finds them
    before_swaps = stack.logs("kcoord").count("swapped in compacted segment")
    c = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "burst", "enable.auto.commit": False})
    try:
        for i in range(1, 1201):  # ~100 bytes each: several 32 KiB segments of one partition
            c.commit(offsets=[TopicPartition(name, 0, i), TopicPartition(name, 1, 2 * i)], asynchronous=False)
    finally:
        c.close()
    want = committed(stack.bootstrap, "burst", name)
    assert want == {0: 1200, 1: 2400}
    before = offsets_partition_bytes(stack)
    stack("start", "sidecar")
    wait_for(lambda: stack.logs("kcoord").count("swapped in compacted segment") > before_swaps, 300,
             "the sidecar's segments swapped in", interval=1)
    after = wait_for(lambda: (b := offsets_partition_bytes(stack)) < before / 2 and b, 60, "smaller segments")
    assert after < before / 2, (before, after)
    assert committed(stack.bootstrap, "burst", name) == want
    assert "Could not swap" not in stack.logs("kcoord")
    say(capsys, f"sidecar: __consumer_offsets-0 {before} -> {after} bytes of segments, offsets unchanged")


def test_restart_keeps_offsets_and_down_up_keeps_the_volume(stack):
    name = "kept"
    topic(stack.bootstrap, name, 2)
    produce(stack.bootstrap, name, 100, prefix="kept")
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": "kept-group", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(name, 0, 17), TopicPartition(name, 1, 23)], asynchronous=False)
    c.close()
    want = {0: 17, 1: 23}
    assert committed(stack.bootstrap, "kept-group", name) == want
    stack("restart", "kcoord")
    stack.wait_healthy("kcoord")
    assert committed(stack.bootstrap, "kept-group", name) == want
    assert "shut down" in stack.logs("kcoord")  # stopped by its STOPSIGNAL, not killed
    stack("down")  # the named volume stays
    stack("up", "-d")
    stack.wait_healthy("kcoord")
    assert committed(stack.bootstrap, "kept-group", name) == want
    assert sum(end_offsets(stack.bootstrap, name, 2).values()) == 100


def test_control_api_from_the_host(stack):
    url = f"http://127.0.0.1:{stack.env['KCOORD_CONTROL_PORT']}"
    r = subprocess.run([sys.executable, "-m", "kcoord.server", "ctl", "--url", url, "status"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip(), r


def test_sasl_ssl_variant_with_a_host_client(images, tmp_path):
    from confluent_kafka import Consumer, KafkaException, Producer

    secrets = tmp_path / "secrets"
    subprocess.run(["bash", str(ROOT / "scripts" / "docker-certs.sh"), str(secrets)], check=True,
                   capture_output=True, timeout=60)
    c = Compose(f"kcoordsasl{uuid.uuid4().hex[:8]}",
                [ROOT / "docker-compose.yml", ROOT / "docker-compose.sasl-ssl.yml"],
                compose_env(KCOORD_SECRETS=str(secrets)))
    bootstrap = f"localhost:{c.env['KCOORD_PORT']}"
    secure = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(secrets / "ca.pem"),
              "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    try:
        c("up", "-d", "kcoord")
        c.wait_healthy("kcoord")
        p = Producer(secure)
        for i in range(10):
            p.produce("secure", value=f"s-{i}".encode())
        assert p.flush(60) == 0
        cons = Consumer({**secure, "group.id": "secure-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        cons.subscribe(["secure"])
        got: list[bytes] = []
        deadline = time.monotonic() + 120
        while len(got) < 10 and time.monotonic() < deadline:
            m = cons.poll(1)
            if m is not None and not m.error():
                got.append(m.value())
        assert sorted(got) == sorted(f"s-{i}".encode() for i in range(10))
        cons.commit(asynchronous=False)
        cons.close()
        # a wrong password is refused
        bad = Consumer({**secure, "sasl.password": "wrong", "group.id": "bad", "log_level": 0})
        with pytest.raises(KafkaException):
            bad.list_topics(timeout=10)
        bad.close()
        # and plaintext is not served
        with pytest.raises(OSError):
            api_versions("127.0.0.1", int(c.env["KCOORD_PORT"]), tls=False, timeout=5)
    finally:
        c("down", "-v", "--remove-orphans", check=False)


def test_testcontainers_generic_container_runs_a_consumer_group(images, capsys):
    from confluent_kafka import Consumer, Producer
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    testcontainers_config.ryuk_disabled = True  # its reaper image is not reachable here
    port = free_port()
    container = (DockerContainer("kcoord:latest")
                 .with_env("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://127.0.0.1:{port}")
                 .with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
                 .waiting_for(LogMessageWaitStrategy("kcoord listening")))
    container.ports["9092/tcp"] = ("127.0.0.1", port)  # published on loopback only
    ready: list[float] = []
    stop = threading.Event()

    def first_api_versions(t0: float) -> None:
        while not stop.is_set():
            try:
                api_versions("127.0.0.1", port, timeout=1)
            except (OSError, ValueError):
                time.sleep(0.005)
                continue
            ready.append(time.monotonic() - t0)
            return

    t0 = time.monotonic()
    poller = threading.Thread(target=first_api_versions, args=(t0,), daemon=True)
    poller.start()
    with container:
        started = time.monotonic() - t0
        poller.join(60)
        stop.set()
        assert ready, "no ApiVersions answer"
        bootstrap = f"127.0.0.1:{port}"
        p = Producer({"bootstrap.servers": bootstrap})
        for i in range(20):
            p.produce("tc", key=str(i).encode(), value=str(i).encode())
        assert p.flush(60) == 0
        seen: dict[str, set[bytes]] = {"a": set(), "b": set()}
        consumers = {k: Consumer({"bootstrap.servers": bootstrap, "group.id": "tc-group",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
                     for k in seen}
        for c in consumers.values():
            c.subscribe(["tc"])
        deadline = time.monotonic() + 120
        while sum(map(len, seen.values())) < 20 and time.monotonic() < deadline:
            for k, c in consumers.items():
                m = c.poll(0.2)
                if m is not None and not m.error():
                    seen[k].add(m.value())
                    c.commit(message=m, asynchronous=False)
        for c in consumers.values():
            c.close()
        assert set().union(*seen.values()) == {str(i).encode() for i in range(20)}
        assert committed(bootstrap, "tc-group", "tc") == end_offsets(bootstrap, "tc", 1)
    say(capsys, f"testcontainers: container start to first ApiVersions answer {ready[0]:.2f} s "
                f"(to the wait strategy's log line {started:.2f} s)")
