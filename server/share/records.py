"""What a share fetch needs to know of the record batches it read: their offsets, whether they
are control batches, and which belong to aborted transactions (read_committed)."""
from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_ATTR = struct.Struct(">h")
_DELTA = struct.Struct(">i")
_PID = struct.Struct(">q")
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


@dataclass(frozen=True, slots=True)
class BatchInfo:
    base: int
    last: int
    start: int  # byte position in the read
    end: int
    producer_id: int
    transactional: bool
    control: bool


def batches(data: bytes) -> list[BatchInfo]:
    out = []
    pos, n = 0, len(data)
    while n - pos >= 61:
        base, length = _HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if end > n:
            break
        (attr,) = _ATTR.unpack_from(data, pos + 21)
        (delta,) = _DELTA.unpack_from(data, pos + 23)
        (pid,) = _PID.unpack_from(data, pos + 43)
        out.append(BatchInfo(base, base + delta, pos, end, pid, bool(attr & _TRANSACTIONAL), bool(attr & _CONTROL)))
        pos = end
    return out


def undeliverable(infos: Iterable[BatchInfo], aborted: Iterable[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """Offset ranges a share consumer never gets: control batches, and (read_committed, with
    the aborted transactions (producer id, first offset) the read overlaps) the batches of
    aborted transactions, as a read_committed consumer skips them."""
    pending = sorted(aborted or (), key=lambda a: a[1])
    active: set[int] = set()
    out = []
    for b in infos:
        while pending and pending[0][1] <= b.last:
            active.add(pending.pop(0)[0])
        if b.control:
            out.append((b.base, b.last))
            active.discard(b.producer_id)  # its transaction's marker ends it
        elif b.transactional and b.producer_id in active:
            out.append((b.base, b.last))
    return out
