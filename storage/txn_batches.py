"""Batches a transaction coordinator writes: transaction markers (control batches) and the
transactional batches of coordinator records (TxnOffsetCommit into __consumer_offsets).

A marker is Kafka's EndTransactionMarker: a batch with the transactional and control
attribute bits (0x30), the producer's id and epoch, baseSequence -1, and one record whose key is
(int16 version 0, int16 type: 0 ABORT, 1 COMMIT) and whose value is (int16 version 0, int32
coordinatorEpoch). Offsets are assigned by the log on append (bytes 0-7 are outside the CRC).
"""
from __future__ import annotations

import struct

from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from aiokafka.record.util import calc_crc32c

from kcoord.storage.batch import ATTR_CONTROL, MAGIC
from kcoord.storage.transactions import ABORT, COMMIT

__all__ = ["build_marker", "build_transactional_batch", "marker_key", "marker_value"]

_hh = struct.Struct(">hh")
_hi = struct.Struct(">hi")
_h = struct.Struct(">h")
_I = struct.Struct(">I")
_ATTRIBUTES = 21
_CRC = 17


def marker_key(commit: bool) -> bytes:
    return _hh.pack(0, COMMIT if commit else ABORT)


def marker_value(coordinator_epoch: int) -> bytes:
    return _hi.pack(0, coordinator_epoch)


def marker_coordinator_epoch(batch: bytes | memoryview) -> int:
    """The coordinator epoch of a marker batch (its one control record's value: version,
    coordinator epoch); -1 when it cannot be read."""
    try:
        for r in DefaultRecordBatch(bytes(batch)):
            if r.value is not None and len(r.value) >= _hi.size:
                return _hi.unpack_from(r.value)[1]
    except Exception:  # noqa: BLE001 - a marker we cannot read fences nothing
        pass
    return -1


def _builder(producer_id: int, producer_epoch: int) -> DefaultRecordBatchBuilder:
    return DefaultRecordBatchBuilder(magic=MAGIC, compression_type=0, is_transactional=1,
                                     producer_id=producer_id, producer_epoch=producer_epoch,
                                     base_sequence=-1, batch_size=2**31 - 1)


def build_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp_ms: int) -> bytearray:
    b = _builder(producer_id, producer_epoch)
    b.append(0, timestamp_ms, marker_key(commit), marker_value(coordinator_epoch), [])
    buf = b.build()
    attributes = _h.unpack_from(buf, _ATTRIBUTES)[0] | ATTR_CONTROL
    _h.pack_into(buf, _ATTRIBUTES, attributes)
    _I.pack_into(buf, _CRC, calc_crc32c(memoryview(buf)[_ATTRIBUTES:]))
    return buf


def build_transactional_batch(records: list[tuple[bytes, bytes | None]], producer_id: int, producer_epoch: int,
                              timestamp_ms: int) -> bytearray:
    """One uncompressed transactional batch of (key, value) records, all at timestamp_ms."""
    if not records:
        raise ValueError("a batch needs at least one record")
    b = _builder(producer_id, producer_epoch)
    for i, (k, v) in enumerate(records):
        b.append(i, timestamp_ms, k, v, [])
    return b.build()
