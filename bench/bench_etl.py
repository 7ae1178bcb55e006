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
import multiprocessing as mp
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request

from _util import free_port, process_cpu_s, start_kcoord, stop, table

TOPICS = {"etl-a": 7, "etl-b": 19, "etl-c": 31, "etl-once": 19}
STAGES = [  # (group, source topic, destination topic or None, client kind)
    ("etl-1", "etl-a", "etl-b", "confluent-cooperative"),
    ("etl-2", "etl-b", "etl-c", "kafka-python-range"),
    ("etl-3", "etl-c", None, "confluent-kip848"),
]
MEMBERS = 3


# ---------------------------------------------------------------------------- child processes


def _source(bootstrap: str, topic: str, n: int, value_bytes: int, out: mp.Queue) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"v" * value_bytes
    failed = []

    def cb(err, _msg):  # noqa: ANN001
        if err is not None:
            failed.append(err)

    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"%d" % i, value=value, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i & 1023 == 0:
            p.poll(0)
    left = p.flush(600)
    out.put(("source", time.process_time(), n if not left and not failed else -1))


def _confluent_member(bootstrap: str, group: str, src: str, dst: str | None, kind: str, stop_ev,  # noqa: ANN001
                      out: mp.Queue) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}
    if kind == "confluent-kip848":
        conf["group.protocol"] = "consumer"
    else:
        conf["partition.assignment.strategy"] = "cooperative-sticky"
        conf["session.timeout.ms"] = 30000
    c = Consumer(conf)
    c.subscribe([src])
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5}) if dst else None
    n = 0
    while not stop_ev.is_set():
        msgs = c.consume(num_messages=1000, timeout=0.2)
        got = [m for m in msgs if m.error() is None]
        if not got:
            continue
        if p is not None:
            for m in got:
                while True:
                    try:
                        p.produce(dst, key=m.key(), value=m.value())
                        break
                    except BufferError:
                        p.poll(0.01)
            p.flush(120)
        n += len(got)
        try:
            c.commit(asynchronous=False)
        except KafkaException:
            pass  # a rebalance took the partitions: their records come again (at least once)
    c.close()
    out.put((group, time.process_time(), n))


def _kafka_python_member(bootstrap: str, group: str, src: str, dst: str | None, stop_ev,  # noqa: ANN001
                         out: mp.Queue) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError

    c = KafkaConsumer(src, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", max_poll_records=1000)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                      linger_ms=5) if dst else None
    n = 0
    while not stop_ev.is_set():
        polled = c.poll(timeout_ms=200)
        count = 0
        for records in polled.values():
            for r in records:
                if p is not None:
                    p.send(dst, key=r.key, value=r.value)
                count += 1
        if not count:
            continue
        if p is not None:
            p.flush(120)
        n += count
        try:
            c.commit()
        except KafkaError:
            pass  # rebalanced meanwhile: at least once
    c.close()
    if p is not None:
        p.close()
    out.put((group, time.process_time(), n))


def _member(bootstrap: str, group: str, src: str, dst: str | None, kind: str, stop_ev, out) -> None:  # noqa: ANN001
    if kind.startswith("kafka-python"):
        _kafka_python_member(bootstrap, group, src, dst, stop_ev, out)
    else:
        _confluent_member(bootstrap, group, src, dst, kind, stop_ev, out)


# ---------------------------------------------------------------------------- the driver


def _create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()])
    for f in fs.values():
        f.result(30)


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


class _Progress:
    """Whether each group committed the end of its input and the last topic holds n records."""

    def __init__(self, bootstrap: str, stages: list[tuple[str, str, str | None, str]]) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.tp = TopicPartition
        self.checks = []
        for group, src, _, _ in stages:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
            self.checks.append((c, src))

    def ends(self, c, topic: str) -> list[int]:  # noqa: ANN001
        return [c.get_watermark_offsets(self.tp(topic, p), timeout=10)[1] for p in range(TOPICS[topic])]

    def done(self, n: int, last_topic: str) -> bool:
        for c, src in self.checks:
            ends = self.ends(c, src)
            if src == last_topic and sum(ends) < n:
                return False
            committed = c.committed([self.tp(src, p) for p in range(TOPICS[src])], timeout=10)
            if any(tp.offset < end for tp, end in zip(committed, ends, strict=True)):
                return False
        return True

    def close(self) -> None:
        for c, _ in self.checks:
            c.close()


def run_chain(bootstrap: str, server_pid: int, metrics_port: int, n: int, value_bytes: int,
              stages: list[tuple[str, str, str | None, str]], first_topic: str, last_topic: str,
              timeout_s: float) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    stop_ev = ctx.Event()
    procs = [ctx.Process(target=_member, args=(bootstrap, g, s, d, k, stop_ev, out))
             for g, s, d, k in stages for _ in range(MEMBERS)]
    before = _scrape(metrics_port)
    cpu0, sys0 = process_cpu_s(server_pid), _sys_cpu_s(server_pid)
    t0 = time.perf_counter()
    for pr in procs:
        pr.start()
    src = ctx.Process(target=_source, args=(bootstrap, first_topic, n, value_bytes, out))
    src.start()
    progress = _Progress(bootstrap, stages)
    finished = False
    try:
        deadline = t0 + timeout_s
        while time.perf_counter() < deadline:
            time.sleep(0.5)
            if not src.is_alive() and progress.done(n, last_topic):
                finished = True
                break
        wall = time.perf_counter() - t0
        cpu1, sys1 = process_cpu_s(server_pid), _sys_cpu_s(server_pid)
        after = _scrape(metrics_port)
    finally:
        progress.close()
        stop_ev.set()
    results = [out.get(timeout=120) for _ in range(len(procs) + 1)]
    for pr in [*procs, src]:
        pr.join(60)
        if pr.is_alive():
            pr.kill()
    assert any(r[0] == "source" and r[2] == n for r in results), results
    return {
        "finished": finished, "wall": wall, "server_cpu": cpu1 - cpu0, "server_sys": sys1 - sys0,
        "client_cpu": sum(r[1] for r in results),
        "fetch": after.get("Fetch", 0) - before.get("Fetch", 0),
        "produce": after.get("Produce", 0) - before.get("Produce", 0),
        "fsync_data": after.get("fsync_data", 0) - before.get("fsync_data", 0),
        "fsync_internal": after.get("fsync_internal", 0) - before.get("fsync_internal", 0),
        "consumed": sum(r[2] for r in results if r[0] == last_stage_group(stages)),
    }


def last_stage_group(stages: list[tuple[str, str, str | None, str]]) -> str:
    return stages[-1][0]


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
            _create_topics(bootstrap)
            once = run_chain(bootstrap, proc.pid, metrics_port, n, args.value_bytes,
                             [("etl-once", "etl-once", None, "confluent-cooperative")], "etl-once", "etl-once",
                             args.timeout)
            etl = run_chain(bootstrap, proc.pid, metrics_port, n, args.value_bytes, STAGES, "etl-a", "etl-c",
                            args.timeout)
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
