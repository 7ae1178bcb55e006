"""Start-up: from process start to the first answered ApiVersions, with an empty log
directory (what a test suite pays for each fresh server). Target: median <= 300 ms.

Printed beside the time a bare `python -c 'import uvloop'` process takes on the same machine
in the same run (the floor any uvloop server starts from), alternating the two. The client
connects as soon as the port listens and sends ApiVersions v3 until one is answered; the
clock starts just before the process is spawned. The CPU column (user + system time of the
process until then, in 10 ms ticks) says the same on a machine too busy for wall clocks.
Bytecode is compiled first (what a pip install does), so no run pays for compiling sources.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

from _util import free_port, table

TARGET_MS = 300.0

# ApiVersions v3 (header v2: client id "bench", no tagged fields; body: software name and
# version as compact strings, no tagged fields)
_BODY = b"\x07kcoord" + b"\x040.1" + b"\x00"
_HEADER = struct.pack(">hhih", 18, 3, 1, 5) + b"bench" + b"\x00"
APIVERSIONS = struct.pack(">i", len(_HEADER) + len(_BODY)) + _HEADER + _BODY


_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _cpu_ms(pid: int) -> float:
    """user + system time of a running process so far (/proc/PID/stat utime, stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_MS


def _answered(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(APIVERSIONS)
            head = s.recv(8)
            return len(head) >= 8 and struct.unpack(">i", head[4:8])[0] == 1
    except OSError:
        return False


def kcoord_once(extra: dict[str, str]) -> tuple[float, float]:
    port = free_port()
    log_dir = tempfile.mkdtemp(prefix="kcoord-startup-")
    args = [sys.executable, "-m", "kcoord.server", "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={log_dir}"]
    for k, v in extra.items():
        args += ["--override", f"{k}={v}"]
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not _answered(port):
            if proc.poll() is not None:
                raise RuntimeError(f"kcoord exited with {proc.returncode}")
            if time.perf_counter() - started > 30:
                raise RuntimeError("no ApiVersions answer within 30 s")
            time.sleep(0.002)
        return (time.perf_counter() - started) * 1000, _cpu_ms(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(log_dir, ignore_errors=True)


def python_once(code: str) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-m", "compileall", "-q", "protocol", "server", "storage"], cwd=root,
                   check=True, stdout=subprocess.DEVNULL)
    samples: dict[str, list[tuple[float, float]]] = {"python -c 'import uvloop'": [], "kcoord serve (empty dir)": [],
                                       "kcoord serve, control API on": []}
    for _ in range(args.runs):  # alternate, so machine noise hits every row alike
        samples["python -c 'import uvloop'"].append(python_once("import uvloop"))
        samples["kcoord serve (empty dir)"].append(kcoord_once({}))
        samples["kcoord serve, control API on"].append(
            kcoord_once({"kcoord.control.listener": f"http://127.0.0.1:{free_port()}"}))
    rows = []
    for name, xs in samples.items():
        wall = sorted(x[0] for x in xs)
        cpu = sorted(x[1] for x in xs)
        rows.append([name, wall[len(wall) // 2], wall[0], wall[-1], cpu[len(cpu) // 2]])
    floor, cpu_floor = rows[0][1], rows[0][4]
    print(f"Start-up to the first answered ApiVersions, {args.runs} alternating runs each (ms)")
    print(table(["process", "median", "min", "max", "x floor", "CPU median", "CPU x floor"],
                [[*r[:4], f"{r[1] / floor:.1f}", r[4], f"{r[4] / cpu_floor:.1f}"] for r in rows]))
    worst = max(r[1] for r in rows[1:])
    print(f"target: median <= {TARGET_MS:g} ms -> {'met' if worst <= TARGET_MS else 'NOT met'}")


if __name__ == "__main__":
    main()
