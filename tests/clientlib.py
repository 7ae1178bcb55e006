"""Run real Kafka clients (Java kafka-clients, kafkajs, kcat) against kcoord, always bounded.

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
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache"
KJAR_LIB = CACHE / "kjar" / "lib"
JAVA_SRC = ROOT / "tests" / "compat" / "java"
JAVA_CLASSES = CACHE / "java-classes"
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
                          timed_out)
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
    return run(["node", NODE_DIR / script, *(str(a) for a in args)], timeout=timeout, cwd=NODE_DIR,
               check=check)


def kafkajs(*args: str | int, timeout: float = DEFAULT_TIMEOUT, check: bool = True) -> ClientResult:
    """tests/compat/node/client.js: admin | produce | consume."""
    return run_node("client.js", *args, timeout=timeout, check=check)


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
