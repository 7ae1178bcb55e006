"""Pure compaction of one __consumer_offsets partition, the way Kafka's log cleaner does it for
cleanup.policy=compact. No Spark here: the Spark job (sidecar/compact.py) calls these functions
inside its executors, and the unit tests call them directly.

Semantics (Kafka's Cleaner, one full cleaning round from the log start; no cleaner checkpoint):

- The cleanable range is every segment but the last (the active segment), which is left
  byte-for-byte untouched, as Kafka never cleans the active segment.
- The key map is built over the cleanable range only: raw key bytes -> highest offset. A
  record of the cleanable range is retained iff it is the highest offset of its key there.
  (A newer value of the same key in the active segment does not remove the older one: Kafka's
  map stops at the first uncleanable offset too. Replaying gives the same state either way.)
- Tombstones (null value) that are the latest of their key follow KIP-534: the first cleaning
  keeps them and stamps their batch with a delete horizon (now + delete.retention.ms, in the
  base timestamp, attribute bit 6); a later cleaning at or past the horizon drops them.
  Records without a key are dropped (Kafka counts them as invalid).
- Retained records keep their offsets. A batch whose records are all retained is copied
  verbatim (unless it needs a horizon); a partly retained one is rebuilt with the same base
  offset, leader epoch, producer id/epoch/base sequence, transactional flag, timestamp type
  and compression (so it has offset gaps); a batch that loses every record disappears,
  except the last batch of each output segment, which stays as an empty batch (Kafka's
  RETAIN_EMPTY) so that the new segment spans exactly the offsets of the segments it
  replaces.
- Transactions, as Kafka's cleaner and loader see them (storage/transactions.py): records of
  aborted transactions are removed; batches of transactions still open at the active segment
  (their marker, if any, is not in the cleaned range) are copied untouched; neither enters
  the key map. Committed transactional batches are cleaned like the others and keep their
  flag and producer fields. Control batches (markers) are kept (Kafka removes them later,
  once their transaction's records are gone; they are a few dozen bytes each).
- Cleaned segments are grouped like Kafka's groupSegmentsBySize (consecutive segments while
  their total input size fits segment.bytes and the offsets fit a segment's int32 relative
  range); each group becomes one segment named after its first segment's base offset, even
  when it ends up empty (so the log start offset never moves).
"""
from __future__ import annotations

import os
import struct
from dataclasses import asdict, dataclass, field

from aiokafka.record.default_records import (
    DefaultRecordBatch,
    DefaultRecordBatchBuilder,
    _DefaultRecordBatchBuilderPy,
)
from aiokafka.record.util import calc_crc32c

from kcoord.storage.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    MIN_BATCH_LENGTH,
    BatchHeader,
    CorruptBatchError,
    crc_ok,
    parse_header,
    set_log_append_time,
)
from kcoord.storage.segment import MAX_RELATIVE_OFFSET
from kcoord.storage.transactions import transaction_outcomes

__all__ = [
    "ATTR_DELETE_HORIZON",
    "CleanedGroup",
    "CompactedPartition",
    "PartitionStats",
    "Segment",
    "compact_partition",
    "iter_segment_batches",
    "iter_records",
]

ATTR_DELETE_HORIZON = 0x40  # KIP-534: baseTimestamp holds the delete horizon
DEFAULT_DELETE_RETENTION_MS = 86_400_000
DEFAULT_SEGMENT_BYTES = 104_857_600  # offsets.topic.segment.bytes

_HEADER = struct.Struct(">qiibIhiqqqhii")
_ATTRIBUTES_LOW = 22  # the low byte of a batch's int16 attributes
_GZIP = 1
_q = struct.Struct(">q")
_i = struct.Struct(">i")
_I = struct.Struct(">I")


@dataclass(slots=True)
class Segment:
    """One segment's .log bytes and its base offset (from the file name)."""

    base_offset: int
    data: bytes


@dataclass(slots=True)
class PartitionStats:
    topic: str = "__consumer_offsets"
    partition: int = -1
    segments_in: int = 0
    segments_out: int = 0
    batches_in: int = 0
    batches_out: int = 0
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    superseded_dropped: int = 0  # older values of a key
    tombstones_dropped: int = 0  # latest-of-key tombstones past delete.retention.ms
    tombstones_kept: int = 0  # tombstones still in the output (cleaned range + active segment)
    keyless_dropped: int = 0
    aborted_dropped: int = 0  # records of aborted transactions
    log_start_offset: int = 0
    log_end_offset: int = 0
    verified: str = "-"
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(slots=True)
class CleanedGroup:
    """One output segment of the cleanable range and the input segments it replaces."""

    replaces: list[int]  # base offsets of the input segments, oldest first
    segment: Segment  # named after replaces[0]; spans the same offsets


@dataclass(slots=True)
class CompactedPartition:
    groups: list[CleanedGroup]  # the cleaned range, oldest first
    active: Segment | None  # the input's active segment, verbatim
    stats: PartitionStats
    # Closed segments past the cleanable range (from the one holding the first offset of a
    # transaction still open), verbatim: they are not swapped.
    untouched: list[Segment] = field(default_factory=list)

    @property
    def segments(self) -> list[Segment]:
        """Every output segment, oldest first, the active one last."""
        return [g.segment for g in self.groups] + self.untouched + ([self.active] if self.active else [])


def iter_segment_batches(data: bytes | bytearray | memoryview, where: str = "segment"):
    """(header, batch memoryview) of every batch of a .log image, checked like recovery
    (framing, magic, CRC, offsets moving forward). Raises CorruptBatchError on any problem:
    compaction refuses to guess what a torn or corrupt log means (start the server once to
    let recovery cut it, or fix it by hand)."""
    mv = memoryview(data)
    pos, end = 0, len(mv)
    expected = -1
    while pos < end:
        h = parse_header(mv, pos)
        if pos + h.size > end:
            raise CorruptBatchError(f"{where}: batch at {pos} claims {h.size} bytes, {end - pos} left")
        if not crc_ok(mv, h):
            raise CorruptBatchError(f"{where}: CRC mismatch in batch at position {pos}")
        if h.last_offset_delta < 0 or h.base_offset < expected:
            raise CorruptBatchError(f"{where}: offsets go backwards at position {pos}")
        expected = h.next_offset
        yield h, mv[pos:pos + h.size]
        pos += h.size


def iter_records(batch: memoryview | bytes, h: BatchHeader):
    """(offset, timestamp, key, value, headers) of a data batch's records."""
    for r in DefaultRecordBatch(batch):
        yield r.offset, r.timestamp, r.key, r.value, r.headers


def _delete_horizon(h: BatchHeader) -> int | None:
    return h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None


def scan_segment(seg: Segment) -> list[tuple[BatchHeader, memoryview]]:
    """Every batch of a segment, checked once (CRC included)."""
    return list(iter_segment_batches(seg.data, f"segment {seg.base_offset}"))


def segment_key_map(batches: list[tuple[BatchHeader, memoryview]],
                    into: dict[bytes, int] | None = None, skip: set[int] | frozenset = frozenset()) -> dict[bytes, int]:
    """Raw key bytes -> highest offset over one segment's batches, merged into `into`
    (segments must be given oldest first: offsets only grow, so the last one seen wins).
    Batches whose base offset is in `skip` (uncommitted transactions) do not count."""
    latest: dict[bytes, int] = {} if into is None else into
    for h, body in batches:
        if h.is_control or h.base_offset in skip:
            continue
        for off, _ts, key, _v, _hd in iter_records(body, h):
            if key is not None:
                latest[key] = off
    return latest


def build_key_map(scanned: list[list[tuple[BatchHeader, memoryview]]],
                  skip: set[int] | frozenset = frozenset()) -> dict[bytes, int]:
    """Raw key bytes -> highest offset, over the given (cleanable) segments' batches."""
    latest: dict[bytes, int] = {}
    for batches in scanned:
        segment_key_map(batches, latest, skip)
    return latest


class _HorizonBatchBuilder(_DefaultRecordBatchBuilderPy):
    """aiokafka's batch builder, with KIP-534's delete horizon as the base timestamp (record
    timestamp deltas are relative to it, as in Kafka) and attribute bit 6 set."""

    def __init__(self, delete_horizon: int, **kw) -> None:
        super().__init__(**kw)
        self._first_timestamp = delete_horizon
        self._max_timestamp = -1

    def _get_attributes(self, include_compression_type: bool = True) -> int:
        return super()._get_attributes(include_compression_type) | ATTR_DELETE_HORIZON


def _rebuild(h: BatchHeader, kept: list[tuple], delete_horizon: int | None = None) -> bytearray:
    """A batch of the retained records of `h`, keeping its offsets and properties; with
    `delete_horizon`, stamped with it (KIP-534)."""
    kw = dict(magic=2, compression_type=h.compression,
              is_transactional=1 if h.attributes & ATTR_TRANSACTIONAL else 0,
              producer_id=h.producer_id, producer_epoch=h.producer_epoch,
              base_sequence=h.base_sequence, batch_size=2**31 - 1)
    b = DefaultRecordBatchBuilder(**kw) if delete_horizon is None else _HorizonBatchBuilder(delete_horizon, **kw)
    for off, ts, key, value, headers in kept:
        b.append(off - h.base_offset, ts, key, value, headers)
    buf = b.build()
    if buf[_ATTRIBUTES_LOW] & ATTR_COMPRESSION_MASK == _GZIP:
        # Python's gzip stamps the stream with the current time (Java's GZIPOutputStream, so
        # Kafka, writes 0): zero it so that the output is a function of the input only.
        buf[HEADER_SIZE + 4:HEADER_SIZE + 8] = bytes(4)
        _I.pack_into(buf, 17, calc_crc32c(memoryview(buf)[21:]))
    _q.pack_into(buf, 0, h.base_offset)
    _i.pack_into(buf, 12, h.partition_leader_epoch)
    if h.attributes & ATTR_LOG_APPEND_TIME:
        set_log_append_time(buf, parse_header(buf), h.max_timestamp)
    return buf


def empty_batch(h: BatchHeader) -> bytearray:
    """Kafka's empty batch header for `h` (RETAIN_EMPTY): no records, same offset range."""
    attrs = h.attributes & (ATTR_LOG_APPEND_TIME | ATTR_TRANSACTIONAL | ATTR_CONTROL)
    buf = bytearray(HEADER_SIZE)
    _HEADER.pack_into(buf, 0, h.base_offset, MIN_BATCH_LENGTH, h.partition_leader_epoch, 2, 0,
                      attrs, h.last_offset_delta, h.max_timestamp, h.max_timestamp,
                      h.producer_id, h.producer_epoch, h.base_sequence, 0)
    _I.pack_into(buf, 17, calc_crc32c(memoryview(buf)[21:]))
    return buf


def group_segments(segments: list[Segment], segment_bytes: int, upper_bound: int) -> list[list[Segment]]:
    """Kafka's groupSegmentsBySize (without the index-size limits, which 8-byte entries every
    4 KiB never reach below 2 GiB segments)."""
    groups: list[list[Segment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = len(segments[i].data)
        i += 1
        while i < len(segments):
            nxt = segments[i]
            last_off = (segments[i + 1].base_offset if i + 1 < len(segments) else upper_bound) - 1
            if size + len(nxt.data) > segment_bytes:
                break
            if nxt.data and last_off - group[0].base_offset > MAX_RELATIVE_OFFSET:
                break
            group.append(nxt)
            size += len(nxt.data)
            i += 1
        groups.append(group)
    return groups


def _clean_batch(h: BatchHeader, body: memoryview, key_map: dict[bytes, int], now_ms: int,
                 delete_retention_ms: int, st: PartitionStats) -> bytes | bytearray | memoryview | None:
    """The retained form of one data batch: verbatim, rebuilt, or None (nothing retained)."""
    horizon = _delete_horizon(h)
    recs = list(iter_records(body, h))
    st.records_in += len(recs)
    kept = []
    tombstones = 0
    for rec in recs:
        off, key, value = rec[0], rec[2], rec[3]
        if key is None:
            st.keyless_dropped += 1
            continue
        if key_map.get(key) != off:
            st.superseded_dropped += 1
            continue
        if value is None:
            # KIP-534: a tombstone survives its first cleaning, which stamps the batch with
            # a delete horizon (now + delete.retention.ms); a later cleaning past it drops it.
            if horizon is not None and now_ms >= horizon:
                st.tombstones_dropped += 1
                continue
            tombstones += 1
        kept.append(rec)
    st.records_out += len(kept)
    st.tombstones_kept += tombstones
    if not kept:
        return None
    if tombstones and horizon is None:
        return _rebuild(h, kept, now_ms + delete_retention_ms)
    if len(kept) == len(recs):
        return body  # untouched: verbatim (Kafka copies it as is)
    return _rebuild(h, kept, horizon)


def compact_partition(segments: list[Segment], *, now_ms: int,
                      delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS,
                      segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                      partition: int = -1,
                      key_map: dict[bytes, int] | None = None) -> CompactedPartition:
    """Compact one partition given all its segments (any order; the highest base offset is the
    active segment). `now_ms` is the cleaner's clock (tombstone delete horizons). `key_map`,
    if given, is the cleanable range's key -> highest offset map computed elsewhere (the Spark
    job builds it in parallel); otherwise it is built here."""
    segments = sorted(segments, key=lambda s: s.base_offset)
    st = PartitionStats(partition=partition, segments_in=len(segments))
    if not segments:
        return CompactedPartition([], None, st)
    active = segments[-1]
    scanned = {seg.base_offset: scan_segment(seg) for seg in segments}
    # Transactions, as Kafka's cleaner: decided by their markers anywhere in the log, the
    # active segment included; aborted records go and supersede nothing. The cleanable range
    # ends before the segment holding the first offset of a transaction still open (Kafka's
    # first unstable offset): cleaning past it could drop a tombstone that shadows an open
    # transaction's record, which its later COMMIT would bring back.
    aborted, still_open = transaction_outcomes(hb for s in segments for hb in scanned[s.base_offset])
    first_unstable = min(still_open, default=active.base_offset)
    cleanable = [s for i, s in enumerate(segments[:-1]) if segments[i + 1].base_offset <= first_unstable]
    untouched = segments[len(cleanable):-1]
    if key_map is None or aborted or untouched:
        key_map = build_key_map([scanned[s.base_offset] for s in cleanable], aborted)

    groups: list[CleanedGroup] = []
    upper = untouched[0].base_offset if untouched else active.base_offset
    for group in group_segments(cleanable, segment_bytes, upper):
        batches = [hb for seg in group for hb in scanned[seg.base_offset]]
        parts: list[bytes | bytearray | memoryview] = []
        for n, (h, body) in enumerate(batches, 1):
            st.batches_in += 1
            if h.is_control:
                cleaned = body
                st.records_in += h.record_count
                st.records_out += h.record_count
            elif h.base_offset in aborted:
                cleaned = None
                st.records_in += h.record_count
                st.aborted_dropped += h.record_count
            else:
                cleaned = _clean_batch(h, body, key_map, now_ms, delete_retention_ms, st)
            if cleaned is None and n == len(batches):
                # The group's last batch always stays (empty if need be, Kafka's RETAIN_EMPTY):
                # the new segment then spans the old group's offsets, which is how a .swap
                # file says which old segments it replaces.
                cleaned = empty_batch(h)
            if cleaned is not None:
                parts.append(cleaned)
                st.batches_out += 1
        data = b"".join(parts)
        st.bytes_in += sum(len(seg.data) for seg in group)
        st.bytes_out += len(data)
        groups.append(CleanedGroup([seg.base_offset for seg in group], Segment(group[0].base_offset, data)))

    # The untouched segments and the active one: only counted.
    for seg in untouched:
        st.bytes_in += len(seg.data)
        st.bytes_out += len(seg.data)
        for h, _body in scanned[seg.base_offset]:
            st.batches_in += 1
            st.batches_out += 1
            st.records_in += h.record_count
            st.records_out += h.record_count
    st.bytes_in += len(active.data)
    st.bytes_out += len(active.data)
    for h, body in scanned[active.base_offset]:
        st.batches_in += 1
        st.batches_out += 1
        if h.is_control:
            continue
        for _off, _ts, _k, value, _hd in iter_records(body, h):
            st.records_in += 1
            st.records_out += 1
            if value is None:
                st.tombstones_kept += 1
        st.log_end_offset = h.next_offset
    if not st.log_end_offset:
        st.log_end_offset = active.base_offset
    st.log_start_offset = segments[0].base_offset
    st.segments_out = len(groups) + len(untouched) + 1
    return CompactedPartition(groups, Segment(active.base_offset, bytes(active.data)), st, list(untouched))


def read_partition_segments(path: str) -> list[Segment]:
    """Every `<20 digits>.log` of a partition directory (used by tests, the bench and --verify)."""
    segs = []
    for name in os.listdir(path):
        if len(name) == 24 and name.endswith(".log") and name[:20].isdigit():
            with open(os.path.join(path, name), "rb") as f:
                segs.append(Segment(int(name[:20]), f.read()))
    return sorted(segs, key=lambda s: s.base_offset)


