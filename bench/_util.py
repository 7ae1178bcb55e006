"""Shared pieces of the benchmarks: start servers as subprocesses, encode requests, and a
closed-loop load generator (each connection sends a request when its previous answer lands).

Both the server under test and the ceiling it is compared with run as separate processes
and are driven by the same generator, so their numbers are comparable within one run.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kcoord.protocol.api import API_TABLE  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def start_kcoord(overrides: dict[str, str] | None = None, log_dir: str | None = None,
                 kcoord: str | None = None) -> tuple[subprocess.Popen[bytes], int, str]:
    """This tree's server (`python -m kcoord.server serve`), or another build's `kcoord` executable."""
    port = free_port()
    log_dir = log_dir or tempfile.mkdtemp(prefix="kcoord-bench-")
    opts = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": log_dir,
        "group.initial.rebalance.delay.ms": "0",
        "log.level": "WARNING",
        **(overrides or {}),
    }
    args = [kcoord, "serve"] if kcoord else [sys.executable, "-m", "kcoord.server", "serve"]
    for k, v in opts.items():
        args += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(args, cwd=ROOT)
    wait_listening(port, proc, timeout=60)
    return proc, port, log_dir


def start_bare(mode: str, workdir: str | None = None) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    args = [sys.executable, str(ROOT / "bench" / "_bare_server.py"), mode, str(port)]
    if workdir:
        args.append(workdir)
    proc = subprocess.Popen(args, cwd=ROOT)
    wait_listening(port, proc)
    return proc, port


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def encode_request(req: Any, version: int, correlation_id: int = 1, client_id: str = "bench") -> bytes:
    spec = API_TABLE[req.API_KEY]
    cid = client_id.encode()
    header = struct.pack(">hhih", req.API_KEY, version, correlation_id, len(cid)) + cid
    if spec.request_header_version(version) >= 2:
        header += b"\x00"
    body = bytes(req.encode(version=version))
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


class SyncClient:
    """A blocking one-request-at-a-time client for benchmark set-up steps."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.corr = 0

    def call(self, req: Any, version: int) -> Any:
        self.corr += 1
        self.sock.sendall(encode_request(req, version, self.corr))
        size = struct.unpack(">i", self._read(4))[0]
        data = self._read(size)
        spec = API_TABLE[req.API_KEY]
        hv = spec.response_header_version(version)
        body = data[4 + (1 if hv >= 1 else 0):]
        return spec.response.decode(body, version=version)

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("server closed the connection")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


def take_frames(buf: bytearray) -> int:
    """Drop every complete size-prefixed frame from the front of `buf`; how many there were."""
    n = 0
    while len(buf) >= 4:
        size = int.from_bytes(buf[:4], "big")
        if len(buf) < 4 + size:
            break
        del buf[: 4 + size]
        n += 1
    return n


class _LoopConn(asyncio.Protocol):
    def __init__(self, frame: bytes, counter: list[int], stop_at: float) -> None:
        self.frame = frame
        self.counter = counter
        self.stop_at = stop_at
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self.frame)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        n = take_frames(self.buf)
        if n:
            self.counter[0] += n
            if time.monotonic() < self.stop_at:
                self.transport.write(self.frame * n)  # type: ignore[union-attr]
            elif not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _closed_loop(port: int, frames: list[bytes], seconds: float, warmup: float) -> float:
    loop = asyncio.get_running_loop()
    counter = [0]
    stop_at = time.monotonic() + warmup + seconds
    conns = []
    for f in frames:
        _, proto = await loop.create_connection(lambda f=f: _LoopConn(f, counter, stop_at), "127.0.0.1", port)
        conns.append(proto)
    await asyncio.sleep(warmup)
    start_count, start = counter[0], time.monotonic()
    await asyncio.sleep(seconds)
    rate = (counter[0] - start_count) / (time.monotonic() - start)
    await asyncio.wait([c.done for c in conns], timeout=10)
    for c in conns:
        c.transport.close()
    return rate


def process_cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system, all its threads) in seconds: the
    scheduler's nanosecond count per thread where the kernel has it (/proc/PID/task/*/schedstat),
    else /proc/PID/stat's clock ticks."""
    total, found = 0, False
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tids = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
                found = True
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    if found:
        return total / 1e9
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def closed_loop(port: int, frames: list[bytes], seconds: float = 5.0, warmup: float = 1.0) -> float:
    """Requests answered per second with one outstanding request per frame/connection."""
    import uvloop

    return uvloop.run(_closed_loop(port, frames, seconds, warmup))


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers] + [[f"{c:,.1f}" if isinstance(c, float) else f"{c:,}" if isinstance(c, int) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [" | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


os.environ.setdefault("PYTHONUNBUFFERED", "1")


def compare(name: str, unit: str, kcoord_port: int, ceiling_port: int, ceiling_name: str,
            frames: list[bytes], seconds: float, rounds: int = 3, target_pct: float = 50.0) -> None:
    """Measure kcoord and its ceiling alternately (`rounds` times each, so machine noise hits
    both alike), then print the medians, every sample, and whether the target is met."""
    k_samples, c_samples = [], []
    for _ in range(rounds):
        k_samples.append(closed_loop(kcoord_port, frames, seconds))
        c_samples.append(closed_loop(ceiling_port, frames, seconds))
    k, c = sorted(k_samples)[rounds // 2], sorted(c_samples)[rounds // 2]
    print(f"{name}: {len(frames)} connections, one request outstanding each, "
          f"{rounds} alternating runs of {seconds:g} s, medians")
    print(table(["server", f"{unit}/s", "% of ceiling", "samples"], [
        [ceiling_name, c, 100.0, " ".join(f"{x:,.0f}" for x in c_samples)],
        ["kcoord", k, 100.0 * k / c, " ".join(f"{x:,.0f}" for x in k_samples)],
    ]))
    print(f"target: kcoord >= {target_pct:g}% of the ceiling -> {'met' if k >= target_pct / 100 * c else 'NOT met'}")


def closed_loop_args(description: str | None = None) -> argparse.ArgumentParser:
    """A closed-loop benchmark's command line: --connections (100, one request outstanding
    each), --seconds (3, each measured run) and --rounds (3 alternating runs); add its own."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    return ap


def create_topic(port: int, topic: str, partitions: int, timeout_ms: int = 5000, exists_ok: bool = False) -> None:
    """CreateTopics of one topic (replication factor 1), asserted created (or, `exists_ok`,
    there already: TOPIC_ALREADY_EXISTS)."""
    from kafka.protocol.admin import CreateTopicsRequest

    CT = CreateTopicsRequest.CreatableTopic
    c = SyncClient(port)
    r = c.call(CreateTopicsRequest(topics=[CT(name=topic, num_partitions=partitions, replication_factor=1,
                                              assignments=[], configs=[])], timeout_ms=timeout_ms,
                                   validate_only=False), 5)
    assert r.topics[0].error_code in ((0, 36) if exists_ok else (0,)), r  # 36: exists
    c.close()
