"""Start-up loading benchmark over ~100 MB of offset commits: iter_records + decode_record,
and the server's whole start-up load (CoordinatorRuntime: latest value per key, decode,
replay into the GroupCoordinator).

Generates __consumer_offsets-style data (OffsetCommitKey v1 / OffsetCommitValue v3, batches
of 100 records, realistic group/topic names) in a temp dir with PartitionLog, reopens it
(recovery scan included, timed separately), then times loading against the ceiling of
simply reading the same files' bytes. Usage: python bench/bench_loading.py [MB]
"""
from __future__ import annotations

import logging
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import uvloop  # noqa: E402

from kcoord.protocol.coordinator_codec import decode_record, encode_key, encode_value  # noqa: E402
from kcoord.protocol.coordinator_records import OffsetKey, OffsetValue  # noqa: E402
from kcoord.server.clock import SystemClock  # noqa: E402
from kcoord.server.coordinator.runtime import CoordinatorRuntime  # noqa: E402
from kcoord.server.group.config import GroupConfig  # noqa: E402
from kcoord.server.group.coordinator import GroupCoordinator  # noqa: E402
from kcoord.server.group.shard import OffsetsRecords  # noqa: E402
from kcoord.storage.log import OFFSETS_SEGMENT_BYTES, PartitionLog  # noqa: E402
from kcoord.storage.log_manager import LogManager  # noqa: E402

BATCH = 100


def generate(path: str, target_bytes: int) -> PartitionLog:
    rng = random.Random(7)
    groups = [f"payments-consumer-{i:03d}" for i in range(200)]
    topics = [f"orders.v2.region-{i:02d}" for i in range(20)]
    keys = [encode_key(OffsetKey(g, t, p)) for g in groups for t in rng.sample(topics, 3) for p in range(8)]
    log = PartitionLog(path, segment_bytes=OFFSETS_SEGMENT_BYTES)
    ts = 1_700_000_000_000
    offset = 0
    while log.size_in_bytes < target_bytes:
        recs = []
        for _ in range(BATCH):
            offset += rng.randint(1, 500)
            recs.append((rng.choice(keys), encode_value(OffsetValue(offset, "", ts, 3))))
        log.append_records(recs, ts)
        ts += 10
    log.flush()
    return log


def main() -> None:
    mb = float(sys.argv[1]) if len(sys.argv) > 1 else 100.0
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "__consumer_offsets-0")
        t0 = time.perf_counter()
        generate(path, int(mb * 1024 * 1024)).close()
        gen_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        log = PartitionLog(path, segment_bytes=OFFSETS_SEGMENT_BYTES)
        open_s = time.perf_counter() - t0
        size = log.size_in_bytes

        # Ceiling: read the same bytes in the same 5 MB chunks, nothing else.
        t0 = time.perf_counter()
        for seg in log.segments:
            pos = 0
            while pos < seg.size:
                pos += len(os.pread(seg.fd, 5242880, pos))
        read_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        n = 0
        for _ in log.iter_records(0):
            n += 1
        iter_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        n = 0
        for _, k, v in log.iter_records(0):
            decode_record(k, v)
            n += 1
        load_s = time.perf_counter() - t0
        log.close()

        # The server's own loading path, on the same files.
        async def server_load() -> float:
            logs = LogManager(d)
            coord = GroupCoordinator(GroupConfig(), SystemClock(), 1)
            runtime = CoordinatorRuntime(lambda _: coord, OffsetsRecords(1), logs, SystemClock(), 5000, 1048588)
            t = time.perf_counter()
            await runtime.load_all()
            elapsed = time.perf_counter() - t
            assert sum(coord.offset_manager.count(g.group_id) for g in coord.groups()) > 0
            logs.close()
            return elapsed

        logging.disable(logging.INFO)
        server_s = uvloop.run(server_load())

    print(f"generated {size / 1e6:.1f} MB in {gen_s:.1f}s; {n} records, {len(log.segments)} segment(s)")
    print(f"{'step':<34} {'records':>9} {'MB':>7} {'seconds':>8} {'records/s':>11} {'MB/s':>8}")
    for name, secs, recs in (
        ("read bytes only (ceiling)", read_s, n),
        ("open + recovery scan (CRC)", open_s, n),
        ("iter_records", iter_s, n),
        ("iter_records + decode_record", load_s, n),
        ("server start-up load (+ replay)", server_s, n),
    ):
        print(f"{name:<34} {recs:>9} {size / 1e6:>7.1f} {secs:>8.3f} {recs / secs:>11,.0f} {size / 1e6 / secs:>8.0f}")
    print(f"target >= 500,000 records/s (server start-up load): {'met' if n / server_s >= 500_000 else 'NOT met'}")


if __name__ == "__main__":
    main()
