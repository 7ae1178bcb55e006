"""A kcoord server as a child process on free loopback ports, for tests: start, stop, kill,
restart, its log, its bootstrap servers and (when on) its control API."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from kcoord.server.control.client import AsyncControlClient, ControlClient


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kcoord_command() -> list[str]:
    """`kcoord` beside this interpreter (a console script runs with its own directory first on
    sys.path, so a project's own `server` package cannot shadow kcoord's), else `-m kcoord.server`."""
    script = Path(sys.executable).parent / "kcoord"
    if script.exists():
        return [str(script)]
    found = shutil.which("kcoord")
    return [found] if found else [sys.executable, "-m", "kcoord.server"]


# What a test wants from a broker that differs from Kafka's defaults: the first rebalance of
# each group without Kafka's 3 s wait (Testcontainers users set the same).
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


class KcoordProcess:
    """A kcoord server process. `bootstrap` is what clients are given; `control` is the
    control API's client when `control=True` (the default of the pytest plugin's servers)."""

    def __init__(self, log_dir: Path, port: int | None = None, overrides: dict[str, str] | None = None,
                 control: bool = False, cwd: Path | None = None, host: str = "127.0.0.1",
                 prefix: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        self.log_dir = Path(log_dir)
        self.env = dict(env or {})  # added to this process's environment (KCOORD_CRASH_AT, say)
        self.prefix = list(prefix or [])  # runs the server under it (`ip netns exec NS`, say)
        self.host = host  # the Kafka listener's address (another local address, say)
        self.port = port or free_port()
        self.control_port = free_port() if control else None
        self.overrides = {
            "listeners": f"PLAINTEXT://{host}:{self.port}",
            "log.dirs": str(log_dir),
            **TEST_DEFAULTS,
            **({"kcoord.control.listener": f"http://127.0.0.1:{self.control_port}"} if control else {}),
            **(overrides or {}),
        }
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.output = self.log_dir.parent / f"kcoord-{self.port}.log"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def control_url(self) -> str | None:
        return f"http://127.0.0.1:{self.control_port}" if self.control_port else None

    @property
    def control(self) -> ControlClient:
        if self.control_url is None:
            raise RuntimeError("this kcoord was started without its control API")
        return ControlClient(self.control_url)

    @property
    def async_control(self) -> AsyncControlClient:
        if self.control_url is None:
            raise RuntimeError("this kcoord was started without its control API")
        return AsyncControlClient(self.control_url)

    def start(self, timeout: float = 60.0) -> KcoordProcess:
        """Start and return once the Kafka listener accepts connections (and the control API
        answers, when on)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        args = self.prefix + kcoord_command() + ["serve"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(args, cwd=self.cwd, stdout=out, stderr=subprocess.STDOUT,
                                         env={**os.environ, **self.env} if self.env else None)
        deadline = time.monotonic() + timeout
        ports = [(self.host, self.port)] + ([("127.0.0.1", self.control_port)] if self.control_port else [])
        while ports:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kcoord exited with {self.proc.returncode}:\n{self.log_text()}")
            if time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError(f"kcoord did not listen on {ports} within {timeout} s:\n{self.log_text()}")
            try:
                with socket.create_connection(ports[0], timeout=0.5):
                    ports.pop(0)
            except OSError:
                time.sleep(0.01)
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def restart(self) -> KcoordProcess:
        self.stop()
        return self.start()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        try:
            return self.output.read_text(errors="replace")
        except OSError:
            return ""
