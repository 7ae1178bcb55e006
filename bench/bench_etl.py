"""A chained ETL through kcoord, end to end: what the server's data plane costs per record.

A source producer writes N small records to topic etl-a (7 partitions). Three consumer groups
of 3 members each, every member its own process, chain them on:
  stage 1 etl-a -> etl-b (19 partitions): confluent-kafka, classic protocol, cooperative-sticky
  stage 2 etl-b -> etl-c (31 partitions): kafka-python, classic protocol, range
  stage 3 etl-c -> (end):                 confluent-kafka, KIP-848 (group.protocol=consumer)
A member polls, produces what it got onward with an idempotent acks=all producer, flushes it
and commits its position (at least once). The run is done when every group has committed the
end of its input topic and etl-c holds at least N records. A record takes 3 hops (produced to
and consumed from each topic once).

The ceiling, in the same run: the same N records produced (same producer settings) and consumed
once by one group of 3 confluent-kafka members that commit (one hop), and the clients' own CPU.
The server's figures are CPU seconds from /proc/PID (all threads), request counts from its
Prometheus endpoint (kcoord_request_latency_seconds_count) and fsync calls (kcoord_log_fsyncs).

Usage: python bench/bench_etl.py [--records 500000] [--value-bytes 20] [--server-arg k=v ...]
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import urllib.request

from _util import ROOT, free_port, process_cpu_s, start_kcoord, stop, table

sys.path.insert(0, str(ROOT))
from kcoord.testing.etl import ONE_HOP, STAGES, Stage, create_topics, run_chain  # noqa: E402


def _sys_cpu_s(pid: int) -> float:
    """The kernel's share of a process's CPU time (stime, /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[12]) / os.sysconf("SC_CLK_TCK")


def _scrape(metrics_port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).read().decode()
    out: dict[str, float] = {}
    for m in re.finditer(r'^kcoord_request_latency_seconds_count\{api="(\w+)"\} (\S+)$', text, re.M):
        out[m.group(1)] = float(m.group(2))
    for m in re.finditer(r'^kcoord_log_fsyncs(?:_total)?\{kind="(\w+)"\} (\S+)$', text, re.M):
        out["fsync_" + m.group(1)] = float(m.group(2))
    return out


def measured_chain(bootstrap: str, server_pid: int, metrics_port: int, n: int, value_bytes: int,
                   stages: list[Stage], timeout_s: float) -> dict[str, float]:
    """run_chain, with the server's CPU and request and fsync counts over the run."""
    at: dict[str, tuple] = {}

    def mark(name: str) -> None:
        at[name] = (process_cpu_s(server_pid), _sys_cpu_s(server_pid), _scrape(metrics_port))

    r = run_chain(bootstrap, n, value_bytes, stages, timeout_s, lambda: mark("start"), lambda: mark("end"))
    (cpu0, sys0, before), (cpu1, sys1, after) = at["start"], at["end"]

    def delta(key: str) -> float:
        return after.get(key, 0) - before.get(key, 0)

    return {**r, "server_cpu": cpu1 - cpu0, "server_sys": sys1 - sys0, "fetch": delta("Fetch"),
            "produce": delta("Produce"), "fsync_data": delta("fsync_data"), "fsync_internal": delta("fsync_internal")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--value-bytes", type=int, default=20)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--server-arg", action="append", default=[], help="a server override k=v (repeatable)")
    args = ap.parse_args()
    n = args.records
    metrics_port = free_port()
    overrides = {"kcoord.metrics.listener": f"127.0.0.1:{metrics_port}", "auto.create.topics.enable": "false"}
    overrides.update(kv.split("=", 1) for kv in args.server_arg)
    log_dir = tempfile.mkdtemp(prefix="kcoord-bench-etl-")
    try:
        proc, port, _ = start_kcoord(overrides, log_dir=log_dir)
        bootstrap = f"127.0.0.1:{port}"
        try:
            create_topics(bootstrap)
            once = measured_chain(bootstrap, proc.pid, metrics_port, n, args.value_bytes, ONE_HOP, args.timeout)
            etl = measured_chain(bootstrap, proc.pid, metrics_port, n, args.value_bytes, STAGES, args.timeout)
        finally:
            stop(proc)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)

    def row(name: str, r: dict[str, float], hops: int) -> list:
        us = r["server_cpu"] / (n * hops) * 1e6
        return [name + ("" if r["finished"] else " (TIMED OUT)"), round(r["wall"], 1), round(r["server_cpu"], 1),
                f"{100 * r['server_sys'] / max(r['server_cpu'], 1e-9):.0f}%", round(us, 1), round(r["client_cpu"], 1), int(r["fetch"]), int(r["produce"]),
                int(r["fsync_data"]), int(r["fsync_internal"])]

    print(f"{n:,} records of {args.value_bytes} B; server overrides: {' '.join(args.server_arg) or '(none)'}")
    print(table(["run", "wall s", "server CPU s", "of it kernel", "server CPU us/record-hop", "clients CPU s", "Fetch reqs",
                 "Produce reqs", "fsyncs data", "fsyncs internal"],
                [row("ETL: 3 groups x 3 members, 3 hops", etl, 3),
                 row("  ceiling: produce + consume once, 1 hop", once, 1)]))
    print(f"server CPU per record-hop, ETL over one hop: {(etl['server_cpu'] / 3) / max(once['server_cpu'], 1e-9):.2f}"
          f"; ETL server CPU over the clients' CPU: {etl['server_cpu'] / max(etl['client_cpu'], 1e-9):.2f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
