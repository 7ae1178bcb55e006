"""Produce and consume throughput through kcoord with confluent-kafka (librdkafka), compared
with writing and reading the same bytes to a plain file in the same run (the ceiling).

kcoord runs as a subprocess on a free port with a temp log dir. The producer sends N records
of 1 KiB values (acks=1 by default, no compression, linger.ms=5, librdkafka's default 1 MB
batches) to a 1-partition topic; the consumer assign()s offset 0 and reads them all back.
The ceiling writes the same number of 1 KiB values to a file in the same directory in 1 MiB
chunks, then reads it back in 1 MiB chunks (page cache both ways, like the broker).

The small-record tables measure what the server can take of 100-byte records with acks=all from
several producer processes at once (one client process is the bottleneck otherwise), with the
server's CPU (utime + stime of its process, all threads) over the measured window per record and
per Produce request — the server's cost whatever the clients manage:

- raw producers (bench/_producers.py): --producers processes x --connections connections, each an
  idempotent acks=all producer speaking the protocol itself, one Produce v7 request of
  --batch-records records outstanding per connection, across --partitions partitions: what a
  client test suite sends, many small requests. The ceiling: the same processes against a bare
  uvloop server answering every frame (bench/_bare_server.py echo), in the same run.
- confluent-kafka producers: --producers processes, idempotent, acks=all, linger.ms=0, each
  producing --small-records / --producers records (with --flush-every N, a flush() after every N
  records, as a test produces and waits); Produce requests counted by librdkafka's statistics
  (it batches what queues while requests are in flight).

With --baseline-kcoord PATH (another build's `kcoord` executable, e.g. an older commit's work
tree and venv) both servers run side by side, each on its own log dir, and every round measures
them alternately (the order flipping each round), then the table gives the medians and each
server's figures as a multiple of the baseline's. --fsync-too adds this tree with
log.flush.interval.messages=1 (an fdatasync before every acknowledgement, as the server did
before Kafka's flush semantics), to tell the flush policy's share of a difference from the code's.
Usage: python bench/bench_produce_consume.py [--records 200000] [--acks 1] [--compression none]
       [--small-records 200000] [--flush-every 100] [--producers 4] [--connections 8] [--batch-records 10]
       [--partitions 4] [--rounds 3] [--seconds 3] [--baseline-kcoord PATH] [--fsync-too] [--small-only]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _util import ROOT, create_topic, process_cpu_s, start_bare, start_kcoord, stop, table
from confluent_kafka import Consumer, Producer, TopicPartition

TOPIC = "bench-data"
VALUE_SIZE = 1024
SMALL_TOPIC = "bench-small"
SMALL_SIZE = 100
MiB = 1024 * 1024


def produce(port: int, n: int, acks: str, compression: str, value_size: int = VALUE_SIZE,
            topic: str = TOPIC) -> float:
    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": acks, "linger.ms": 5,
                  "compression.type": compression, "queue.buffering.max.kbytes": 1048576,
                  "queue.buffering.max.messages": 1000000, "message.timeout.ms": 60000})
    pool = [os.urandom(value_size) for _ in range(64)]
    failed = []

    def cb(err, _msg):
        if err is not None:
            failed.append(err)

    # Warm up: topic auto-creation and metadata, outside the timing.
    p.produce(topic, value=b"warmup", on_delivery=cb)
    p.flush(30)
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=pool[i & 63], on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i & 1023 == 0:
            p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    assert left == 0 and not failed, (left, failed[:3])
    return elapsed


def consume(port: int, n: int, topic: str = TOPIC) -> float:
    c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 1)])  # skip the warm-up record
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 300
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(num_messages=10000, timeout=1.0):
            if m.error() is None:
                got += 1
    elapsed = time.perf_counter() - t0
    c.close()
    assert got >= n, f"consumed {got} of {n}"
    return elapsed


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc), to tell server cost from client cost."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def file_ceiling(directory: str, n: int, value_size: int = VALUE_SIZE) -> tuple[float, float]:
    path = os.path.join(directory, "ceiling.bin")
    value = os.urandom(value_size)
    per_chunk = MiB // value_size
    chunk = value * per_chunk
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    written = 0
    while written < n:
        k = min(per_chunk, n - written)
        os.write(fd, chunk if k == per_chunk else value * k)
        written += k
    os.close(fd)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    while os.read(fd, MiB):
        pass
    os.close(fd)
    read_s = time.perf_counter() - t0
    os.unlink(path)
    return write_s, read_s


PRODUCERS = str(ROOT / "bench" / "_producers.py")


def sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.time()))


def raw_round(pid: int | None, port: int, args: argparse.Namespace, ceiling: bool) -> dict[str, float]:
    """One measured window of the raw producers against one server."""
    start = time.time() + 2.0 + 1.0  # 2 s to start and connect, 1 s of warm-up load
    end = start + args.seconds
    argv = ["raw", str(port), SMALL_TOPIC, str(args.partitions), str(args.connections), str(args.batch_records),
            repr(start), repr(end)] + (["--no-init"] if ceiling else [])
    with_cpu = pid is not None
    argvs = [argv] * args.producers
    procs = [subprocess.Popen([sys.executable, PRODUCERS, *a], stdout=subprocess.PIPE, env={
        **os.environ, "BENCH_FIRST_PARTITION": str(i * args.connections)}) for i, a in enumerate(argvs)]
    sleep_until(start)
    cpu0 = process_cpu_s(pid) if with_cpu else 0.0
    sleep_until(end)
    cpu1 = process_cpu_s(pid) if with_cpu else 0.0
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0, f"producer exited with {p.returncode}"
        outs.append(json.loads(out.decode().strip().splitlines()[-1]))
    requests = sum(o["requests"] for o in outs)
    errors = sum(o["errors"] for o in outs)
    assert errors == 0, f"{errors} Produce answers with an error"
    if not all(o["ready"] for o in outs):
        print("  (a producer was not connected by the start of the window: raise the set-up time)")
    return {"records_s": requests * args.batch_records / args.seconds, "requests_s": requests / args.seconds,
            "cpu_s": cpu1 - cpu0, "requests": requests, "records": requests * args.batch_records}


def confluent_round(pid: int, port: int, args: argparse.Namespace) -> dict[str, float]:
    start = time.time() + 4.0  # start, metadata, producer id and a warm-up record before
    share = args.small_records // args.producers
    procs = [subprocess.Popen([sys.executable, PRODUCERS, "confluent", str(port), SMALL_TOPIC, str(share), repr(start),
                               str(args.flush_every)],
                              stdout=subprocess.PIPE) for _ in range(args.producers)]
    sleep_until(start)
    cpu0 = process_cpu_s(pid)
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, f"producer exited with {p.returncode}"
        outs.append(json.loads(out.decode().strip().splitlines()[-1]))
    cpu1 = process_cpu_s(pid)
    assert sum(o["errors"] for o in outs) == 0, outs
    if not all(o["ready"] for o in outs):
        print("  (a producer was not ready by the start of the window: raise the set-up time)")
    took = max(o["end"] for o in outs) - start
    records = share * args.producers
    requests = sum(o["requests"] for o in outs)
    return {"records_s": records / took, "requests_s": requests / took, "cpu_s": cpu1 - cpu0,
            "requests": requests, "records": records}


def median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def small_table(title: str, samples: dict[str, list[dict[str, float]]], baseline: str | None,
                ceiling: str | None = None) -> None:
    rows, med = [], {}
    for name, runs in samples.items():
        m = {k: median([r[k] for r in runs]) for k in ("records_s", "requests_s")}
        measured = [r for r in runs if r["cpu_s"] > 0]
        m["cpu_record"] = median([r["cpu_s"] / r["records"] * 1e6 for r in measured]) if measured else None
        m["cpu_request"] = median([r["cpu_s"] / r["requests"] * 1e6 for r in measured]) if measured else None
        m["busy"] = median([r["cpu_s"] / (r["records"] / r["records_s"]) * 100 for r in measured]) if measured else None
        med[name] = m
    base = med.get(baseline) if baseline else None
    top = med[ceiling]["records_s"] if ceiling else None
    for name, m in med.items():
        rows.append([name, int(m["records_s"]), f"{100 * m['records_s'] / top:.0f}%" if top else "", int(m["requests_s"]),
                     f"{m['cpu_record']:.2f}" if m["cpu_record"] is not None else "",
                     f"{m['cpu_request']:.1f}" if m["cpu_request"] is not None else "",
                     f"{m['busy']:.0f}%" if m["busy"] is not None else "",
                     f"{m['records_s'] / base['records_s']:.2f}x" if base else "",
                     f"{base['cpu_record'] / m['cpu_record']:.2f}x" if base and m["cpu_record"] else "",
                     " ".join(f"{r['records_s']:,.0f}" for r in samples[name])])
    print(f"\n{title}")
    print(table(["server", "records/s", "of ceiling", "Produce requests/s", "server CPU µs/record", "server CPU µs/request",
                 "server CPU busy", "records/s vs baseline", "CPU/record: baseline ÷ this", "samples records/s"],
                rows))
    if base and "this tree" in med:
        m = med["this tree"]
        speed, cpu = m["records_s"] / base["records_s"], base["cpu_record"] / m["cpu_record"]
        print(f"target: this tree >= 3x the baseline's records/s -> {speed:.2f}x ({'met' if speed >= 3 else 'NOT met'}); "
              f"server CPU per record {cpu:.2f}x less ({'met' if cpu >= 3 else 'NOT met'})")


def small(args: argparse.Namespace, work: Path) -> None:
    servers: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        if args.baseline_kcoord:
            proc, port, _ = start_kcoord(log_dir=str(work / "baseline"), kcoord=args.baseline_kcoord)
            procs.append(proc)
            servers[f"baseline ({args.baseline_kcoord})"] = (proc, port)
        proc, port, _ = start_kcoord(log_dir=str(work / "current"))
        procs.append(proc)
        servers["this tree"] = (proc, port)
        if args.fsync_too:  # Kafka's flush.messages=1: an fdatasync before every acknowledgement
            proc, port, _ = start_kcoord({"log.flush.interval.messages": "1"}, log_dir=str(work / "fsync"))
            procs.append(proc)
            servers["this tree, log.flush.interval.messages=1"] = (proc, port)
        for _, port in servers.values():
            create_topic(port, SMALL_TOPIC, args.partitions)
        echo, echo_port = start_bare("echo")
        procs.append(echo)
        baseline = next(iter(servers)) if args.baseline_kcoord else None
        names = list(servers)
        raw: dict[str, list[dict[str, float]]] = {n: [] for n in names}
        raw["ceiling: bare uvloop echo"] = []
        conf: dict[str, list[dict[str, float]]] = {n: [] for n in names}
        for i in range(args.rounds):
            order = names if i % 2 == 0 else names[::-1]  # neither server always first
            for name in order:
                proc, port = servers[name]
                raw[name].append(raw_round(proc.pid, port, args, ceiling=False))
            raw["ceiling: bare uvloop echo"].append(raw_round(None, echo_port, args, ceiling=True))
            for name in order:
                proc, port = servers[name]
                conf[name].append(confluent_round(proc.pid, port, args))
    finally:
        for p in procs:
            stop(p)
    n_conn = args.producers * args.connections
    small_table(f"{SMALL_SIZE}-byte records, acks=all, idempotent: raw producers, {args.producers} processes x "
                f"{args.connections} connections ({n_conn}), one Produce v7 of {args.batch_records} records outstanding "
                f"per connection, {args.partitions} partitions; {args.rounds} alternating windows of {args.seconds:g} s, "
                "medians", raw, baseline, "ceiling: bare uvloop echo")
    flush = f"flush() every {args.flush_every} records" if args.flush_every else "one flush() at the end"
    small_table(f"{SMALL_SIZE}-byte records, acks=all, idempotent: confluent-kafka, {args.producers} producer processes, "
                f"linger.ms=0, {flush}, {args.small_records:,} records per window, {args.partitions} partitions; "
                f"{args.rounds} alternating windows, medians", conf, baseline)
    print("server CPU: utime + stime of the server's process (all threads) over the window; busy = that CPU "
          "over the window's wall time")


def large(args: argparse.Namespace) -> None:
    n = args.records
    mb = n * VALUE_SIZE / MiB
    log_dir = tempfile.mkdtemp(prefix="kcoord-bench-data-")
    try:
        proc, port, _ = start_kcoord(log_dir=log_dir)
        try:
            cpu0 = cpu_seconds(proc.pid)
            produce_s = produce(port, n, args.acks, args.compression)
            cpu1 = cpu_seconds(proc.pid)
            consume_s = consume(port, n)
            cpu2 = cpu_seconds(proc.pid)
        finally:
            stop(proc)
        write_s, read_s = file_ceiling(log_dir, n)
    finally:
        shutil.rmtree(log_dir, ignore_errors=True)

    rows = [
        [f"produce (confluent-kafka, acks={args.acks}, {args.compression})", produce_s, mb / produce_s,
         n / produce_s, f"{100 * write_s / produce_s:.0f}%", f"{cpu1 - cpu0:.2f}"],
        ["  ceiling: write the same bytes to a file", write_s, mb / write_s, n / write_s, "100%", ""],
        ["consume (confluent-kafka, assign)", consume_s, mb / consume_s, n / consume_s,
         f"{100 * read_s / consume_s:.0f}%", f"{cpu2 - cpu1:.2f}"],
        ["  ceiling: read the same bytes from a file", read_s, mb / read_s, n / read_s, "100%", ""],
    ]
    print(f"{n:,} records of {VALUE_SIZE} B ({mb:,.0f} MiB of values)")
    print(table(["run", "ms", "MiB/s", "records/s", "of ceiling", "kcoord CPU s"],
                [[r[0], int(r[1] * 1000), r[2], int(r[3]), r[4], r[5]] for r in rows]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--acks", default="1")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--small-records", type=int, default=200_000, help="confluent-kafka records per window")
    ap.add_argument("--flush-every", type=int, default=100,
                    help="confluent-kafka producers flush after every N records (0: only at the end)")
    ap.add_argument("--producers", type=int, default=4, help="producer processes")
    ap.add_argument("--connections", type=int, default=8, help="raw producer connections per process")
    ap.add_argument("--batch-records", type=int, default=10, help="records per raw Produce request")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0, help="raw producers' measured window")
    ap.add_argument("--baseline-kcoord", default=None, help="another build's kcoord executable to compare with")
    ap.add_argument("--fsync-too", action="store_true",
                    help="also this tree with log.flush.interval.messages=1 (fsync before every acknowledgement)")
    ap.add_argument("--small-only", action="store_true", help="only the small-record tables")
    args = ap.parse_args()
    if not args.small_only:
        large(args)
    work = Path(tempfile.mkdtemp(prefix="kcoord-bench-small-"))
    try:
        small(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
