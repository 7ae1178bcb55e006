#!/usr/bin/env python3
"""Runs librdkafka's own test suite (its C test-runner, built from Debian's source package by
scripts/setup-rdkafka.sh) against a kcoord it starts, and keeps the table of results.

    rdkafka_suite.py run [--tests 0001,0045] [--jobs 2] [--group-protocol consumer] [--check] [--update]
    rdkafka_suite.py list                  # what would run, what is excluded and why
    rdkafka_suite.py doc [--check]         # docs/compatibility.md's sections from the committed tables

The server is set up as librdkafka's own test clusters are (its tests/scenarios/*.json and
trivup's broker template): num.partitions=4, auto topic creation on (off for the
"noautocreate" scenario, which gets its own server), Kafka's group.initial.rebalance.delay.ms
of 3000, log.retention.bytes=1000000000. Every broker test (`-L`) not excluded in
tests/rdkafka/suite.toml runs, one test id (all its tests of one scenario) per test-runner
process under a time limit; a server that stops answering is replaced by a fresh one on a
fresh data directory; an id with a test that did not pass runs once more in a fresh process.

--check (CI) exits 1 when a test that passed in the committed table (tests/rdkafka/results.json)
fails both attempts; tests that newly pass are listed so the table can be regenerated with
--update (which also rewrites its section of docs/compatibility.md). The run's own table, logs and server logs
go to .cache/rdkafka-suite/.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rdkafka_results as res  # noqa: E402
import rdkafka_security as sec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LIBRDKAFKA = "2.14.2"
BUILD = ROOT / ".cache" / "rdk" / f"librdkafka-{LIBRDKAFKA}"
SUITE_TOML = ROOT / "tests" / "rdkafka" / "suite.toml"
COMMITTED = {"classic": ROOT / "tests" / "rdkafka" / "results.json",
             "consumer": ROOT / "tests" / "rdkafka" / "results-consumer.json"}
OUT = ROOT / ".cache" / "rdkafka-suite"
DOC = ROOT / "docs" / "compatibility.md"  # the page holding the suite's tables
MARKERS = {"classic": ("<!-- rdkafka-suite:start -->", "<!-- rdkafka-suite:end -->"),
           "consumer": ("<!-- rdkafka-suite-consumer:start -->", "<!-- rdkafka-suite-consumer:end -->")}

# Where Kafka's command-line tools are looked for: librdkafka runs $KAFKA_PATH/bin/kafka-topics.sh,
# kafka-configs.sh, kafka-acls.sh and (for its Java helpers) kafka-run-class.sh. The first
# directory here holding a kafka-topics.sh is linked into the run's Kafka home (see kafka_home()).
KAFKA_TOOLS_DIRS = [ROOT / "bin", ROOT / ".venv" / "bin"]
KJAR = ROOT / ".cache" / "kjar" / "lib"           # the Java kafka-clients jar (scripts/setup-clients.sh)
RUN_CLASS = ROOT / "tests" / "rdkafka" / "kafka-run-class.sh"

# As librdkafka's test clusters (tests/scenarios/default.json, trivup's server.properties and
# tests/interactive_broker_version.py); the replication factor of 3 there needs three brokers.
SERVER_SETTINGS = {
    "num.partitions": "4",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "group.initial.rebalance.delay.ms": "3000",
    "log.retention.bytes": "1000000000",
    # trivup's broker template: an authorizer (StandardAuthorizer in KRaft mode, AclAuthorizer
    # with ZooKeeper) that lets everyone do what no ACL mentions, and admin as super user.
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "allow.everyone.if.no.acl.found": "true",
}
SCENARIO_SETTINGS = {"noautocreate": {"auto.create.topics.enable": "false"}}
# What the log cleaner (`kcoord sidecar`) of a [cleaner] test's server takes from that server's
# settings besides log.dirs (suite.toml's [cleaner] settings are given to both).
CLEANER_SETTINGS = ("log.cleaner.backoff.ms", "log.cleaner.min.cleanable.ratio", "log.cleaner.delete.retention.ms",
                    "offsets.topic.segment.bytes", "log.segment.bytes")
# TEST_KAFKA_VERSION: what the tests gate their features on. kcoord answers as Kafka 4.x (Produce
# v0-v2 removed by KIP-896, the GROUP config resource of KIP-848), so the suite is told 4.0.0:
# 0052 then skips its Produce v0/v1 variants, 0081 expects the GROUP configs served, and 0092
# skips itself (MsgVersion 1). --kafka-version 3.9.0 runs the older expectations.
KAFKA_VERSION = "4.0.0"
TIME_LIMIT = 600               # seconds for one test id in one process (a hang costs this once);
                               # suite.toml's [time_limit] raises it for ids that run longer
SIDECAR_START_LIMIT = 300      # seconds for a cleaner server's sidecar to be up and warm
RUNNING: set[subprocess.Popen] = set()   # test-runner processes in flight (killed on SIGTERM)
STOPPING = threading.Event()              # set on SIGTERM: queued test ids are not started


# ---- the server ----

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int, timeout: float = 10.0) -> bool:
    """Does the server answer an ApiVersions v0 request within `timeout`?"""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            body = struct.pack(">hhih", 18, 0, 4242, 6) + b"health"
            s.sendall(struct.pack(">i", len(body)) + body)
            buf = b""
            while len(buf) < 8:
                chunk = s.recv(8 - len(buf))
                if not chunk:
                    return False
                buf += chunk
            return struct.unpack(">ii", buf)[1] == 4242
    except OSError:
        return False


class Server:
    """One kcoord process for one scenario, with trivup's listeners (PLAINTEXT, SASL_PLAINTEXT,
    and SSL and SASL_SSL given a PKI); replaced by a fresh one (fresh data directory) when it
    stops answering. With `cleaner`, a `kcoord sidecar` runs beside it: Kafka's log cleaner runs
    inside the broker, kcoord's is the Spark sidecar, so only the test ids that need one
    (suite.toml's [cleaner]) get such a server, started for them and stopped after them."""

    def __init__(self, scenario: str, workdir: Path, extra: dict[str, str] | None = None,
                 pki: sec.Pki | None = None, cleaner: bool = False):
        self.extra = extra or {}
        self.pki = pki
        self.cleaner = cleaner
        self.name = f"{scenario}+cleaner" if cleaner else scenario
        self.users = 0                  # runner processes using it (a cleaner server stops at 0)
        self.sidecar: subprocess.Popen | None = None
        self.sidecar_cpu = self.sidecar_wall = 0.0
        self.ports: dict[str, int] = {}
        self.scenario = scenario
        self.workdir = workdir
        self.generation = 0
        self.restarts = 0
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.lock = threading.Lock()

    def start(self) -> None:
        self.generation += 1
        protocols = sec.PROTOCOLS if self.pki is not None else sec.PROTOCOLS[:2]
        self.ports = {p: free_port() for p in protocols}
        self.port = self.ports["PLAINTEXT"]
        data = self.workdir / f"{self.name}-{self.generation}"
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True)
        listeners = ",".join(f"{p}://127.0.0.1:{port}" for p, port in self.ports.items())
        settings = {**SERVER_SETTINGS, **sec.server_settings(self.pki), **SCENARIO_SETTINGS.get(self.scenario, {}),
                    **self.extra, "listeners": listeners, "log.dirs": str(data / "data")}
        args = [sys.executable, "-m", "kcoord.server", "serve"]
        for k, v in settings.items():
            args += ["--override", f"{k}={v}"]
        self.log = data / "server.log"
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        if self.cleaner:
            self._start_sidecar(data, settings)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kcoord exited with {self.proc.returncode}; see {self.log}")
            if answers(self.port, 2.0):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"kcoord did not answer on {self.port} within 60 s; see {self.log}")
        if self.cleaner:
            self._await_sidecar(data / "sidecar.log")

    def _await_sidecar(self, log: Path) -> None:
        """Until the sidecar says it is cleaning (after its warm-up pass: the JVM and its Python
        workers started), so the test's wait for compaction does not include Spark's start."""
        deadline = time.monotonic() + SIDECAR_START_LIMIT
        while time.monotonic() < deadline:
            if self.sidecar.poll() is not None:
                raise RuntimeError(f"kcoord sidecar exited with {self.sidecar.returncode}; see {log}")
            if b"kcoord sidecar: cleaning" in log.read_bytes():
                return
            time.sleep(0.5)
        raise RuntimeError(f"kcoord sidecar not cleaning within {SIDECAR_START_LIMIT} s; see {log}")

    def _start_sidecar(self, data: Path, settings: dict[str, str]) -> None:
        """The sidecar on the server's log directory with the server's cleaner settings."""
        self._stop_sidecar()
        args = [sys.executable, "-m", "kcoord.server", "sidecar"]
        for k in ("log.dirs", *CLEANER_SETTINGS):
            if k in settings:
                args += ["--override", f"{k}={settings[k]}"]
        with open(data / "sidecar.log", "ab") as out:
            self.sidecar = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.sidecar_started = time.monotonic()

    def _stop_sidecar(self) -> None:
        if self.sidecar and self.sidecar.poll() is None:
            # Its CPU cost (the Python driver and the Spark JVM: every process of its session).
            self.sidecar_cpu += session_cpu_seconds(self.sidecar.pid)
            self.sidecar_wall += time.monotonic() - self.sidecar_started
            self.sidecar.send_signal(signal.SIGTERM)
            try:
                self.sidecar.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.sidecar.pid, signal.SIGKILL)
                self.sidecar.wait()

    def stop(self) -> None:
        self._stop_sidecar()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def acquire(self) -> dict[str, str]:
        with self.lock:
            self.users += 1
        return self.ensure()

    def release(self) -> None:
        """A cleaner server (and its Spark JVM) stops when no runner process uses it; the next
        one to need it gets a fresh one."""
        with self.lock:
            self.users -= 1
            if self.cleaner and self.users == 0:
                self.stop()
                self.proc = None

    def ensure(self) -> dict[str, str]:
        """The addresses (security.protocol -> host:port) of a server that answers (started or
        replaced as needed)."""
        with self.lock:
            if self.proc is None:
                self.start()
            elif self.proc.poll() is not None or not answers(self.port):
                print(f"  kcoord ({self.scenario}) stopped answering: replacing it with a fresh one "
                      f"(log: {self.log})", flush=True)
                self.restarts += 1
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait()
                self.start()
            return {p: f"127.0.0.1:{port}" for p, port in self.ports.items()}

    def env(self, protocol: str) -> dict[str, str]:
        return {"BROKER_ADDRESS_1": f"127.0.0.1:{self.ports[protocol]}"}


class ClusterServer:
    """A three-node kcoord cluster (kcoord.testing.cluster.KcoordCluster: ZooKeeper from Debian's
    package and N `kcoord serve` processes, as `kcoord cluster` runs them) for the test ids that
    need three brokers (suite.toml's [cluster]), set up as librdkafka's own clusters are
    (tests/cluster_testing.py): every broker with the suite's settings and trivup's listeners,
    broker.rack=RACK<id> and the rack-aware replica selector. Started when a test id first needs
    it and stopped when none does; replaced by a fresh one (fresh directories) when a node stops
    answering."""

    cleaner = False

    def __init__(self, scenario: str, workdir: Path, extra: dict[str, str], pki: sec.Pki | None,
                 nodes: int, node_settings: dict[str, str]):
        self.scenario = scenario
        self.name = f"{scenario}+cluster"
        self.workdir = workdir
        self.extra = extra
        self.pki = pki
        self.nodes = nodes
        self.node_settings = node_settings      # values may name the node: "RACK{id}"
        self.cluster = None
        self.ports: dict[int, dict[str, int]] = {}
        self.generation = 0
        self.restarts = 0
        self.users = 0
        self.started_at = 0.0
        self.start_seconds: list[float] = []     # how long each start took (ZooKeeper and the nodes)
        self.wall = 0.0                          # seconds the cluster was up
        self.log = workdir
        self.lock = threading.Lock()

    def start(self) -> None:
        """Start the cluster. Its listeners' ports are picked free before the nodes bind them, and
        with tests running beside it one can be taken meanwhile (an outgoing connection's
        ephemeral port): that start is retried on fresh ports, twice at most."""
        for attempt in range(3):
            try:
                return self._start()
            except RuntimeError as e:
                if "address already in use" not in str(e) or attempt == 2:
                    raise
                print(f"  kcoord cluster ({self.scenario}): a port was taken before a node bound it; "
                      "starting again on fresh ports", flush=True)

    def _start(self) -> None:
        from kcoord.testing.cluster import KcoordCluster

        t0 = time.monotonic()
        self.generation += 1
        protocols = sec.PROTOCOLS if self.pki is not None else sec.PROTOCOLS[:2]
        ids = range(1, self.nodes + 1)
        self.ports = {i: {p: free_port() for p in protocols} for i in ids}
        directory = self.workdir / f"{self.name}-{self.generation}"
        shutil.rmtree(directory, ignore_errors=True)
        self.log = directory
        settings = {**SERVER_SETTINGS, **sec.server_settings(self.pki), **SCENARIO_SETTINGS.get(self.scenario, {}),
                    **self.extra}
        per_node = {i: {"listeners": ",".join(f"{p}://127.0.0.1:{port}" for p, port in self.ports[i].items()),
                        **{k: v.format(id=i) for k, v in self.node_settings.items()}} for i in ids}
        self.cluster = KcoordCluster(directory, self.nodes, overrides=settings, node_overrides=per_node,
                                     ports={i: self.ports[i]["PLAINTEXT"] for i in ids})
        try:
            self.cluster.start(timeout=120)
            deadline = time.monotonic() + 60
            while not all(answers(self.ports[i]["PLAINTEXT"], 2.0) for i in ids):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"a node of the cluster in {directory} did not answer within 60 s")
                time.sleep(0.2)
        except Exception:
            self.cluster.close()
            self.cluster = None
            raise
        self.started_at = time.monotonic()
        self.start_seconds.append(round(self.started_at - t0, 1))

    def healthy(self) -> bool:
        return all(n.alive() for n in self.cluster.nodes.values()) and all(
            answers(p["PLAINTEXT"]) for p in self.ports.values())

    def stop(self) -> None:
        if self.cluster is not None:
            self.wall += time.monotonic() - self.started_at
            self.cluster.close()
            self.cluster = None

    def acquire(self) -> dict[str, str]:
        with self.lock:
            self.users += 1
        return self.ensure()

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users == 0:
                self.stop()

    def ensure(self) -> dict[str, str]:
        """The client's addresses: security.protocol -> every node's listener of it."""
        with self.lock:
            if self.cluster is None:
                self.start()
            elif not self.healthy():
                print(f"  kcoord cluster ({self.scenario}) has a node not answering: replacing the cluster "
                      f"with a fresh one (logs: {self.log})", flush=True)
                self.restarts += 1
                self.stop()
                self.start()
            protocols = next(iter(self.ports.values()))
            return {p: ",".join(f"127.0.0.1:{ports[p]}" for ports in self.ports.values()) for p in protocols}

    def env(self, protocol: str) -> dict[str, str]:
        """What trivup's LibrdkafkaTestApp sets per broker: BROKER_ADDRESS_<id> (its listener of
        the client's protocol), BROKER_PID_<id>, and ZK_ADDRESS."""
        with self.lock:
            out = {"ZK_ADDRESS": self.cluster.zookeeper}
            for i, node in self.cluster.nodes.items():
                out[f"BROKER_ADDRESS_{i}"] = f"127.0.0.1:{self.ports[i][protocol]}"
                out[f"BROKER_PID_{i}"] = str(node.proc.pid)
            return out

def session_cpu_seconds(sid: int) -> float:
    """User + system CPU seconds of every live process in session `sid` (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:           # field 6 of stat: the session id
            total += int(fields[11]) + int(fields[12])   # utime, stime
    return total / tick


# ---- the suite ----

@dataclass
class Unit:
    """One test-runner process: one test id, one scenario."""
    id: str
    scenario: str
    tests: list[res.SuiteTest]
    time_limit: int = TIME_LIMIT
    security: str = "PLAINTEXT"     # the client's security.protocol (suite.toml's [security])
    cleaner: bool = False           # its server has a log cleaner beside it (suite.toml's [cleaner])
    brokers: int = 1                # a cluster of this many nodes serves it (suite.toml's [cluster])

    @property
    def key(self) -> str:
        return self.id if self.scenario == "default" else f"{self.id}-{self.scenario}"


def load_suite_toml() -> dict:
    with open(SUITE_TOML, "rb") as f:
        return tomllib.load(f)


def select(tests: list[res.SuiteTest], excluded: dict[str, str], only: set[str] | None,
           group_tests: set[str] | None) -> list[Unit]:
    units: dict[tuple[str, str], Unit] = {}
    for t in tests:
        named = bool(only) and (t.id in only or t.name in only)
        if t.local or t.manual or (t.name in excluded and not named):   # --tests names run even if excluded
            continue
        if only and not named:
            continue
        if group_tests is not None and t.id not in group_tests:
            continue
        units.setdefault((t.id, t.run_scenario), Unit(t.id, t.run_scenario, [])).tests.append(t)
    return list(units.values())


def configure(units: list[Unit], conf: dict) -> list[Unit]:
    """Each unit's time limit, client security.protocol, log cleaner and number of brokers, from
    suite.toml's [time_limit], [security], [cleaner] and [cluster]."""
    cluster = conf.get("cluster", {})
    for u in units:
        u.time_limit = int(conf.get("time_limit", {}).get(u.id, TIME_LIMIT))
        u.security = conf.get("security", {}).get(u.id, "PLAINTEXT")
        u.cleaner = u.id in conf.get("cleaner", {}).get("ids", [])
        u.brokers = int(cluster.get("nodes", 3)) if u.id in cluster.get("ids", []) else 1
    return units


def excluded_tests(tests: list[res.SuiteTest], conf: dict) -> dict[str, str]:
    """test name -> why it is not run: the ones librdkafka itself marks, and suite.toml's."""
    out = {}
    for t in tests:
        if t.local or t.manual:
            continue
        if t.name in conf.get("excluded", {}):
            out[t.name] = conf["excluded"][t.name]
        elif t.known_issue:
            out[t.name] = "librdkafka marks it a known issue (TEST_F_KNOWN_ISSUE; its own CI runs with -K)"
    return out


def uses_groups(build: Path, test_id: str) -> bool:
    """A test that joins a consumer group (subscribes): what group.protocol=consumer changes."""
    for src in (build / "tests").glob(f"{test_id}-*.c*"):
        text = src.read_text(errors="replace")
        if "subscribe(" in text or "test_consumer_subscribe" in text:
            return True
    return False


def kafka_home(out: Path) -> Path:
    """A directory shaped like a Kafka distribution for $KAFKA_PATH: bin/ holds Kafka's
    command-line tools where they are installed (KAFKA_TOOLS_DIRS) and a kafka-run-class.sh that
    runs the real Java kafka-clients jar; libs/ holds that jar (the suite compiles its Java
    helpers against libs/kafka-clients-*.jar)."""
    home = out / "kafka-home"
    shutil.rmtree(home, ignore_errors=True)
    (home / "bin").mkdir(parents=True)
    (home / "libs").mkdir()
    tools = next((d for d in KAFKA_TOOLS_DIRS if (d / "kafka-topics.sh").exists()), None)
    if tools:
        for tool in sorted(tools.glob("kafka-*.sh")):
            (home / "bin" / tool.name).symlink_to(tool.resolve())
    if not (home / "bin" / "kafka-run-class.sh").exists():
        (home / "bin" / "kafka-run-class.sh").symlink_to(RUN_CLASS)
    if KJAR.is_dir():
        for jar in sorted(KJAR.glob("*.jar")):
            name = "kafka-clients-3.9.1.jar" if jar.name == "kafka-clients.jar" else jar.name
            (home / "libs" / name).symlink_to(jar.resolve())
    return home


def run_unit(unit: Unit, server: Server | ClusterServer, attempt: int, env_base: dict, logs: Path) -> dict[str, res.Outcome]:
    if STOPPING.is_set():
        return {t.name: res.Outcome() for t in unit.tests}
    try:
        addresses = server.acquire()
    except Exception as e:  # noqa: BLE001 - a server that cannot start fails its tests, not the run
        server.release()
        first = str(e).splitlines()[0] if str(e) else repr(e)
        print(f"  {server.name}: could not start for {unit.key}: {first}", flush=True)
        return {t.name: res.Outcome(state="failed", failure=f"the kcoord server did not start: {first}")
                for t in unit.tests}
    try:
        return _run_unit(unit, server, addresses, attempt, env_base, logs)
    finally:
        server.release()


def _run_unit(unit: Unit, server: Server | ClusterServer, addresses: dict[str, str], attempt: int, env_base: dict,
              logs: Path) -> dict[str, res.Outcome]:
    bootstrap = addresses[unit.security]
    work = logs / f"{unit.key}.{attempt}"
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "test.conf"
    # As trivup's LibrdkafkaTestApp writes it: BROKERS names the cluster's PLAINTEXT listeners,
    # BROKER_ADDRESS_<n> and bootstrap.servers those of the client's security.protocol.
    lines, sec_env = sec.client(unit.security, server.pki)
    conf.write_text("\n".join([f"bootstrap.servers={bootstrap}", "broker.address.family=v4",
                               "test.timeout.multiplier=2", *lines]) + "\n")
    env = {**env_base, **sec_env, "TESTS": unit.id, "TEST_SCENARIO": unit.scenario, "RDKAFKA_TEST_CONF": str(conf),
           "BROKERS": addresses["PLAINTEXT"], **server.env(unit.security), "TEST_REPORT": str(work / "report.json")}
    log = work / "test-runner.log"
    t0 = time.monotonic()
    with open(log, "wb") as f:
        # stdbuf: line-buffered stdout, so a runner that aborts still leaves its summary.
        proc = subprocess.Popen(["stdbuf", "-oL", str(BUILD / "tests" / "test-runner"), "-L", "-p1"], cwd=BUILD / "tests",
                                env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        RUNNING.add(proc)
        try:
            proc.wait(unit.time_limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            timed_out = True
        finally:
            RUNNING.discard(proc)
    wall = time.monotonic() - t0
    text = log.read_text(errors="replace")
    got = res.parse_output(text)
    try:
        res.apply_report(got, json.loads((work / "report.json").read_text(errors="replace")))
    except (OSError, ValueError):
        pass                                    # killed, or aborted before writing it
    main = got.pop("<MAIN>", None)
    outcomes = {}
    for t in unit.tests:
        o = got.get(t.name, res.Outcome())
        if timed_out and o.state in ("timeout", "not run"):
            o.state, o.failure = "timeout", o.failure or f"killed after the runner's {unit.time_limit} s limit"
        if o.seconds is None and o.state != "not run":
            o.seconds = round(wall, 1)
        outcomes[t.name] = o
    # <MAIN> fails after every test finished when librdkafka objects outlive them (leaked
    # threads): that counts against the tests of this process that otherwise passed.
    if main and main.state == "failed" and not timed_out:
        for o in outcomes.values():
            if o.state == "passed":
                o.state, o.failure = "failed", f"after the test: {main.failure}"
    if proc.returncode not in (0, None) and not timed_out and all(o.state == "passed" for o in outcomes.values()):
        for o in outcomes.values():
            o.state, o.failure = "failed", f"test-runner exited {proc.returncode}"
    return outcomes


def run(args: argparse.Namespace) -> int:
    if not (BUILD / "tests" / "test-runner").exists():
        print(f"{BUILD}/tests/test-runner missing: run scripts/setup-rdkafka.sh first", file=sys.stderr)
        return 2
    conf = load_suite_toml()
    tests = res.catalog((BUILD / "tests" / "test.c").read_text(errors="replace"))
    excluded = excluded_tests(tests, conf)
    only = set(args.tests.split(",")) if args.tests else None
    group_tests = None
    if args.group_protocol == "consumer":
        group_tests = {t.id for t in tests if not t.local and uses_groups(BUILD, t.id)}
    units = configure(select(tests, excluded, only, group_tests), conf)
    if args.no_cluster:
        units = [u for u in units if u.brokers == 1]
    cluster_conf = conf.get("cluster", {})
    out = (args.out.resolve() if args.out else OUT) / args.group_protocol
    shutil.rmtree(out, ignore_errors=True)
    logs = out / "logs"
    logs.mkdir(parents=True)
    pki = sec.make_pki(out / "pki") if shutil.which("openssl") else None
    if pki is None and any(u.security.endswith("SSL") for u in units):
        print("no openssl on PATH: the SSL and SASL_SSL listeners are not served", file=sys.stderr)
        return 2
    home = kafka_home(out)
    env_base = {k: v for k, v in os.environ.items() if k not in ("CI", "TESTS", "SUBTESTS", "TESTS_SKIP")}
    env_base.update({"LD_LIBRARY_PATH": f"{BUILD / 'src'}:{BUILD / 'src-cpp'}", "TEST_KAFKA_VERSION": args.kafka_version,
                     "KAFKA_PATH": str(home), "TEST_CONSUMER_GROUP_PROTOCOL": args.group_protocol,
                     "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}"})
    extra = {"kcoord.virtual.brokers": str(args.virtual_brokers)} if args.virtual_brokers > 1 else {}
    cleaner_extra = {k: str(v) for k, v in conf.get("cleaner", {}).get("settings", {}).items()}
    cluster_extra = {k: str(v) for k, v in cluster_conf.get("settings", {}).items()}
    cluster_node = {k: str(v) for k, v in cluster_conf.get("node_settings", {}).items()}
    servers: dict[tuple[str, bool, int], Server | ClusterServer] = {
        (s, c, b): (ClusterServer(s, out / "servers", {**extra, **cluster_extra}, pki, b, cluster_node) if b > 1 else
                    Server(s, out / "servers", {**extra, **(cleaner_extra if c else {})}, pki, cleaner=c))
        for s, c, b in sorted({(u.scenario, u.cleaner, u.brokers) for u in units})}
    attempts: dict[str, list[res.Outcome]] = {}
    lock = threading.Lock()
    t_start = time.monotonic()
    n_done = [0]

    def one(unit: Unit, attempt: int) -> bool:
        got = run_unit(unit, servers[(unit.scenario, unit.cleaner, unit.brokers)], attempt, env_base, logs)
        with lock:
            n_done[0] += 1
            for name, o in got.items():
                attempts.setdefault(name, []).append(o)
            states = ", ".join(f"{n.split('_', 1)[1]} {o.state}" for n, o in got.items())
            print(f"[{time.monotonic() - t_start:6.0f}s] {unit.key}{' (rerun)' if attempt > 1 else ''}: {states}",
                  flush=True)
        return all(o.state in ("passed", "skipped") for o in got.values())

    print(f"librdkafka {LIBRDKAFKA} test suite against kcoord: {sum(len(u.tests) for u in units)} tests in "
          f"{len(units)} runner processes, {args.jobs} at a time, group.protocol={args.group_protocol}, "
          f"KAFKA_PATH={home}", flush=True)
    try:
        # Longest first (by the committed table's seconds) so the tail of the run is short.
        committed = load_committed(args.group_protocol)
        units.sort(key=lambda u: -sum((committed.get(t.name, {}).get("seconds") or 60) for t in u.tests))
        with ThreadPoolExecutor(args.jobs) as pool:
            firsts = list(zip(units, pool.map(lambda u: one(u, 1), units), strict=True))
        again = [u for u, ok in firsts if not ok]
        if args.check and not args.update and committed:
            # In CI the rerun is for a timing accident of a test that passes; a test the
            # committed table already records as not passing is not run twice.
            again = [u for u in again
                     if any(committed.get(t.name, {}).get("result") in (None, "passed", "flaky")
                            for t in u.tests)]
        if again:
            print(f"rerunning {len(again)} test ids once, each in a fresh runner process", flush=True)
            with ThreadPoolExecutor(args.jobs) as pool:
                list(pool.map(lambda u: one(u, 2), again))
    finally:
        for s in servers.values():
            s.stop()
    wall = time.monotonic() - t_start

    diagnoses = conf.get("diagnosis", {})
    rows = []
    for u in units:
        for t in u.tests:
            tries = attempts.get(t.name, [res.Outcome()])
            result = res.row_result(tries)
            last_bad = next((o for o in reversed(tries) if o.state != "passed"), tries[-1])
            d = diagnosis(diagnoses, t.name, args.group_protocol) if result not in ("passed",) else {}
            rows.append(res.Row(id=t.id, name=t.name, scenario=u.scenario, brokers=u.brokers, result=result,
                                seconds=tries[-1].seconds if result != "flaky" else tries[-1].seconds,
                                attempts=[o.state for o in tries],
                                failure=last_bad.failure if result != "passed" else "",
                                reason=d.get("reason", ""), owner=d.get("owner", ""),
                                kafka_differs=d.get("kafka_differs", "")))
    rows.sort(key=lambda r: r.name)
    meta = {"librdkafka": LIBRDKAFKA, "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "group_protocol": args.group_protocol, "jobs": args.jobs, "wall_seconds": round(wall),
            "cores": os.cpu_count(), "kafka_version": args.kafka_version,
            "server_restarts": {v.name: v.restarts for v in servers.values()},
            "cleaner": {v.name: {"cpu_seconds": round(v.sidecar_cpu), "wall_seconds": round(v.sidecar_wall)}
                        for v in servers.values() if v.cleaner},
            "cluster": {v.name: {"nodes": v.nodes, "start_seconds": v.start_seconds, "wall_seconds": round(v.wall)}
                        for v in servers.values() if isinstance(v, ClusterServer)},
            "selection": "all" if not only else sorted(only)}
    table = {"meta": meta, "excluded": excluded, "tests": [r.to_json() for r in rows]}
    (out / "results.json").write_text(json.dumps(table, indent=1) + "\n")
    (out / "results.md").write_text(res.render_full_table(rows) + "\n")

    passing = sum(r.passing for r in rows)
    print(f"\nlibrdkafka suite: {passing} of {len(rows)} tests pass ({wall / 60:.1f} min; table: {out}/results.md)")
    for v in servers.values():
        if v.cleaner:
            print(f"log cleaner (kcoord sidecar) beside the {v.name} server: {v.sidecar_cpu:.0f} CPU seconds "
                  f"in {v.sidecar_wall:.0f} s")
    for r in rows:
        if not r.passing:
            print(f"  {r.name}: {r.result}: {r.reason or 'NOT DIAGNOSED'} [{r.failure}]")
    stale = [r.name for r in rows if r.passing and diagnosis(diagnoses, r.name, args.group_protocol)]
    if stale:
        print(f"diagnosed as failing in suite.toml but passing now: {', '.join(stale)}")

    rc = 0
    committed = load_committed(args.group_protocol)
    if committed:
        regressions, newly = res.compare(committed, rows)
        for r in newly:
            print(f"NEWLY PASSING: {r.name} (run `make rdkafka-suite ARGS=--update` to record it)")
        for r in regressions:
            print(f"REGRESSION: {r.name} passed in the committed table and failed twice now: {r.failure}")
        if regressions and args.check:
            rc = 1
    elif args.check:
        print(f"no committed table {COMMITTED[args.group_protocol]}: nothing to compare against")
    if args.update:
        if only:
            print("--update with --tests: merging these tests into the committed table")
            old = json.loads(COMMITTED[args.group_protocol].read_text()) if COMMITTED[args.group_protocol].exists() else None
            if old:
                names = {r.name for r in rows}
                table["tests"] = sorted([t for t in old["tests"] if t["name"] not in names] + table["tests"],
                                        key=lambda t: t["name"])
                table["meta"] = {**old["meta"], "date": meta["date"]}
        COMMITTED[args.group_protocol].write_text(json.dumps(table, indent=1) + "\n")
        update_doc(args.group_protocol)
    return rc


def diagnosis(diagnoses: dict, name: str, protocol: str) -> dict:
    """A test's diagnosis in suite.toml, if it applies to this group protocol (an entry with
    group_protocol = "consumer" is about the KIP-848 run only)."""
    d = diagnoses.get(name, {})
    return d if d.get("group_protocol", protocol) == protocol else {}


def load_committed(protocol: str) -> dict[str, dict]:
    path = COMMITTED[protocol]
    if not path.exists():
        return {}
    return {t["name"]: t for t in json.loads(path.read_text())["tests"]}


def doc_section(protocol: str) -> str:
    data = json.loads(COMMITTED[protocol].read_text())
    rows = [res.Row(**t) for t in data["tests"]]
    # Reasons are re-read from suite.toml so a diagnosis can be written after the run.
    conf = load_suite_toml()
    diagnoses = conf.get("diagnosis", {})
    for r in rows:
        d = diagnosis(diagnoses, r.name, protocol)
        if not r.passing and d:
            r.reason, r.owner, r.kafka_differs = d.get("reason", ""), d.get("owner", ""), d.get("kafka_differs", "")
    notes = {name: n for name, n in conf.get("note", {}).items() if isinstance(n, str)}
    for r in rows:  # a test that passed only on the rerun keeps its diagnosis in view
        d = diagnosis(diagnoses, r.name, protocol)
        if r.result == "flaky" and d.get("reason") and r.name not in notes:
            notes[r.name] = d["reason"]
    return res.render_markdown(data["meta"], rows, data["excluded"], notes)


def update_doc(protocol: str, check: bool = False) -> int:
    start, end = MARKERS[protocol]
    text = DOC.read_text()
    if start not in text:
        if protocol != "classic":
            return 0
        raise SystemExit(f"{DOC.relative_to(ROOT)} has no {start} section")
    new = res.replace_section(text, start, end, doc_section(protocol))
    if check:
        return 0 if new == text else 1
    if new != text:
        DOC.write_text(new)
    return 0


def list_cmd(args: argparse.Namespace) -> int:
    conf = load_suite_toml()
    tests = res.catalog((BUILD / "tests" / "test.c").read_text(errors="replace"))
    excluded = excluded_tests(tests, conf)
    for u in configure(select(tests, excluded, None, None), conf):
        grp = " [group]" if uses_groups(BUILD, u.id) else ""
        nodes = f" [{u.brokers} nodes]" if u.brokers > 1 else ""
        print(f"{u.key}{grp}{nodes}: {', '.join(t.name for t in u.tests)}")
    print("\nexcluded:")
    for name, why in excluded.items():
        print(f"  {name}: {why}")
    return 0


def _terminate(*_) -> None:
    STOPPING.set()
    for proc in list(RUNNING):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    sys.exit(143)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--tests", help="comma-separated test ids or names (default: every selected test)")
    r.add_argument("--jobs", type=int, default=3, help="test ids run at the same time against one server")
    r.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic",
                   help="consumer: TEST_CONSUMER_GROUP_PROTOCOL=consumer (KIP-848), the group tests only")
    r.add_argument("--virtual-brokers", type=int, default=1,
                   help="kcoord.virtual.brokers: one kcoord answering as N brokers (librdkafka's clusters have 3)")
    r.add_argument("--kafka-version", default=KAFKA_VERSION,
                   help=f"TEST_KAFKA_VERSION, what the tests gate their features on (default {KAFKA_VERSION})")
    r.add_argument("--out", type=Path, help=f"the run's directory (default {OUT.relative_to(ROOT)})")
    r.add_argument("--no-cluster", action="store_true",
                   help="leave out the test ids that run against a three-node cluster (suite.toml's [cluster])")
    r.add_argument("--build", type=Path, help="a librdkafka tree whose tests/test-runner to run instead of "
                   "the cached build (a scratch copy with one test patched, to check a diagnosis)")
    r.add_argument("--check", action="store_true", help="exit 1 on a regression against the committed table")
    r.add_argument("--update", action="store_true", help="write the committed table and its section of docs/compatibility.md")
    sub.add_parser("list")
    rd = sub.add_parser("doc")
    rd.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "run":
        if args.build:
            global BUILD
            BUILD = args.build.resolve()
        # A SIGTERM (CI's time limit, a killed make) still stops the servers and runners it started.
        signal.signal(signal.SIGTERM, _terminate)
        return run(args)
    if args.cmd == "list":
        return list_cmd(args)
    rc = 0
    for protocol in COMMITTED:
        if COMMITTED[protocol].exists():
            rc |= update_doc(protocol, check=args.check)
    return rc


if __name__ == "__main__":
    sys.exit(main())
