"""A Spark Python Data Source over Kafka log segment files (`<topic>-N/<20-digit base>.log`,
RecordBatch v2), such as kcoord's `__consumer_offsets`:

    from kcoord.sidecar.datasource import register
    register(spark)
    df = (spark.read.format("kafka_segments")
          .option("path", "/data")                 # a log.dirs directory ...
          .option("partitions", "0,3")             # ... optionally only some partitions
          .load())
    spark.read.format("kafka_segments").option("paths", json.dumps([...])).load()  # explicit .log files

One Spark partition per segment file, rows in offset order within it; the segments are
planned ordered by (log partition, base offset), so reading the DataFrame in partition order
gives each log partition in offset order. Every record of every batch is a row (control
records too, flagged `is_control`; an empty batch gives none), with its batch's fields
repeated. Compressed batches are decompressed (aiokafka's DefaultRecordBatch). Each batch is
checked like log recovery checks it (framing, magic, CRC, offsets moving forward): a corrupt
or torn segment raises CorruptSegmentError naming the file and position; nothing is skipped.

Options (case-insensitive):
- `path`: a log directory holding `<topic>-N/` partition directories; or
- `paths`: explicit segment files, a JSON list or comma-separated (partition from the parent
  directory name `<topic>-N`, base offset from the file name); read in the order given;
- `partitionOf`: with `paths`, a JSON list of ints, one per path, to put in the `partition`
  column instead of the directory's number (the compaction job numbers the partitions of
  several topics this way);
- `topic` (default `__consumer_offsets`): the partition directories to list under `path`;
- `partitions`: comma-separated log partition numbers to keep;
- `excludeActive` (default false): with `path`, leave out each partition's last segment
  (the active one, which a running broker appends to and Kafka's cleaner never reads);
- `latestPerKey` (default false): only the last record of each key within each segment
  (a combiner for a per-key latest: the globally latest record of a key is the latest of
  its own segment). Keyless records and control batches are left out in this mode; records
  of aborted or still-open transactions are not (the source does not follow transactions:
  compaction checks them itself and then builds its own map);
- `failOnCorrupt` (default true): false makes a corrupt or unreadable segment yield no rows
  instead of failing the query (the compaction pipeline re-reads such a segment in its
  per-partition step, which reports the error for that partition only);
- `packBytes` (default 0: one segment per Spark partition): consecutive segments, in the
  planned order, share a Spark partition up to this many bytes, each file counted as its size
  plus 4 MiB (Spark's own file sources pack files so, spark.sql.files.maxPartitionBytes and
  openCostInBytes): a topic with a small segment.bytes has hundreds of tiny segments, and a
  task costs far more than reading one of them.
"""
from __future__ import annotations

import gc
import json
import os
import re
from bisect import bisect_right

from aiokafka.record.default_records import DefaultRecordBatch
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from kcoord.sidecar.compaction import ATTR_DELETE_HORIZON, iter_segment_batches
from kcoord.storage.batch import CorruptBatchError

__all__ = ["SCHEMA", "CorruptSegmentError", "KafkaSegmentsDataSource", "SegmentPack", "SegmentPartition", "freeze_worker_heap",
           "read_segment", "register", "segment_partitions"]

NAME = "kafka_segments"
DEFAULT_TOPIC = "__consumer_offsets"
ARROW_BATCH_ROWS = 65_536
_SEGMENT_FILE = re.compile(r"^(\d{20})\.log$")

SCHEMA = StructType([
    StructField("partition", IntegerType(), False),
    StructField("segment_base_offset", LongType(), False),
    StructField("offset", LongType(), False),
    StructField("timestamp", LongType(), False),
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),  # null: a tombstone
    StructField("headers", ArrayType(StructType([StructField("key", StringType(), True),
                                                 StructField("value", BinaryType(), True)]), False), False),
    # the batch the record belongs to
    StructField("batch_base_offset", LongType(), False),
    StructField("batch_last_offset", LongType(), False),
    StructField("attributes", ShortType(), False),
    StructField("compression", IntegerType(), False),  # 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
    StructField("log_append_time", BooleanType(), False),  # timestamp is the broker's
    StructField("is_transactional", BooleanType(), False),
    StructField("is_control", BooleanType(), False),
    StructField("producer_id", LongType(), False),
    StructField("producer_epoch", ShortType(), False),
    StructField("base_sequence", IntegerType(), False),
    StructField("partition_leader_epoch", IntegerType(), False),
    StructField("delete_horizon", LongType(), True),  # KIP-534: set once a cleaning kept its tombstones
])


class CorruptSegmentError(CorruptBatchError):
    """A segment file that does not parse as whole, valid magic-2 record batches."""


class SegmentPartition(InputPartition):
    """One segment file: what one Spark task reads."""

    def __init__(self, path: str, partition: int, base_offset: int) -> None:
        super().__init__((path, partition, base_offset))
        self.path, self.partition, self.base_offset = path, partition, base_offset

    def __repr__(self) -> str:
        return f"SegmentPartition({self.path!r})"


class SegmentPack(InputPartition):
    """Several segment files read one after the other by one Spark task (`packBytes`)."""

    def __init__(self, segments: list[SegmentPartition]) -> None:
        super().__init__(tuple(s.value for s in segments))
        self.segments = segments

    def __repr__(self) -> str:
        return f"SegmentPack({len(self.segments)} segments from {self.segments[0].path!r})"


OPEN_COST_BYTES = 4 << 20  # spark.sql.files.openCostInBytes' default


def pack_segments(segments: list[SegmentPartition], pack_bytes: int) -> list[SegmentPartition | SegmentPack]:
    """Consecutive segments packed into tasks of at most `pack_bytes` (a file bigger than that
    is a task of its own)."""
    out: list[SegmentPartition | SegmentPack] = []
    pack: list[SegmentPartition] = []
    used = 0
    for seg in segments:
        try:
            cost = os.path.getsize(seg.path) + OPEN_COST_BYTES
        except OSError:
            cost = OPEN_COST_BYTES  # reading it reports the error
        if pack and used + cost > pack_bytes:
            out.append(pack[0] if len(pack) == 1 else SegmentPack(pack))
            pack, used = [], 0
        pack.append(seg)
        used += cost
    if pack:
        out.append(pack[0] if len(pack) == 1 else SegmentPack(pack))
    return out


def _options(options) -> dict[str, str]:
    """Spark's options with lower-cased names (they are case-insensitive)."""
    return {str(k).lower(): v for k, v in dict(options).items()}


def _bool(options: dict, name: str, default: bool) -> bool:
    v = options.get(name.lower())
    if v is None:
        return default
    if str(v).strip().lower() in ("true", "1", "yes"):
        return True
    if str(v).strip().lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"{NAME}: option {name} must be true or false, not {v!r}")


def _partition_of_dir(directory: str, topic: str | None = None) -> int:
    name = os.path.basename(os.path.normpath(directory))
    head, _, num = name.rpartition("-")
    if not head or not num.isdigit() or (topic is not None and head != topic):
        raise ValueError(f"{NAME}: {directory} is not a <topic>-<partition> directory")
    return int(num)


def segment_partitions(options) -> list[SegmentPartition]:
    """The planned segments for the options (see the module docstring)."""
    options = _options(options)
    keep = None
    if options.get("partitions"):
        keep = {int(x) for x in str(options["partitions"]).split(",") if x.strip()}
    out: list[SegmentPartition] = []
    if options.get("paths"):
        raw = str(options["paths"]).strip()
        paths = json.loads(raw) if raw.startswith("[") else [p for p in raw.split(",") if p.strip()]
        numbers = json.loads(str(options["partitionof"])) if options.get("partitionof") else None
        if numbers is not None and (len(numbers) != len(paths) or not all(isinstance(n, int) for n in numbers)):
            raise ValueError(f"{NAME}: partitionOf must be a JSON list of ints, one per path")
        for i, p in enumerate(paths):
            p = p.removeprefix("file://")
            m = _SEGMENT_FILE.match(os.path.basename(p))
            if not m:
                raise ValueError(f"{NAME}: {p} is not a <20-digit base offset>.log segment file")
            part = numbers[i] if numbers is not None else _partition_of_dir(os.path.dirname(os.path.abspath(p)))
            if keep is None or part in keep:
                out.append(SegmentPartition(os.path.abspath(p), part, int(m.group(1))))
        return out
    if not options.get("path"):
        raise ValueError(f"{NAME}: give the option path (a log directory) or paths (segment files)")
    log_dir = str(options["path"]).removeprefix("file://")
    topic = options.get("topic") or DEFAULT_TOPIC
    exclude_active = _bool(options, "excludeActive", False)
    pattern = re.compile(rf"^{re.escape(topic)}-(\d+)$")
    dirs = []
    for name in os.listdir(log_dir):
        m = pattern.match(name)
        if m and os.path.isdir(os.path.join(log_dir, name)) and (keep is None or int(m.group(1)) in keep):
            dirs.append((int(m.group(1)), os.path.join(log_dir, name)))
    for part, d in sorted(dirs):
        bases = sorted(int(m.group(1)) for m in map(_SEGMENT_FILE.match, os.listdir(d)) if m)
        if exclude_active:
            bases = bases[:-1]
        out += [SegmentPartition(os.path.join(d, f"{b:020d}.log"), part, b) for b in bases]
    return out


def _records(body, h, where: str) -> list:
    """The records of one batch (decompressed), or CorruptSegmentError."""
    try:
        recs = list(DefaultRecordBatch(body))
    except CorruptBatchError:
        raise
    except Exception as e:  # aiokafka: CorruptRecordError, a codec's error, a short buffer ...
        raise CorruptSegmentError(f"{where}: batch at position {h.position} (offset {h.base_offset}) "
                                  f"does not decode: {type(e).__name__}: {e}") from e
    return recs


def read_segment(path: str, partition: int, base_offset: int, *, latest_per_key: bool = False,
                 max_rows: int = ARROW_BATCH_ROWS):
    """pyarrow RecordBatches (SCHEMA) of one segment file, in offset order."""
    import pyarrow as pa

    arrow_schema = _arrow_schema()
    where = f"segment {path}"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CorruptSegmentError(f"{where}: cannot be read: {e}") from e
    try:
        batches = list(iter_segment_batches(data, where))
    except CorruptSegmentError:
        raise
    except CorruptBatchError as e:
        msg = str(e)
        raise CorruptSegmentError(msg if msg.startswith(where) else f"{where}: {msg}") from e

    # Batch-level columns: one value per batch, spread over the rows with `take`.
    hs = [h for h, _b in batches]
    per_batch = {
        "batch_base_offset": [h.base_offset for h in hs],
        "batch_last_offset": [h.last_offset for h in hs],
        "attributes": [h.attributes for h in hs],
        "compression": [h.compression for h in hs],
        "log_append_time": [h.is_log_append_time for h in hs],
        "is_transactional": [h.is_transactional for h in hs],
        "is_control": [h.is_control for h in hs],
        "producer_id": [h.producer_id for h in hs],
        "producer_epoch": [h.producer_epoch for h in hs],
        "base_sequence": [h.base_sequence for h in hs],
        "partition_leader_epoch": [h.partition_leader_epoch for h in hs],
        "delete_horizon": [h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None for h in hs],
    }
    batch_arrays = {name: pa.array(vals, type=arrow_schema.field(name).type) for name, vals in per_batch.items()}
    headers_type = arrow_schema.field("headers").type
    no_headers = pa.array([], type=headers_type.value_type)
    offset_c: list[int] = []
    ts_c: list[int] = []
    key_c: list = []
    value_c: list = []
    headers_c: list = []
    batch_idx: list[int] = []  # which batch each row comes from

    def flush():
        n = len(offset_c)
        take = pa.array(batch_idx, type=pa.int32())
        if any(headers_c):
            headers = pa.array(headers_c, type=headers_type)
        else:  # the usual case (the coordinator writes no headers): n empty lists
            headers = pa.ListArray.from_arrays(pa.array([0] * (n + 1), type=pa.int32()),
                                               no_headers, type=headers_type)
        arrays = {
            "partition": pa.repeat(pa.scalar(partition, pa.int32()), n),
            "segment_base_offset": pa.repeat(pa.scalar(base_offset, pa.int64()), n),
            "offset": pa.array(offset_c, type=pa.int64()),
            "timestamp": pa.array(ts_c, type=pa.int64()),
            "key": pa.array(key_c, type=pa.binary()),
            "value": pa.array(value_c, type=pa.binary()),
            "headers": headers,
        }
        for name, arr in batch_arrays.items():
            arrays[name] = arr.take(take)
        out = pa.RecordBatch.from_arrays([arrays[f.name] for f in SCHEMA.fields], schema=arrow_schema)
        for c in (offset_c, ts_c, key_c, value_c, headers_c, batch_idx):
            c.clear()
        return out

    if latest_per_key:
        latest: dict = {}
        for h, body in batches:
            if h.is_control:
                continue
            for r in _records(body, h, where):
                latest[r.key] = r
        latest.pop(None, None)  # keyless records
        kept = sorted(latest.values(), key=lambda r: r.offset)
        starts = [h.base_offset for h, _b in batches]
        for r in kept:
            offset_c.append(r.offset)
            ts_c.append(r.timestamp)
            key_c.append(r.key)
            value_c.append(r.value)
            headers_c.append(r.headers)
            batch_idx.append(bisect_right(starts, r.offset) - 1)
            if len(offset_c) >= max_rows:
                yield flush()
    else:
        for i, (h, body) in enumerate(batches):
            if not h.record_count:
                continue
            recs = _records(body, h, where)
            for r in recs:
                offset_c.append(r.offset)
                ts_c.append(r.timestamp)
                key_c.append(r.key)
                value_c.append(r.value)
                headers_c.append(r.headers)
            batch_idx.extend([i] * len(recs))
            if len(offset_c) >= max_rows:
                yield flush()
    if offset_c:
        yield flush()


_ARROW_SCHEMA = None


def _arrow_schema():
    global _ARROW_SCHEMA
    if _ARROW_SCHEMA is None:
        from pyspark.sql.pandas.types import to_arrow_schema

        _ARROW_SCHEMA = to_arrow_schema(SCHEMA, timezone="UTC")
    return _ARROW_SCHEMA


_heap_frozen = False


def freeze_worker_heap() -> None:
    """Once per Python worker process: move everything alive now (pyspark, pyarrow, pandas,
    this project's modules) out of the garbage collector's sight. Spark's reused workers run a
    full gc.collect() after every task, which otherwise walks all of that each time (measured:
    ~30 ms of CPU per task on this project's 2-core machine, more than a small segment's
    parsing). Call it from executor-side code only."""
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.freeze()


class KafkaSegmentsReader(DataSourceReader):
    def __init__(self, options) -> None:
        self.options = options = _options(options)
        self.latest_per_key = _bool(options, "latestPerKey", False)
        self.fail_on_corrupt = _bool(options, "failOnCorrupt", True)

    def partitions(self) -> list[SegmentPartition | SegmentPack]:
        segments = segment_partitions(self.options)
        pack_bytes = int(self.options.get("packbytes") or 0)
        return pack_segments(segments, pack_bytes) if pack_bytes > 0 else segments

    def read(self, partition: SegmentPartition | SegmentPack):
        freeze_worker_heap()
        for seg in partition.segments if isinstance(partition, SegmentPack) else [partition]:
            yield from self._read_one(seg)

    def _read_one(self, partition: SegmentPartition):
        it = read_segment(partition.path, partition.partition, partition.base_offset,
                          latest_per_key=self.latest_per_key)
        if self.fail_on_corrupt:
            yield from it
            return
        try:
            batches = list(it)  # all or nothing for a corrupt segment
        except CorruptBatchError:
            return
        yield from batches


class KafkaSegmentsDataSource(DataSource):
    """`spark.read.format("kafka_segments")`: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMA

    def reader(self, schema: StructType) -> KafkaSegmentsReader:
        return KafkaSegmentsReader(self.options)


def register(spark) -> None:
    """Make `kafka_segments` known to this SparkSession."""
    spark.dataSource.register(KafkaSegmentsDataSource)
