"""RecordBatch v2 (magic 2) bytes: header parsing, splitting, CRC, in-place patching, building.

Owns the byte layout of a batch as Kafka stores it on disk and sends it on the wire. Records
inside a batch are built and iterated by aiokafka's Cython DefaultRecordBatch(Builder); this
module only touches the 61-byte header, which is all the log needs to assign offsets.

Header layout (big endian):
    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64
    35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32
    57 recordCount int32 | 61 records...
batchLength counts the bytes after itself, so a batch occupies batchLength + 12 bytes. The CRC32C
covers bytes 21..end, so baseOffset and partitionLeaderEpoch can be patched without redoing it.
"""
from __future__ import annotations

import struct
from collections.abc import Iterator

from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.util import calc_crc32c

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "BatchHeader",
    "CorruptBatchError",
    "build_batch",
    "client_batch_problem",
    "crc_ok",
    "iter_batch_records",
    "parse_header",
    "set_base_offset",
    "set_leader_epoch",
    "set_log_append_time",
    "split_batches",
]

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch batchLength does not count
MAGIC = 2
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength
_q = struct.Struct(">q")
_i = struct.Struct(">i")
_I = struct.Struct(">I")
_h = struct.Struct(">h")


class CorruptBatchError(ValueError):
    """Bytes that are not a whole, valid magic-2 record batch (Kafka: CORRUPT_MESSAGE)."""


class BatchHeader:
    """The 61-byte header of one batch, plus where it sits in the buffer it was parsed from."""

    __slots__ = (
        "position", "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc",
        "attributes", "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
        "producer_epoch", "base_sequence", "record_count",
    )

    def __init__(self, position: int, fields: tuple) -> None:
        self.position = position
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic, self.crc,
         self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
         self.producer_id, self.producer_epoch, self.base_sequence, self.record_count) = fields

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    def __repr__(self) -> str:
        return (f"BatchHeader(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"size={self.size}, records={self.record_count}, max_ts={self.max_timestamp})")


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`; CorruptBatchError if short, not magic 2 or mis-sized."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError(f"{len(buf) - pos} bytes is shorter than a batch header")
    h = BatchHeader(pos, _HEADER.unpack_from(buf, pos))
    if h.magic != MAGIC:
        raise CorruptBatchError(f"magic {h.magic} at position {pos} (only magic 2 is supported)")
    if h.batch_length < MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"batch length {h.batch_length} at position {pos} is too small")
    return h


def split_batches(buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
    """Headers of the batches filling `buf` exactly (a produce `records` blob)."""
    out = []
    pos, end = 0, len(buf)
    while pos < end:
        h = parse_header(buf, pos)
        if pos + h.size > end:
            raise CorruptBatchError(f"batch at {pos} claims {h.size} bytes, only {end - pos} left")
        out.append(h)
        pos += h.size
    if not out:
        raise CorruptBatchError("no record batch")
    return out


def crc_ok(buf: bytes | bytearray | memoryview, h: BatchHeader) -> bool:
    """Whether the stored CRC32C matches the batch's bytes from attributes to its end."""
    mv = memoryview(buf)
    return calc_crc32c(mv[h.position + 21:h.position + h.size]) == h.crc


def client_batch_problem(h: BatchHeader) -> str | None:
    """Why Kafka would refuse this producer-written batch (INVALID_RECORD), or None."""
    if h.last_offset_delta < 0:
        return f"invalid offset range: lastOffsetDelta {h.last_offset_delta}"
    if h.record_count <= 0:
        return f"invalid record count {h.record_count}"
    if h.record_count != h.last_offset_delta + 1:
        return f"lastOffsetDelta {h.last_offset_delta} does not match {h.record_count} records"
    if h.is_control:
        return "clients may not write control records"
    if h.producer_id >= 0 and h.base_sequence < 0:
        return f"invalid sequence {h.base_sequence} for producer id {h.producer_id}"
    return None


def set_base_offset(buf: bytearray | memoryview, h: BatchHeader, base_offset: int) -> None:
    """Assign the batch's offsets (bytes 0-7; outside the CRC)."""
    _q.pack_into(buf, h.position, base_offset)
    h.base_offset = base_offset


def set_leader_epoch(buf: bytearray | memoryview, h: BatchHeader, epoch: int) -> None:
    """Stamp partitionLeaderEpoch (bytes 12-15; outside the CRC)."""
    _i.pack_into(buf, h.position + 12, epoch)
    h.partition_leader_epoch = epoch


def set_log_append_time(buf: bytearray | memoryview, h: BatchHeader, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp = timestamp_ms and recompute its CRC.

    Consumers then read every record's timestamp as maxTimestamp; the record deltas stay.
    """
    p = h.position
    h.attributes |= ATTR_LOG_APPEND_TIME
    h.max_timestamp = timestamp_ms
    _h.pack_into(buf, p + 21, h.attributes)
    _q.pack_into(buf, p + 35, timestamp_ms)
    h.crc = calc_crc32c(memoryview(buf)[p + 21:p + h.size])
    _I.pack_into(buf, p + 17, h.crc)


def build_batch(records: list[tuple[bytes | None, bytes | None, int]], base_offset: int = 0,
                leader_epoch: int = -1) -> bytearray:
    """One uncompressed, non-transactional batch (producerId -1) of (key, value, timestamp)."""
    if not records:
        raise ValueError("a batch needs at least one record")
    b = DefaultRecordBatchBuilder(magic=MAGIC, compression_type=0, is_transactional=0,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=2**31 - 1)
    for i, (key, value, ts) in enumerate(records):
        b.append(i, ts, key, value, [])
    buf = b.build()
    _q.pack_into(buf, 0, base_offset)
    _i.pack_into(buf, 12, leader_epoch)
    return buf


def iter_batch_records(batch: bytes | memoryview) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record of one batch, decompressing if needed.

    Control batches (transaction markers) yield nothing: they carry no user records.
    """
    b = DefaultRecordBatch(batch)
    if b.is_control_batch:
        return
    for r in b:
        yield r.offset, r.timestamp, r.key, r.value
