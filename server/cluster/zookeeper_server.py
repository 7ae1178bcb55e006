"""A standalone ZooKeeper server from Debian's `zookeeper` package (scripts/setup-zookeeper.sh),
in its own data directory, for `kcoord cluster` and the tests' cluster fixture."""
from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

JAVA_DIR = Path("/usr/share/java")


def classpath() -> str:
    jars = [JAVA_DIR / "zookeeper.jar", JAVA_DIR / "zookeeper-jute.jar", JAVA_DIR / "slf4j-api.jar"]
    nop = JAVA_DIR / "slf4j-nop.jar"
    if nop.exists():
        jars.append(nop)
    extra = []
    for pattern in ("netty-*.jar", "commons-cli*.jar", "metrics-core*.jar", "snappy*.jar"):
        extra += sorted(glob.glob(str(JAVA_DIR / pattern)))
    missing = [str(j) for j in jars[:2] if not j.exists()]
    if missing or shutil.which("java") is None:
        raise FileNotFoundError("ZooKeeper is not installed (scripts/setup-zookeeper.sh installs Debian's "
                                f"zookeeper package): missing {', '.join(missing) or 'java'}")
    return ":".join([*map(str, jars), *extra])


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM when the process that started it dies (killed included),
    so no ZooKeeper outlives a `kcoord cluster` or a test session."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def installed() -> bool:
    try:
        classpath()
    except FileNotFoundError:
        return False
    return True


def four_letter(host: str, port: int, word: bytes = b"srvr", timeout: float = 2.0) -> str:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word)
        out = b""
        while chunk := s.recv(4096):
            out += chunk
    return out.decode(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ZooKeeperServer:
    def __init__(self, directory: Path, port: int = 0, host: str = "127.0.0.1") -> None:
        self.directory = Path(directory)
        self.host = host
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 60.0) -> ZooKeeperServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "data").mkdir(exist_ok=True)
        cfg = self.directory / "zoo.cfg"
        cfg.write_text(f"tickTime=500\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n"
                       f"dataDir={self.directory / 'data'}\nclientPort={self.port}\n"
                       f"clientPortAddress={self.host}\nadmin.enableServer=false\n"
                       "4lw.commands.whitelist=srvr,ruok,stat\n")
        log = open(self.directory / "zookeeper.log", "ab")  # noqa: SIM115 - the process owns it
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", classpath(), "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}: see {self.directory}/zookeeper.log")
            try:
                if "Zookeeper version" in four_letter(self.host, self.port):
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"ZooKeeper did not answer on {self.connect} within {timeout_s}s")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.proc = None
