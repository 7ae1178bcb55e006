"""`<base offset>.txnindex`: the aborted transactions of a segment, Kafka's TransactionIndex.

Each entry is 34 bytes, big endian: int16 version (0) | int64 producerId | int64 firstOffset |
int64 lastOffset | int64 lastStableOffset. An entry goes into the index of the segment that
holds its ABORT marker (lastOffset is the marker's offset; lastStableOffset the partition's LSO
once the transaction was complete). The file exists only once a segment has an entry.

Like .index / .timeindex the file is derived data: the partition's transaction state is rebuilt
from the log's batches (server/partition_txns.py) and the files are rewritten when they differ,
so they are never fsynced.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from kcoord.storage.segment import segment_name

__all__ = ["ENTRY_SIZE", "AbortedTxn", "append_entry", "decode_entries", "encode_entries", "read_entries",
           "sync_txn_index", "txn_index_path"]

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def txn_index_path(dir_path: str, base_offset: int) -> str:
    return os.path.join(dir_path, segment_name(base_offset) + ".txnindex")


def encode_entries(entries: list[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                    for e in entries)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Whole entries of version 0; a torn tail or an unknown version ends the list (Kafka
    refuses an unknown version; the caller rebuilds the file from the log anyway)."""
    out = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != VERSION:
            break
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def read_entries(path: str) -> list[AbortedTxn] | None:
    try:
        with open(path, "rb") as f:
            return decode_entries(f.read())
    except FileNotFoundError:
        return None


def sync_txn_index(path: str, entries: list[AbortedTxn]) -> bool:
    """Make the file hold exactly `entries` (no file when there are none); True if it changed."""
    want = encode_entries(entries)
    try:
        with open(path, "rb") as f:
            have: bytes | None = f.read()
    except FileNotFoundError:
        have = None
    if (have is None and not want) or have == want:
        return False
    if not want:
        os.unlink(path)
        return True
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(want)
    os.replace(tmp, path)
    return True


def append_entry(path: str, entry: AbortedTxn) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, encode_entries([entry]))
    finally:
        os.close(fd)
