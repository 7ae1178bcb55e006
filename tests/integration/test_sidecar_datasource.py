"""The kafka_segments Spark data source (sidecar/datasource.py) against the Python readers it
wraps, and the Spark pass (sidecar/pipeline.run_spark) against compact_partition on its own:
real segment files (compressed batches, headers, tombstones, keyless records, transactions,
LogAppendTime, KIP-534 delete horizons), real Spark (local[2], one session for the module)."""
from __future__ import annotations

import filecmp
import json
import logging
import os
import random
import shutil
import struct

import pyspark  # noqa: F401  (make test installs it: failing here means setup is incomplete)
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.util import calc_crc32c

from kcoord.sidecar.compaction import (
    ATTR_DELETE_HORIZON,
    DEFAULT_DELETE_RETENTION_MS,
    Segment,
    build_key_map,
    compact_partition,
    iter_records,
    iter_segment_batches,
    read_partition_segments,
    scan_segment,
)
from kcoord.sidecar.datasource import OPEN_COST_BYTES, register
from kcoord.sidecar.handoff import fingerprints
from kcoord.sidecar.partition_io import DirectoryOutput, SwapOutput, process_partition
from kcoord.sidecar.pipeline import (
    PartitionPlan,
    _segments_of,
    get_spark,
    run_spark,
    slot_values,
    spark_hash_int,
)
from kcoord.sidecar.testdata import write_partition
from kcoord.storage.batch import ATTR_CONTROL, parse_header, set_log_append_time
from kcoord.storage.segment import segment_name
from kcoord.storage.swap import segment_bases

NOW = 1_700_000_000_000
TOPIC = "__consumer_offsets"


@pytest.fixture(scope="module")
def spark():
    s = get_spark("local[2]", "kcoord-datasource-tests")
    s.sparkContext.setLogLevel("ERROR")
    register(s)
    yield s
    s.stop()


# ------------------------------------------------------------------------------ test data


def _batch(base_offset: int, records: list, *, compression: int = 0, ts: int = NOW - 86_400_000,
           producer_id: int = -1, transactional: bool = False, control: bool = False,
           log_append_time: int | None = None) -> bytearray:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=int(transactional),
                                  producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                  base_sequence=0 if producer_id >= 0 else -1, batch_size=2**31 - 1)
    for i, rec in enumerate(records):
        key, value = rec[0], rec[1]
        headers = rec[2] if len(rec) > 2 else []
        b.append(i, ts + i, key, value, headers)
    buf = b.build()
    struct.pack_into(">q", buf, 0, base_offset)
    struct.pack_into(">i", buf, 12, 3)  # leader epoch
    if control:
        attrs = struct.unpack_from(">h", buf, 21)[0] | ATTR_CONTROL
        struct.pack_into(">h", buf, 21, attrs)
        struct.pack_into(">I", buf, 17, calc_crc32c(memoryview(buf)[21:]))
    if log_append_time is not None:
        set_log_append_time(buf, parse_header(buf), log_append_time)
    return buf


def write_mixed_partition(log_dir: str, partition: int, *, seed: int, aborted: bool = False,
                          batches_per_segment: int = 7, batches: int = 40) -> str:
    """A partition written by hand: every compression codec, headers, tombstones, a keyless
    record, a committed transaction (and optionally an aborted one), a LogAppendTime batch;
    several segments, the last one active."""
    rnd = random.Random(seed)
    path = os.path.join(log_dir, f"{TOPIC}-{partition}")
    os.makedirs(path)
    keys = [f"key-{partition}-{i}".encode() for i in range(12)]
    out: list[tuple[int, bytearray]] = []
    off = 0
    for n in range(batches):
        recs = []
        for _ in range(rnd.randint(1, 6)):
            k = rnd.choice(keys)
            v = None if rnd.random() < 0.15 else rnd.randbytes(rnd.randint(0, 40))
            recs.append((k, v, [("h", b"x"), ("n", None)]) if rnd.random() < 0.1 else (k, v))
        kw = {"compression": n % 5}
        if n == 5:
            recs.append((None, b"keyless"))
        if n == 9:
            kw["log_append_time"] = NOW - 3_600_000
        if n in (12, 13):
            kw.update(producer_id=7, transactional=True)
        if n == 14:
            recs = [(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 0))]  # COMMIT marker
            kw.update(producer_id=7, transactional=True, control=True, compression=0)
        if aborted and n in (20, 22):
            kw.update(producer_id=9, transactional=True)
        if aborted and n == 23:
            recs = [(struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 0))]  # ABORT marker
            kw.update(producer_id=9, transactional=True, control=True, compression=0)
        out.append((off, _batch(off, recs, **kw)))
        off += len(recs) + (2 if n % 11 == 3 else 0)  # and some offset gaps, as after compaction
    for i in range(0, len(out), batches_per_segment):
        chunk = out[i:i + batches_per_segment]
        with open(os.path.join(path, segment_name(chunk[0][0]) + ".log"), "wb") as f:
            for _o, b in chunk:
                f.write(b)
    return path


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    """Partitions 0-1 as a kcoord server writes them, 2-3 by hand (3 with an aborted
    transaction), 4 a compacted copy of 2 (KIP-534 delete horizons stamped)."""
    root = tmp_path_factory.mktemp("segments")
    d = str(root / "data")
    for p in (0, 1):
        write_partition(d, p, num_partitions=5, seed=p, rounds=4 + p, records_per_batch=3)
    write_mixed_partition(d, 2, seed=2)
    write_mixed_partition(d, 3, seed=3, aborted=True)
    compacted = compact_partition(read_partition_segments(os.path.join(d, f"{TOPIC}-2")), now_ms=NOW)
    os.makedirs(os.path.join(d, f"{TOPIC}-4"))
    for seg in compacted.segments:
        with open(os.path.join(d, f"{TOPIC}-4", segment_name(seg.base_offset) + ".log"), "wb") as f:
            f.write(seg.data)
    return d


def segment_files(log_dir: str) -> list[tuple[int, int, str]]:
    out = []
    for name in sorted(os.listdir(log_dir), key=lambda n: int(n.rpartition("-")[2])):
        p = int(name.rpartition("-")[2])
        for b in segment_bases(os.path.join(log_dir, name)):
            out.append((p, b, os.path.join(log_dir, name, segment_name(b) + ".log")))
    return out


def expected_rows(partition: int, base: int, path: str) -> list[dict]:
    rows = []
    with open(path, "rb") as f:
        data = f.read()
    for h, body in iter_segment_batches(data):
        for off, ts, key, value, headers in iter_records(body, h):
            rows.append(dict(
                partition=partition, segment_base_offset=base, offset=off, timestamp=ts, key=key, value=value,
                headers=[{"key": k, "value": v} for k, v in headers],
                batch_base_offset=h.base_offset, batch_last_offset=h.last_offset, attributes=h.attributes,
                compression=h.compression, log_append_time=h.is_log_append_time,
                is_transactional=h.is_transactional, is_control=h.is_control, producer_id=h.producer_id,
                producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                partition_leader_epoch=h.partition_leader_epoch,
                delete_horizon=h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None))
    return rows


def as_dicts(rows) -> list[dict]:
    out = []
    for r in rows:
        d = r.asDict(recursive=True)
        for k in ("key", "value"):
            d[k] = None if d[k] is None else bytes(d[k])
        for h in d["headers"]:
            h["value"] = None if h["value"] is None else bytes(h["value"])
        out.append(d)
    return out


def load(spark, **options):
    reader = spark.read.format("kafka_segments")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


# ------------------------------------------------------------------------------ the data source


def test_rows_are_the_records_in_offset_order_one_spark_partition_per_segment(spark, log_dir):
    files = segment_files(log_dir)
    df = load(spark, path=log_dir)
    assert df.rdd.getNumPartitions() == len(files)
    want = [r for p, b, path in files for r in expected_rows(p, b, path)]
    got = as_dicts(df.collect())  # Spark partition order: each log partition in offset order
    assert got == want
    # the data has what the test is about
    assert {r["compression"] for r in got} == {0, 1, 2, 3, 4}
    assert any(r["is_control"] for r in got) and any(r["is_transactional"] and not r["is_control"] for r in got)
    assert any(r["log_append_time"] for r in got) and any(r["headers"] for r in got)
    assert any(r["key"] is None for r in got) and any(r["value"] is None for r in got)
    horizons = {r["delete_horizon"] for r in got if r["partition"] == 4} - {None}
    assert horizons == {NOW + DEFAULT_DELETE_RETENTION_MS}
    # one segment per Spark partition
    from pyspark.sql import functions as F

    per_task = (df.select(F.spark_partition_id().alias("task"), "partition", "segment_base_offset").distinct()
                .groupBy("task").count().collect())
    assert all(r["count"] == 1 for r in per_task)


def test_options_select_segments(spark, log_dir):
    files = segment_files(log_dir)
    df = load(spark, path=log_dir, partitions="1,3", excludeActive="true")
    last = {p: max(b for q, b, _ in files if q == p) for p, _b, _ in files}
    want = {(p, b) for p, b, _ in files if p in (1, 3) and b != last[p]}
    assert df.rdd.getNumPartitions() == len(want)
    assert {(r[0], r[1]) for r in df.select("partition", "segment_base_offset").distinct().collect()} == want
    some = [path for _p, _b, path in files[2:5]]
    for paths in (json.dumps(some), ",".join(some)):
        rows = as_dicts(load(spark, paths=paths).collect())
        assert rows == [r for p, b, path in files[2:5] for r in expected_rows(p, b, path)]
    with pytest.raises(Exception, match="path"):
        load(spark).collect()


def test_pack_bytes_reads_consecutive_segments_in_one_task(spark, log_dir):
    """packBytes: small segments share a task, in the planned order, rows unchanged."""
    files = segment_files(log_dir)
    biggest = max(os.path.getsize(path) for _p, _b, path in files)
    assert 3 * biggest < OPEN_COST_BYTES  # so exactly three files fit in a task of this size
    df = load(spark, path=log_dir, packBytes=str(3 * (OPEN_COST_BYTES + biggest)))
    assert len(files) > 3 and df.rdd.getNumPartitions() == -(-len(files) // 3)
    assert as_dicts(df.collect()) == [r for p, b, path in files for r in expected_rows(p, b, path)]
    packed = load(spark, path=log_dir, latestPerKey="true", packBytes=str(3 * (OPEN_COST_BYTES + biggest)))
    assert as_dicts(packed.collect()) == as_dicts(load(spark, path=log_dir, latestPerKey="true").collect())
    # a file bigger than packBytes is a task of its own
    assert load(spark, path=log_dir, packBytes="1").rdd.getNumPartitions() == len(files)


def test_latest_per_key(spark, log_dir):
    files = segment_files(log_dir)
    got = as_dicts(load(spark, path=log_dir, latestPerKey="true").collect())
    want = []
    for p, b, path in files:
        latest = {}
        for r in expected_rows(p, b, path):
            if r["key"] is not None and not r["is_control"]:
                latest[r["key"]] = r
        want += sorted(latest.values(), key=lambda r: r["offset"])
    assert got == want
    # max(offset) per key over the cleanable segments: compaction's key map
    from pyspark.sql import functions as F

    df = load(spark, path=log_dir, latestPerKey="true", excludeActive="true")
    maps = {}
    for r in df.groupBy("partition", "key").agg(F.max("offset").alias("o")).collect():
        maps.setdefault(r["partition"], {})[bytes(r["key"])] = r["o"]
    for p in {p for p, _b, _ in files}:
        segs = read_partition_segments(os.path.join(log_dir, f"{TOPIC}-{p}"))
        assert maps.get(p, {}) == build_key_map([scan_segment(s) for s in segs[:-1]])


def _flip(path: str, pos: int) -> None:
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0xFF]))


def test_corrupt_segments_fail_the_read(spark, log_dir, tmp_path):
    bad = str(tmp_path / "bad")
    shutil.copytree(os.path.join(log_dir, f"{TOPIC}-2"), os.path.join(bad, f"{TOPIC}-2"))
    files = segment_files(bad)
    crc_bad = files[1][2]
    _flip(crc_bad, os.path.getsize(crc_bad) - 3)  # inside the last batch: CRC mismatch
    with pytest.raises(Exception, match=r"(?s)CorruptSegmentError.*" + os.path.basename(crc_bad) + ".*CRC mismatch"):
        load(spark, path=bad).collect()
    with pytest.raises(Exception, match="CRC mismatch"):
        load(spark, path=bad, latestPerKey="true").collect()
    # failOnCorrupt=false: the corrupt segment yields nothing, the others everything
    rows = as_dicts(load(spark, path=bad, failOnCorrupt="false").collect())
    assert rows == [r for p, b, path in files if path != crc_bad for r in expected_rows(p, b, path)]

    # A batch whose CRC is right but whose records do not decode (claims one record more).
    torn = files[2][2]
    with open(torn, "r+b") as f:
        data = bytearray(f.read())
        count = struct.unpack_from(">i", data, 57)[0]
        struct.pack_into(">i", data, 57, count + 1)
        struct.pack_into(">I", data, 17, calc_crc32c(memoryview(data)[21:parse_header(data).size]))
        f.seek(0)
        f.write(data)
    with pytest.raises(Exception, match=r"(?s)" + os.path.basename(torn) + ".*does not decode"):
        load(spark, paths=torn).collect()
    # A torn tail (a batch cut short).
    with open(files[0][2], "r+b") as f:
        f.truncate(os.path.getsize(files[0][2]) - 10)
    with pytest.raises(Exception, match=r"(?s)" + os.path.basename(files[0][2]) + ".*claims"):
        load(spark, paths=files[0][2]).collect()


# ------------------------------------------------------------------------------ the Spark pass


def test_slots_match_spark_hash_partitioning(spark):
    from pyspark.sql import functions as F

    vals = list(range(-5, 300)) + [2**31 - 1, -(2**31)]
    got = spark.createDataFrame([(v,) for v in vals], "v int").select("v", F.hash("v").alias("h")).collect()
    assert {r["v"]: r["h"] for r in got} == {v: spark_hash_int(v) for v in vals}
    for n in (1, 2, 7, 50):
        slots = slot_values(n)
        assert sorted(spark_hash_int(v) % n for v in slots) == list(range(n))


def _plans(log_dir: str, out_dir: str | None) -> list[PartitionPlan]:
    plans = []
    for name in sorted(os.listdir(log_dir)):
        d = os.path.join(log_dir, name)
        p = int(name.rpartition("-")[2])
        bases = segment_bases(d)
        if out_dir is not None:
            plans.append(PartitionPlan(p, d, bases, DirectoryOutput(os.path.join(out_dir, name))))
        elif len(bases) > 1:
            plans.append(PartitionPlan(p, d, bases[:-1], SwapOutput(d, fingerprints(d, bases[:-1])),
                                       active_base=bases[-1]))
    return plans


def _alone(plans: list[PartitionPlan], options: dict) -> list[dict]:
    """compact_partition by itself (process_partition builds its own key map), one by one."""
    logging.getLogger("kcoord.storage").setLevel(logging.ERROR)
    out = []
    for pl in plans:
        segs = [Segment(b, open(path, "rb").read()) for b, path in zip(pl.bases, pl.paths(), strict=True)]
        out.append(process_partition(pl.partition, _segments_of(pl, segs), source_dir=pl.directory,
                                     output=pl.output, **options))
    return out


def _same_tree(a: str, b: str) -> int:
    files = 0
    for dirpath, dirs, names in os.walk(a):
        other = os.path.join(b, os.path.relpath(dirpath, a))
        assert sorted(dirs + names) == sorted(os.listdir(other)), dirpath
        for n in names:
            assert filecmp.cmp(os.path.join(dirpath, n), os.path.join(other, n), shallow=False), n
            files += 1
    return files


def _strip(results: list[dict], *roots: str) -> list[dict]:
    out = []
    for r in results:
        r = {k: v for k, v in r.items() if k != "seconds"}
        extra = dict(r["extra"])
        if "target_dir" in extra:
            extra["target_dir"] = os.path.basename(extra["target_dir"])
        r["extra"] = extra
        out.append(r)
    return sorted(out, key=lambda r: r["partition"])


def test_spark_pass_equals_compact_partition(spark, log_dir, tmp_path):
    """Both output modes, a first cleaning (horizons stamped) and a second one past the
    horizons (tombstones dropped): the Spark pass writes byte for byte what
    compact_partition computes by itself, with the same stats."""
    options = dict(now_ms=NOW, segment_bytes=3000)
    for mode in ("directory", "swap"):
        a, b = str(tmp_path / f"{mode}-alone"), str(tmp_path / f"{mode}-spark")
        shutil.copytree(log_dir, a + "/in")
        shutil.copytree(log_dir, b + "/in")
        out_a = a + "/out" if mode == "directory" else None
        out_b = b + "/out" if mode == "directory" else None
        alone = _alone(_plans(a + "/in", out_a), options)
        spark_results = run_spark(spark, _plans(b + "/in", out_b), options)
        assert not any(r["extra"].get("error") for r in spark_results), spark_results
        assert _strip(spark_results) == _strip(alone)
        assert _same_tree(a, b) > 20
        if mode == "directory":
            assert sum(r["tombstones_kept"] for r in alone) > 0
            # a second cleaning, past the delete horizons, of the first one's output
            later = dict(options, now_ms=NOW + DEFAULT_DELETE_RETENTION_MS + 1)
            alone2 = _alone(_plans(out_a, a + "/out2"), later)
            spark2 = run_spark(spark, _plans(out_b, b + "/out2"), later)
            assert _strip(spark2) == _strip(alone2)
            assert sum(r["tombstones_dropped"] for r in alone2) > 0
            _same_tree(a, b)
        else:
            assert any(n.endswith(".swap") for _d, _s, names in os.walk(b) for n in names)


def test_spark_pass_reports_a_corrupt_partition_and_compacts_the_others(spark, log_dir, tmp_path):
    data = str(tmp_path / "data")
    shutil.copytree(log_dir, data)
    victim = os.path.join(data, f"{TOPIC}-1", "00000000000000000000.log")
    _flip(victim, 100)
    results = run_spark(spark, _plans(data, str(tmp_path / "out")), dict(now_ms=NOW))
    by_p = {r["partition"]: r for r in results}
    assert sorted(by_p) == [0, 1, 2, 3, 4]
    assert "CRC mismatch" in by_p[1]["extra"]["error"] and by_p[1]["verified"] == "error"
    assert not any(r["extra"].get("error") for p, r in by_p.items() if p != 1)
    assert not os.path.exists(tmp_path / "out" / f"{TOPIC}-1" / "00000000000000000000.log")
    # an empty plan list and a partition with nothing to read
    assert run_spark(spark, [], dict(now_ms=NOW)) == []
    os.makedirs(os.path.join(data, f"{TOPIC}-9"))
    empty = PartitionPlan(9, os.path.join(data, f"{TOPIC}-9"), [], DirectoryOutput(str(tmp_path / "out9")))
    (r,) = run_spark(spark, [empty], dict(now_ms=NOW))
    assert r["partition"] == 9 and not r["extra"].get("error") and r["records_in"] == 0
