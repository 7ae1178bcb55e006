"""Produce and consume throughput through kcoord with confluent-kafka (librdkafka), compared
with writing and reading the same bytes to a plain file in the same run (the ceiling).

kcoord runs as a subprocess on a free port with a temp log dir. The producer sends N records
of 1 KiB values (acks=1 by default, no compression, linger.ms=5, librdkafka's default 1 MB
batches) to a 1-partition topic; the consumer assign()s offset 0 and reads them all back.
The ceiling writes the same number of 1 KiB values to a file in the same directory in 1 MiB
chunks, then reads it back in 1 MiB chunks (page cache both ways, like the broker).
A second table does the same with small records: 100-byte values, acks=all (-1), each produced
record counted as answered only once the broker acknowledged it (idempotence off, as above).
Usage: python bench/bench_produce_consume.py [--records 200000] [--acks 1] [--compression none]
       [--small-records 500000]
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from _util import start_kcoord, stop, table
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--acks", default="1")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--small-records", type=int, default=500_000)
    args = ap.parse_args()
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
            small_n = args.small_records
            small_produce_s = produce(port, small_n, "all", args.compression, SMALL_SIZE, SMALL_TOPIC)
            cpu3 = cpu_seconds(proc.pid)
            small_consume_s = consume(port, small_n, SMALL_TOPIC)
            cpu4 = cpu_seconds(proc.pid)
        finally:
            stop(proc)
        write_s, read_s = file_ceiling(log_dir, n)
        small_write_s, small_read_s = file_ceiling(log_dir, small_n, SMALL_SIZE)
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
    small_mb = small_n * SMALL_SIZE / MiB
    rows = [
        [f"produce (confluent-kafka, acks=all, {args.compression})", small_produce_s, small_mb / small_produce_s,
         small_n / small_produce_s, f"{100 * small_write_s / small_produce_s:.0f}%", f"{cpu3 - cpu2:.2f}"],
        ["  ceiling: write the same bytes to a file", small_write_s, small_mb / small_write_s,
         small_n / small_write_s, "100%", ""],
        ["consume (confluent-kafka, assign)", small_consume_s, small_mb / small_consume_s, small_n / small_consume_s,
         f"{100 * small_read_s / small_consume_s:.0f}%", f"{cpu4 - cpu3:.2f}"],
        ["  ceiling: read the same bytes from a file", small_read_s, small_mb / small_read_s,
         small_n / small_read_s, "100%", ""],
    ]
    print(f"\n{small_n:,} records of {SMALL_SIZE} B ({small_mb:,.0f} MiB of values)")
    print(table(["run", "ms", "MiB/s", "records/s", "of ceiling", "kcoord CPU s"],
                [[r[0], int(r[1] * 1000), r[2], int(r[3]), r[4], r[5]] for r in rows]))


if __name__ == "__main__":
    main()
