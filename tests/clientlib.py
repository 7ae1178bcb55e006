"""Run real Kafka clients (Java kafka-clients, kafkajs, kcat, Go's sarama) against kcoord, always bounded.

Every client retries a refused connection for a long time, so every run here has a process
timeout; on a timeout the process group is killed and ClientError carries what it printed.
The Java and Node programs print one JSON object per line on stdout (see `records`).

A missing client is a failure with a message saying how to install it (`make clients`), never a
skip: CI installs them all via scripts/setup-clients.sh.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
KJAR_LIB = CACHE / "kjar" / "lib"
JAVA_SRC = ROOT / "tests" / "compat" / "java"
JAVA_CLASSES = CACHE / "java-classes"
# Java kafka-clients 4.x (transactions v2): its own jars, sources and classes
KJAR4_LIB = CACHE / "kjar4" / "lib"
JAVA4_SRC = ROOT / "tests" / "compat" / "java4"
JAVA4_CLASSES = CACHE / "java4-classes"
NODE_DIR = ROOT / "tests" / "compat" / "node"
SLF4J = [Path("/usr/share/java/slf4j-api.jar"), Path("/usr/share/java/slf4j-simple.jar")]
INSTALL_HINT = "run `make clients` (bash scripts/setup-clients.sh) to install the real clients"

DEFAULT_TIMEOUT = 60.0


class ClientError(AssertionError):
    """A client run failed, timed out or could not start; the message has its output."""


@dataclass
class ClientResult:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    stdout_bytes: bytes = b""

    def describe(self) -> str:
        return (
            f"$ {' '.join(self.args)}\n-> exit {self.returncode}"
            f"{' (TIMED OUT)' if self.timed_out else ''}\n"
            f"--- stdout ---\n{self.stdout[-8000:]}\n--- stderr ---\n{self.stderr[-8000:]}"
        )

    def records(self) -> list[dict[str, Any]]:
        """The JSON-object lines of stdout (other lines are ignored)."""
        out = []
        for line in self.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return out

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r.get("kind") == kind]

    def one(self, kind: str) -> dict[str, Any]:
        found = self.kinds(kind)
        if len(found) != 1:
            raise ClientError(f"expected exactly one {kind!r} line, got {len(found)}\n{self.describe()}")
        return found[0]


def run(
    args: Sequence[str | os.PathLike[str]],
    timeout: float = DEFAULT_TIMEOUT,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
    input: bytes | None = None,
) -> ClientResult:
    """Run a command with a hard timeout (the whole process group is killed on expiry)."""
    argv = [str(a) for a in args]
    full_env = {**os.environ, **(env or {})}
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd or ROOT,
            env=full_env,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError as e:
        raise ClientError(f"cannot run {argv[0]}: {e}; {INSTALL_HINT}") from None
    timed_out = False
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    result = ClientResult(argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
                          timed_out, out)
    if check and (timed_out or proc.returncode != 0):
        raise ClientError(f"client run failed\n{result.describe()}")
    return result


# ---- Java ----

_java_lock = threading.Lock()


def _require(path: Path, what: str) -> None:
    if not path.exists():
        raise ClientError(f"{what} not found at {path}; {INSTALL_HINT}")


def java_classpath() -> str:
    return os.pathsep.join([str(JAVA_CLASSES), str(KJAR_LIB / "*"), *(str(j) for j in SLF4J)])


def compile_java() -> Path:
    """Compile tests/compat/java/*.java into .cache/java-classes when any source is newer."""
    with _java_lock:
        if shutil.which("javac") is None:
            raise ClientError(f"javac not found; {INSTALL_HINT}")
        _require(KJAR_LIB / "kafka-clients.jar", "the Java kafka-clients jar")
        for jar in SLF4J:
            _require(jar, "slf4j (Debian package libslf4j-java)")
        sources = sorted(JAVA_SRC.glob("*.java"))
        if not sources:
            raise ClientError(f"no Java sources in {JAVA_SRC}")
        stamp = JAVA_CLASSES / ".compiled"
        newest = max(s.stat().st_mtime for s in sources)
        if stamp.exists() and stamp.stat().st_mtime >= newest:
            return JAVA_CLASSES
        JAVA_CLASSES.mkdir(parents=True, exist_ok=True)
        run(
            ["javac", "-nowarn", "-encoding", "UTF-8", "-d", JAVA_CLASSES, "-cp", str(KJAR_LIB / "*"), *sources],
            timeout=120,
        )
        stamp.touch()
        return JAVA_CLASSES


def java4_classpath() -> str:
    return os.pathsep.join([str(JAVA4_CLASSES), str(KJAR4_LIB / "*"), *(str(j) for j in SLF4J)])


def compile_java4() -> Path:
    """Compile tests/compat/java4/*.java (with TxnCopier and KcoordClient of tests/compat/java)
    against kafka-clients 4.x into .cache/java4-classes when any source is newer."""
    with _java_lock:
        if shutil.which("javac") is None:
            raise ClientError(f"javac not found; {INSTALL_HINT}")
        jars = sorted(KJAR4_LIB.glob("kafka-clients-4*.jar"))
        if not jars:
            raise ClientError(f"the Java kafka-clients 4.x jar not found in {KJAR4_LIB}; {INSTALL_HINT}")
        sources = [*sorted(JAVA4_SRC.glob("*.java")), JAVA_SRC / "TxnCopier.java", JAVA_SRC / "KcoordClient.java"]
        stamp = JAVA4_CLASSES / ".compiled"
        newest = max(s.stat().st_mtime for s in sources)
        if stamp.exists() and stamp.stat().st_mtime >= newest:
            return JAVA4_CLASSES
        JAVA4_CLASSES.mkdir(parents=True, exist_ok=True)
        run(["javac", "-nowarn", "-encoding", "UTF-8", "-d", JAVA4_CLASSES, "-cp", str(KJAR4_LIB / "*"), *sources],
            timeout=120)
        stamp.touch()
        return JAVA4_CLASSES


def run_java(main: str, *args: str | int, timeout: float = DEFAULT_TIMEOUT, check: bool = True) -> ClientResult:
    """Run a compiled Java main class with kafka-clients and slf4j-simple (logs at WARN, to stderr)."""
    compile_java()
    if shutil.which("java") is None:
        raise ClientError(f"java not found; {INSTALL_HINT}")
    return run(
        [
            "java",
            "-Xshare:auto",
            "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.logFile=System.err",
            "-cp",
            java_classpath(),
            main,
            *(str(a) for a in args),
        ],
        timeout=timeout,
        check=check,
    )


def kcoord_java(*args: str | int, timeout: float = DEFAULT_TIMEOUT, check: bool = True) -> ClientResult:
    """tests/compat/java/KcoordClient.java: admin | findcoordinator | produce | consume."""
    return run_java("KcoordClient", *args, timeout=timeout, check=check)


# ---- Node (kafkajs) ----


def run_node(script: str, *args: str | int, timeout: float = DEFAULT_TIMEOUT, check: bool = True) -> ClientResult:
    """Run tests/compat/node/<script> with node (kafkajs from tests/compat/node/node_modules)."""
    if shutil.which("node") is None:
        raise ClientError(f"node not found; {INSTALL_HINT}")
    _require(NODE_DIR / "node_modules" / "kafkajs" / "package.json", "kafkajs")
    _require(NODE_DIR / script, "the node script")
    # The script's own deadline (client.js) ends it a little before the process timeout, so
    # that it reports where it was instead of being killed.
    env = {"KCOORD_NODE_DEADLINE_MS": str(int(max(timeout - 5, timeout * 0.9) * 1000))}
    return run(["node", NODE_DIR / script, *(str(a) for a in args)], timeout=timeout, cwd=NODE_DIR,
               env=env, check=check)


def kafkajs(*args: str | int, timeout: float = DEFAULT_TIMEOUT, check: bool = True) -> ClientResult:
    """tests/compat/node/client.js: admin | produce | consume."""
    return run_node("client.js", *args, timeout=timeout, check=check)


# ---- Go: sarama (Debian's golang-github-shopify-sarama-dev) ----

GO_SRC = ROOT / "tests" / "compat" / "go"
GO_CACHE = CACHE / "go"
GO_PATH = Path("/usr/share/gocode")  # where Debian's Go library packages put their sources
_go_lock = threading.Lock()


def compile_sarama() -> Path:
    """tests/compat/go/sarama built against Debian's sarama in GOPATH mode (no module download),
    once per source change."""
    exe = GO_CACHE / "sarama-client"
    src = GO_SRC / "sarama" / "main.go"
    with _go_lock:
        if exe.exists() and exe.stat().st_mtime >= src.stat().st_mtime:
            return exe
        if shutil.which("go") is None:
            raise ClientError(f"go not found; {INSTALL_HINT}")
        _require(GO_PATH / "src" / "github.com" / "Shopify" / "sarama", "sarama (golang-github-shopify-sarama-dev)")
        _require(GO_PATH / "src" / "github.com" / "xdg-go" / "scram", "xdg-go/scram (golang-github-xdg-go-scram-dev)")
        GO_CACHE.mkdir(parents=True, exist_ok=True)
        env = {"GO111MODULE": "off", "GOPATH": str(GO_PATH), "GOCACHE": str(GO_CACHE / "build"),
               "GOFLAGS": ""}
        built = GO_CACHE / f"sarama-client.{os.getpid()}"  # renamed into place: other workers may build too
        run(["go", "build", "-o", built, "./tests/compat/go/sarama"], timeout=300, env=env)
        os.replace(built, exe)
    return exe


def sarama(*args: str | int, timeout: float = DEFAULT_TIMEOUT, check: bool = True,
           env: dict[str, str] | None = None) -> ClientResult:
    """tests/compat/go/sarama: produce | consume | readhex (see its header; `env` carries the security)."""
    return run([compile_sarama(), *(str(a) for a in args)], timeout=timeout, check=check, env=env)


# ---- kcat ----


def kcat(*args: str | int, timeout: float = 30.0, check: bool = True, input: bytes | None = None) -> ClientResult:
    """Run kcat (librdkafka 2.0.x on Debian 12) with the given arguments."""
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    if exe is None:
        raise ClientError(f"kcat not found; {INSTALL_HINT}")
    return run([exe, *(str(a) for a in args)], timeout=timeout, check=check, input=input)


def kcat_metadata(bootstrap: str, topic: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """`kcat -L -J`: the cluster's metadata as kcat (librdkafka) sees it."""
    args: list[str | int] = ["-b", bootstrap, "-L", "-J", "-m", "10", "-X", "socket.timeout.ms=10000"]
    if topic is not None:
        args += ["-t", topic]
    res = kcat(*args, timeout=timeout)
    try:
        return json.loads(res.stdout)
    except json.JSONDecodeError:
        raise ClientError(f"kcat -L -J printed no JSON\n{res.describe()}") from None


# ---- long-running group members (background processes) ----
#
# A member runs in its own process so that a test can close it cleanly (the line "close" on its
# stdin, or end of stdin: the client's own close, which sends LeaveGroup) or SIGKILL it (no
# LeaveGroup). Each prints one JSON object per line:
#   {"kind": "assigned", "partitions": [0, 3], "generation": 5}   (eager protocol: full assignment)
#   {"kind": "revoked" | "lost", "partitions": [...]}
#   {"kind": "records", "records": [[partition, offset, key], ...]}   one poll batch
#   {"kind": "committed", "offsets": {"0": 17}}   after a synchronous commit succeeded
#   {"kind": "commit_error", ...}, {"kind": "error", ...}, {"kind": "closed"}
# Every member commits synchronously after each poll batch and, for the partitions being
# revoked, in its revoke callback, so no processed record is redelivered by a rebalance.

MEMBER_DEADLINE = 240.0


class Background:
    """A client process whose JSON stdout lines are collected while it runs (always bounded:
    the process group is SIGKILLed after `deadline` seconds if nobody ended it before)."""

    def __init__(self, args: Sequence[str | os.PathLike[str]], name: str, cwd: Path | None = None,
                 deadline: float = MEMBER_DEADLINE):
        self.name = name
        self.args = [str(a) for a in args]
        self._cond = threading.Condition()
        self._events: list[dict[str, Any]] = []
        self._stdout: list[str] = []
        self._stderr: list[str] = []
        try:
            self.proc = subprocess.Popen(self.args, cwd=cwd or ROOT, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         start_new_session=True, text=True, bufsize=1)
        except FileNotFoundError as e:
            raise ClientError(f"cannot run {self.args[0]}: {e}; {INSTALL_HINT}") from None
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()
        self._killer = threading.Timer(deadline, self._signal_group, (signal.SIGKILL,))
        self._killer.daemon = True
        self._killer.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            event = None
            if line.startswith("{"):
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    event = None
            with self._cond:
                self._stdout.append(line)
                if isinstance(event, dict):
                    self._events.append(event)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                self._stderr.append(line.rstrip("\n"))
                del self._stderr[:-300]

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # -- what it printed --

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        with self._cond:
            return [e for e in self._events if kind is None or e.get("kind") == kind]

    def assignment(self) -> set[int] | None:
        """The partitions it owns now per its callbacks (None before its first assignment)."""
        owned: set[int] | None = None
        for e in self.events():
            if e["kind"] == "assigned":
                # the consumer protocol's callbacks are incremental: they add to what it owns
                owned = (owned or set()) | set(e["partitions"]) if e.get("incremental") else set(e["partitions"])
            elif e["kind"] in ("revoked", "lost") and owned is not None:
                owned -= set(e["partitions"])
        return owned

    def stderr_lines(self) -> list[str]:
        """The last 300 lines it wrote to stderr (librdkafka's log lines, Java's warnings)."""
        with self._cond:
            return list(self._stderr)

    def consumed(self) -> list[tuple[int, int, str | None]]:
        """Every record it processed, as (partition, offset, key), in order."""
        return [(r[0], r[1], r[2]) for e in self.events("records") for r in e["records"]]

    def describe(self) -> str:
        with self._cond:
            out, err = "\n".join(self._stdout[-60:]), "\n".join(self._stderr[-60:])
        return (f"--- {self.name}: $ {' '.join(self.args)[:300]} (exit {self.proc.poll()}) ---\n"
                f"--- stdout (tail) ---\n{out[-6000:]}\n--- stderr (tail) ---\n{err[-6000:]}")

    def wait_for(self, predicate, timeout: float, what: str):
        """Wait until predicate(self) is truthy and return its value; ClientError on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                self._cond.release()
                try:
                    value = predicate(self)
                finally:
                    self._cond.acquire()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, 0.2))
        raise ClientError(f"{self.name}: timed out after {timeout} s waiting for {what}\n{self.describe()}")

    # -- ending it --

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout: float = 30.0) -> int:
        """Ask for a clean close (the client's close: LeaveGroup for a dynamic member)."""
        if self.alive():
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("close\n")
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ClientError(f"{self.name}: did not close within {timeout} s\n{self.describe()}") from None
        self._finish()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL the process group: the member vanishes without a LeaveGroup."""
        self._signal_group(signal.SIGKILL)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._finish()

    def _finish(self) -> None:
        self._killer.cancel()
        for t in self._threads:
            t.join(5)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass


def python_member(lib: str, bootstrap: str, topic: str, group: str, *, instance_id: str | None = None,
                  session_timeout_ms: int = 10000, heartbeat_interval_ms: int = 1000,
                  name: str | None = None, deadline: float = MEMBER_DEADLINE,
                  conf: dict[str, Any] | None = None, group_protocol: str = "classic") -> Background:
    """A consumer-group member in its own Python process; lib: confluent | kafka-python | aiokafka.

    All three use the roundrobin assignor (eager), so they can share one group. `conf`: extra
    librdkafka settings (confluent only). group_protocol="consumer" (confluent only): KIP-848,
    the server assigns; a topic starting with ^ is a regex subscription."""
    if lib not in ("confluent", "kafka-python", "aiokafka"):
        raise ValueError(lib)
    if conf and lib != "confluent":
        raise ValueError("conf is for confluent members")
    cfg = {"lib": lib, "bootstrap": bootstrap, "topic": topic, "group": group, "instance_id": instance_id,
           "session_timeout_ms": session_timeout_ms, "heartbeat_interval_ms": heartbeat_interval_ms,
           "client_id": name or lib, "conf": conf or {}, "group_protocol": group_protocol}
    return Background([sys.executable, Path(__file__).resolve(), "member", json.dumps(cfg)],
                      name or lib, deadline=deadline)


def java_member(bootstrap: str, topic: str, group: str, *, instance_id: str | None = None,
                session_timeout_ms: int = 10000, name: str = "java",
                deadline: float = MEMBER_DEADLINE, conf: dict[str, Any] | None = None) -> Background:
    """KcoordClient's `member` mode: a Java kafka-clients consumer (roundrobin) until told to
    close. `conf`: extra consumer settings (values without commas)."""
    compile_java()
    if shutil.which("java") is None:
        raise ClientError(f"java not found; {INSTALL_HINT}")
    extra = ",".join(f"{k}={v}" for k, v in (conf or {}).items())
    return Background(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                       f"-Dkcoord.conf={extra}",
                       "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                       "-Dorg.slf4j.simpleLogger.logFile=System.err", "-cp", java_classpath(),
                       "KcoordClient", "member", bootstrap, topic, group, instance_id or "",
                       str(session_timeout_ms), name], name, deadline=deadline)


def java4_member(bootstrap: str, topic: str, group: str, *, instance_id: str | None = None, name: str = "java4",
                 assignor: str | None = None, deadline: float = MEMBER_DEADLINE) -> Background:
    """tests/compat/java4/ConsumerProtocolMember.java: a Java kafka-clients 4.x consumer with
    group.protocol=consumer (KIP-848) until told to close; a topic starting with ^ is a regex
    subscription (SubscriptionPattern); `assignor`: group.remote.assignor."""
    compile_java4()
    if shutil.which("java") is None:
        raise ClientError(f"java not found; {INSTALL_HINT}")
    return Background(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                       "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                       "-Dorg.slf4j.simpleLogger.logFile=System.err", "-cp", java4_classpath(),
                       "ConsumerProtocolMember", bootstrap, topic, group, instance_id or "", name, assignor or ""],
                      name, deadline=deadline)


def java4_share_member(bootstrap: str, topic: str, group: str, *, name: str = "java4-share",
                       deadline: float = MEMBER_DEADLINE) -> Background:
    """tests/compat/java4/ShareMember.java: a Java kafka-clients 4.x KafkaShareConsumer of `group`
    until told to close; the line "describe" prints the Admin client's view of the share group."""
    compile_java4()
    if shutil.which("java") is None:
        raise ClientError(f"java not found; {INSTALL_HINT}")
    return Background(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                       "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                       "-Dorg.slf4j.simpleLogger.logFile=System.err", "-cp", java4_classpath(),
                       "ShareMember", bootstrap, topic, group, name], name, deadline=deadline)


def sarama_member(bootstrap: str, topic: str, group: str, *, name: str = "sarama",
                  deadline: float = MEMBER_DEADLINE) -> Background:
    """A sarama group member (roundrobin, session 10 s, heartbeats every 1 s) in its own process,
    printing what the Python members print; its close sends LeaveGroup."""
    return Background([compile_sarama(), "member", bootstrap, topic, group, name], name, deadline=deadline)


def balanced(members: Sequence[Background], partitions: int) -> list[set[int]] | None:
    """Every member's current assignment if they are disjoint, cover range(partitions) and none is
    empty (when there are enough partitions to go round); None otherwise."""
    owned = [m.assignment() for m in members]
    if any(o is None for o in owned):
        return None
    sets = [o for o in owned if o is not None]
    if sum(len(o) for o in sets) != partitions or set().union(*sets) != set(range(partitions)):
        return None
    if len(members) <= partitions and not all(sets):
        return None
    return sets


def wait_balanced(members: Sequence[Background], partitions: int, timeout: float, what: str) -> list[set[int]]:
    """Wait until `balanced`; a member that exits meanwhile, or the timeout, fails with every
    member's output."""
    deadline = time.monotonic() + timeout
    while True:
        got = balanced(members, partitions)
        if got is not None:
            return got
        dead = [m for m in members if not m.alive()]
        if dead or time.monotonic() > deadline:
            why = f"{dead[0].name} exited" if dead else f"timed out after {timeout} s"
            raise ClientError(f"{what}: {why}; assignments {[m.assignment() for m in members]}\n"
                              + "\n".join(m.describe() for m in members))
        time.sleep(0.1)


# The member processes themselves (`python tests/clientlib.py member CONFIG_JSON`).

_emit_lock = threading.Lock()


def _emit(kind: str, **fields: Any) -> None:
    with _emit_lock:
        # ts: wall-clock seconds, comparable across the member processes of one test
        sys.stdout.write(json.dumps({"kind": kind, "ts": time.time(), **fields}) + "\n")
        sys.stdout.flush()


def _watch_stdin(stop: threading.Event) -> None:
    """'close' on stdin, or its end (the test went away), asks the member to close cleanly."""
    def watch() -> None:
        for line in sys.stdin:
            if line.strip() == "close":
                break
        stop.set()
    threading.Thread(target=watch, daemon=True).start()


def _key(k: bytes | None) -> str | None:
    return None if k is None else k.decode(errors="replace")


def _member_confluent(cfg: dict[str, Any], stop: threading.Event) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    topic = cfg["topic"]
    conf = {"bootstrap.servers": cfg["bootstrap"], "group.id": cfg["group"], "client.id": cfg["client_id"],
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "roundrobin",
            "session.timeout.ms": cfg["session_timeout_ms"],
            "heartbeat.interval.ms": cfg["heartbeat_interval_ms"],
            "socket.timeout.ms": 10000, "reconnect.backoff.max.ms": 1000}
    if cfg.get("group_protocol") == "consumer":
        # KIP-848: the server assigns and sets the session and heartbeat interval
        for k in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
            del conf[k]
        conf["group.protocol"] = "consumer"
    if cfg["instance_id"]:
        conf["group.instance.id"] = cfg["instance_id"]
    conf.update(cfg.get("conf") or {})
    pending: dict[int, int] = {}

    def generation(c: Consumer) -> int | None:
        # librdkafka's serialized group metadata: b"CGMDv2:" + int32 generation (host order) + ...
        md = c.consumer_group_metadata()
        if isinstance(md, bytes) and md.startswith(b"CGMDv2:"):
            return int.from_bytes(md[7:11], sys.byteorder, signed=True)
        return None

    def commit(c: Consumer, parts: set[int] | None = None) -> None:
        offsets = {p: o for p, o in pending.items() if parts is None or p in parts}
        if not offsets:
            return
        try:
            res = c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
        except KafkaException as e:
            _emit("commit_error", error=str(e.args[0]), offsets=offsets)
            return
        errors = {tp.partition: str(tp.error) for tp in res or [] if tp.error is not None}
        if errors:
            _emit("commit_error", error=errors, offsets=offsets)
            return
        for p, o in offsets.items():
            if pending.get(p) == o:
                del pending[p]
        _emit("committed", offsets={str(p): o for p, o in offsets.items()})

    # the consumer protocol and the cooperative assignor hand partitions out incrementally
    incremental = cfg.get("group_protocol") == "consumer" or "cooperative" in str(
        conf.get("partition.assignment.strategy", ""))

    def on_assign(c: Consumer, parts: list) -> None:
        _emit("assigned", partitions=sorted(tp.partition for tp in parts), generation=generation(c),
              topics=sorted({tp.topic for tp in parts}), incremental=incremental)

    def on_revoke(c: Consumer, parts: list) -> None:
        commit(c, {tp.partition for tp in parts})
        _emit("revoked", partitions=sorted(tp.partition for tp in parts))

    def on_lost(c: Consumer, parts: list) -> None:
        for tp in parts:
            pending.pop(tp.partition, None)
        _emit("lost", partitions=sorted(tp.partition for tp in parts))

    c = Consumer(conf)
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    while not stop.is_set():
        batch = []
        for m in c.consume(500, 0.2):
            if m.error() is not None:
                _emit("error", error=str(m.error()))
                continue
            batch.append([m.partition(), m.offset(), _key(m.key())])
            pending[m.partition()] = m.offset() + 1
        if batch:
            _emit("records", records=batch)
            commit(c)
    c.close()


def _member_kafka_python(cfg: dict[str, Any], stop: threading.Event) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    topic = cfg["topic"]
    c = KafkaConsumer(bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"], client_id=cfg["client_id"],
                      group_instance_id=cfg["instance_id"] or None, enable_auto_commit=False,
                      auto_offset_reset="earliest", partition_assignment_strategy=[RoundRobinPartitionAssignor],
                      session_timeout_ms=cfg["session_timeout_ms"],
                      heartbeat_interval_ms=cfg["heartbeat_interval_ms"], request_timeout_ms=15000,
                      reconnect_backoff_max_ms=1000)
    pending: dict[int, int] = {}

    def commit(parts: set[int] | None = None) -> None:
        offsets = {p: o for p, o in pending.items() if parts is None or p in parts}
        if not offsets:
            return
        try:
            c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
        except KafkaError as e:
            _emit("commit_error", error=repr(e), offsets=offsets)
            return
        for p, o in offsets.items():
            if pending.get(p) == o:
                del pending[p]
        _emit("committed", offsets={str(p): o for p, o in offsets.items()})

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            commit({tp.partition for tp in revoked})
            _emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):
            gen = c._coordinator._generation  # noqa: SLF001 - only for the test's report
            _emit("assigned", partitions=sorted(tp.partition for tp in assigned),
                  generation=getattr(gen, "generation_id", None))

        def on_partitions_lost(self, lost):
            for tp in lost:
                pending.pop(tp.partition, None)
            _emit("lost", partitions=sorted(tp.partition for tp in lost))

    # Know the topic's partitions before joining: otherwise kafka-python 3.0.12's first join
    # assigns nothing and a metadata-triggered rejoin follows, after which it was seen to hang
    # (no heartbeats, no SyncGroup handling) under CI load.
    deadline = time.monotonic() + 30
    while not c.partitions_for_topic(topic) and time.monotonic() < deadline:
        time.sleep(0.1)
    c.subscribe([topic], listener=Listener())
    while not stop.is_set():
        batch = []
        try:
            fetched = c.poll(200, max_records=500)
        except KafkaError as e:
            # kafka-python lets a retriable error (the server restarting) out of poll(): an
            # application retries it
            if not e.retriable:
                raise
            _emit("retry", error=repr(e))
            time.sleep(0.2)
            continue
        for tp, msgs in fetched.items():
            for m in msgs:
                batch.append([tp.partition, m.offset, _key(m.key)])
                pending[tp.partition] = m.offset + 1
        if batch:
            _emit("records", records=batch)
            commit()
    c.close(autocommit=False)


def _member_aiokafka(cfg: dict[str, Any], stop: threading.Event) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.errors import KafkaError

    topic = cfg["topic"]

    async def main() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=cfg["bootstrap"], group_id=cfg["group"],
                             client_id=cfg["client_id"], group_instance_id=cfg["instance_id"] or None,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=cfg["session_timeout_ms"],
                             heartbeat_interval_ms=cfg["heartbeat_interval_ms"], request_timeout_ms=15000)
        pending: dict[int, int] = {}

        async def commit(parts: set[int] | None = None) -> None:
            offsets = {p: o for p, o in pending.items() if parts is None or p in parts}
            if not offsets:
                return
            try:
                await c.commit({TopicPartition(topic, p): o for p, o in offsets.items()})
            except KafkaError as e:
                _emit("commit_error", error=repr(e), offsets=offsets)
                return
            for p, o in offsets.items():
                if pending.get(p) == o:
                    del pending[p]
            _emit("committed", offsets={str(p): o for p, o in offsets.items()})

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                await commit({tp.partition for tp in revoked})
                _emit("revoked", partitions=sorted(tp.partition for tp in revoked))

            async def on_partitions_assigned(self, assigned):
                _emit("assigned", partitions=sorted(tp.partition for tp in assigned),
                      generation=c._coordinator.generation)  # noqa: SLF001

        c.subscribe([topic], listener=Listener())
        await c.start()
        try:
            while not stop.is_set():
                batch = []
                for tp, msgs in (await c.getmany(timeout_ms=200, max_records=500)).items():
                    for m in msgs:
                        batch.append([tp.partition, m.offset, _key(m.key)])
                        pending[tp.partition] = m.offset + 1
                if batch:
                    _emit("records", records=batch)
                    await commit()
        finally:
            await c.stop()

    asyncio.run(main())


def _member_main(cfg: dict[str, Any]) -> int:
    stop = threading.Event()
    _watch_stdin(stop)
    _emit("started", lib=cfg["lib"], pid=os.getpid())
    run_member = {"confluent": _member_confluent, "kafka-python": _member_kafka_python,
                  "aiokafka": _member_aiokafka}[cfg["lib"]]
    try:
        run_member(cfg, stop)
    except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
        _emit("error", error=repr(e))
        return 1
    _emit("closed")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "member":
        sys.exit(_member_main(json.loads(sys.argv[2])))
    sys.stderr.write("usage: clientlib.py member CONFIG_JSON\n")
    sys.exit(2)
