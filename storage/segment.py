"""One log segment: `<20-digit base offset>.log` and its `.index` / `.timeindex`, Kafka's layout.

Owns a segment's files and in-memory indexes: scanning and recovering the .log, appending
whole batches, locating the batch holding an offset or timestamp, and reading byte ranges.

- .index: 8-byte entries (int32 offset relative to the base, int32 file position). Like Kafka
  an entry names the *last* offset of the batch starting at that position, and one is added
  when a batch starts more than `index_interval_bytes` after the previous entry.
- .timeindex: 12-byte entries (int64 timestamp, int32 relative offset): when an index entry
  is added and the segment's max timestamp rose since the last time entry, the max so far and
  the last offset of the (first) batch that reached it; plus a final entry when the segment
  is sealed at roll.

The active segment also keeps a dense index in memory: every batch's last offset and end
position (two int64 arrays, 16 bytes a batch, up to DENSE_LIMIT batches), so a fetch finds its position and cuts its
answer at a batch boundary with two binary searches and reads the bytes with one pread, where
the sparse index alone costs a pread per batch header. Sealing a segment drops it (reads of
closed segments are catch-up reads: the sparse index and header reads serve them).

Every batch is scanned (CRC included) when a segment opens, so the indexes are always rebuilt
in memory from the .log; the files on disk are rewritten only when they differ (missing,
stale, or Kafka's preallocated trailing zeros). That is also why index files are never
fsynced: a lost index entry costs nothing but a rewrite at the next start.
"""
from __future__ import annotations

import logging
import os
import random
import struct
import time
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator

from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.record.util import calc_crc32c

from kcoord.storage.batch import (
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
)

log = logging.getLogger(__name__)

__all__ = ["INDEX_INTERVAL_BYTES", "LogSegment", "UnsupportedLogFormatError", "scan_batches", "segment_name"]

INDEX_INTERVAL_BYTES = 4096
SCAN_CHUNK = 8 * 1024 * 1024
MAX_RELATIVE_OFFSET = 2**31 - 1
DENSE_LIMIT = 1 << 20

_HEADER = struct.Struct(">qiibIhiqqqhii")
_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def segment_name(base_offset: int) -> str:
    """Kafka's file stem: the base offset as 20 zero-padded digits."""
    return f"{base_offset:020d}"


def _pread_exact(fd: int, n: int, pos: int) -> bytes:
    data = os.pread(fd, n, pos)
    while len(data) < n:  # pread may return short on some filesystems; loop until EOF
        more = os.pread(fd, n - len(data), pos + len(data))
        if not more:
            break
        data += more
    return data


def scan_batches(fd: int, start: int, end: int, *, verify_crc: bool = True,
                 chunk: int = SCAN_CHUNK) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, batch bytes) for each whole, valid batch in fd[start:end], stopping silently at
    the first one that is torn, mis-framed or (with verify_crc) fails its CRC.

    Header positions are file positions. The memoryview is only valid until the next item.
    The caller learns where valid data ends from the last header's position + size.
    """
    unpack = _HEADER.unpack_from
    pos = start
    while pos < end:
        buf = _pread_exact(fd, min(max(chunk, HEADER_SIZE), end - pos), pos)
        mv = memoryview(buf)
        n = len(buf)
        p = 0
        while True:
            if n - p < HEADER_SIZE:
                break
            fields = unpack(buf, p)
            length = fields[1]
            size = length + LOG_OVERHEAD
            if fields[3] != MAGIC or length < MIN_BATCH_LENGTH or pos + p + size > end:
                return
            if p + size > n:
                if p == 0:
                    # One batch larger than the chunk: read it whole.
                    buf = _pread_exact(fd, size, pos)
                    if len(buf) < size:
                        return
                    mv = memoryview(buf)
                    n = size
                else:
                    break
            body = mv[p:p + size]
            if verify_crc and calc_crc32c(body[21:]) != fields[4]:
                return
            yield BatchHeader(pos + p, fields), body
            p += size
        if p == 0:
            return  # not even a header fits before `end`: a torn tail
        pos += p


class UnsupportedLogFormatError(Exception):
    """The segment holds valid messages in the pre-0.11 formats (magic 0/1)."""


class LogSegment:
    """A segment's three files and its in-memory offset and time indexes."""

    # most batches the dense index holds (16 bytes each: 16 MiB); past it, the sparse index
    dense_limit = DENSE_LIMIT

    def __init__(self, dir_path: str, base_offset: int, *,
                 index_interval_bytes: int = INDEX_INTERVAL_BYTES, create: bool = False,
                 created_ms: int | None = None) -> None:
        self.dir_path = dir_path
        self.base_offset = base_offset
        # segment.ms: when this segment object was made (Kafka's `created`, the roll clock of a
        # segment whose first batch has no timestamp) and its share of segment.jitter.ms
        # (Kafka draws a random jitter per segment; the seed keeps it fixed for the segment).
        self.created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        self.roll_jitter_seed = random.getrandbits(31)
        stem = os.path.join(dir_path, segment_name(base_offset))
        self.log_path = stem + ".log"
        self.index_path = stem + ".index"
        self.timeindex_path = stem + ".timeindex"
        self.index_interval_bytes = index_interval_bytes
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if create else 0)
        self.fd = os.open(self.log_path, flags, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.synced_size = self.size  # what a flush has made durable (bytes already there count)
        self._reset_indexes()
        self._index_fd = -1
        self._timeindex_fd = -1
        self.sealed = False
        if create:
            self._rewrite_index_files()

    # ------------------------------------------------------------------ recovery

    def recover(self, verify_crc: bool = True) -> int:
        """Scan the .log, rebuild indexes, cut anything after the last valid batch.

        Returns how many bytes were dropped from the end of the file (0 when clean).
        """
        self._reset_indexes()
        valid = 0
        expected = self.base_offset
        for h, _ in scan_batches(self.fd, 0, self.size, verify_crc=verify_crc):
            # Offsets only move forward (gaps are fine: compaction leaves them).
            if h.base_offset < expected or h.last_offset - self.base_offset > MAX_RELATIVE_OFFSET \
                    or h.last_offset_delta < 0:
                break
            self._track_batch(h, h.position)
            valid = h.position + h.size
            expected = h.next_offset
        dropped = self.size - valid
        if dropped and self._legacy_message_at(valid):
            # Cutting here would delete real data we merely cannot read: refuse instead.
            raise UnsupportedLogFormatError(
                f"{self.log_path}: message format v0/v1 at position {valid}; only magic 2 is supported")
        if dropped:
            os.ftruncate(self.fd, valid)
            self.size = valid
        self.synced_size = self.size
        return dropped

    def _legacy_message_at(self, pos: int) -> bool:
        """Whether a whole magic 0/1 message with a valid CRC32 starts at pos (not garbage)."""
        head = os.pread(self.fd, 17, pos)
        if len(head) < 17 or head[16] not in (0, 1):
            return False
        _, size, crc = struct.unpack_from(">qiI", head)
        if size < 14 or pos + LOG_OVERHEAD + size > self.size:
            return False
        body = _pread_exact(self.fd, size - 4, pos + 16)
        return zlib.crc32(body) == crc

    def _reset_indexes(self) -> None:
        """Forget what the segment holds (it is rescanned); index entries are kept as absolute
        offsets, the files hold them relative to base_offset."""
        self.next_offset = self.base_offset
        self.has_transactions = False  # a transactional batch: loading must look for markers
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        # Kafka's rollingBasedTimestamp: the largest timestamp of the first append to the empty
        # segment, or of its first batch when it was read from disk. None: empty.
        self.rolling_timestamp: int | None = None
        self._idx_off = array("q")
        self._idx_pos = array("q")
        self._ti_ts = array("q")
        self._ti_off = array("q")
        self._last_index_pos = 0
        # the dense index of an active segment: last offset and end position of every batch
        # (batches are contiguous from position 0, so batch i starts where i-1 ends)
        self._dense = not getattr(self, "sealed", False)
        self._b_last = array("q")
        self._b_end = array("q")

    def _track_batch(self, h: BatchHeader, pos: int) -> tuple[bytes, bytes]:
        """Account for a batch at file position `pos`; returns index/timeindex bytes to add."""
        self.next_offset = h.base_offset + h.last_offset_delta + 1
        if self.rolling_timestamp is None:
            self.rolling_timestamp = h.max_timestamp
        if h.attributes & ATTR_TRANSACTIONAL:
            self.has_transactions = True
        if h.max_timestamp > self.max_timestamp:
            self.max_timestamp = h.max_timestamp
            self.offset_of_max_timestamp = h.base_offset + h.last_offset_delta
        if self._dense:
            if len(self._b_end) >= self.dense_limit:  # a segment of tiny batches: the sparse index serves it
                self._drop_dense()
            else:
                self._b_last.append(self.next_offset - 1)
                self._b_end.append(pos + h.batch_length + LOG_OVERHEAD)
        if pos - self._last_index_pos <= self.index_interval_bytes:
            return b"", b""
        self._last_index_pos = pos
        last = h.base_offset + h.last_offset_delta
        self._idx_off.append(last)
        self._idx_pos.append(pos)
        idx = _INDEX_ENTRY.pack(last - self.base_offset, pos)
        return idx, self._maybe_time_entry()

    def _maybe_time_entry(self) -> bytes:
        if self.max_timestamp < 0 or (self._ti_ts and self.max_timestamp <= self._ti_ts[-1]):
            return b""
        self._ti_ts.append(self.max_timestamp)
        self._ti_off.append(self.offset_of_max_timestamp)
        return _TIME_ENTRY.pack(self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)

    def _index_bytes(self) -> tuple[bytes, bytes]:
        base = self.base_offset
        idx = b"".join(_INDEX_ENTRY.pack(o - base, p) for o, p in zip(self._idx_off, self._idx_pos, strict=True))
        tidx = b"".join(_TIME_ENTRY.pack(t, o - base) for t, o in zip(self._ti_ts, self._ti_off, strict=True))
        return idx, tidx

    def sync_index_files(self) -> bool:
        """Make the .index/.timeindex files match memory; True if they had to be rewritten."""
        want_idx, want_tidx = self._index_bytes()
        if _read_stripped(self.index_path, 8) == want_idx and \
                _read_stripped(self.timeindex_path, 12) == want_tidx:
            self._open_index_fds(truncate_to=(len(want_idx), len(want_tidx)))
            return False
        self._rewrite_index_files()
        return True

    def _rewrite_index_files(self) -> None:
        self._close_index_fds()
        idx, tidx = self._index_bytes()
        for path, data in ((self.index_path, idx), (self.timeindex_path, tidx)):
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        self._open_index_fds()

    def _open_index_fds(self, truncate_to: tuple[int, int] | None = None) -> None:
        self._close_index_fds()
        self._index_fd = os.open(self.index_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._timeindex_fd = os.open(self.timeindex_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if truncate_to is not None:
            # Kafka preallocates index files: drop the zero tail so our appends follow the entries.
            os.ftruncate(self._index_fd, truncate_to[0])
            os.ftruncate(self._timeindex_fd, truncate_to[1])

    def _close_index_fds(self) -> None:
        for fd in (self._index_fd, self._timeindex_fd):
            if fd >= 0:
                os.close(fd)
        self._index_fd = self._timeindex_fd = -1

    # ------------------------------------------------------------------ appending

    def append(self, buf: bytes | bytearray, headers: list[BatchHeader]) -> None:
        """Write whole batches (already offset-assigned; header positions relative to buf)."""
        start = self.size
        if start == 0 and headers:
            self.rolling_timestamp = max(h.max_timestamp for h in headers)
        _write_all(self.fd, buf, start)
        self.size = start + len(buf)
        idx_parts, tidx_parts = [], []
        for h in headers:
            idx, tidx = self._track_batch(h, start + h.position)
            if idx:
                idx_parts.append(idx)
            if tidx:
                tidx_parts.append(tidx)
        if idx_parts:
            os.write(self._index_fd, b"".join(idx_parts))
        if tidx_parts:
            os.write(self._timeindex_fd, b"".join(tidx_parts))

    def truncate_at(self, position: int) -> None:
        """Cut the file at a batch boundary and make this the active segment again (a
        follower's truncation): indexes are rebuilt from what is left."""
        os.ftruncate(self.fd, position)
        self.size = position
        self.sealed = False
        self.recover(verify_crc=False)
        self._rewrite_index_files()

    def _drop_dense(self) -> None:
        self._dense = False
        self._b_last = array("q")
        self._b_end = array("q")

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's LogSegment.timeWaitedForRoll: how far the records being appended lie after
        the segment's first batch (by their timestamps), or, when that batch has none, how long
        ago the segment was made."""
        ts = -1 if self.rolling_timestamp is None else self.rolling_timestamp
        if ts >= 0:
            return message_timestamp - ts
        return now_ms - self.created_ms

    def seal(self) -> None:
        """The segment stops being active: record its final max timestamp, as Kafka does at roll."""
        if not self.sealed:
            self.sealed = True
            self._drop_dense()
            tidx = self._maybe_time_entry()
            if tidx and self._timeindex_fd >= 0:  # during recovery the files are synced after
                os.write(self._timeindex_fd, tidx)

    # ------------------------------------------------------------------ reading

    def read_header(self, pos: int) -> BatchHeader | None:
        if pos + HEADER_SIZE > self.size:
            return None
        return BatchHeader(pos, _HEADER.unpack_from(os.pread(self.fd, HEADER_SIZE, pos)))

    def index_position(self, offset: int) -> int:
        """A file position at or before the batch holding `offset` (from the sparse index)."""
        i = bisect_right(self._idx_off, offset) - 1
        return self._idx_pos[i] if i >= 0 else 0

    def find_batch(self, offset: int, pos: int | None = None) -> BatchHeader | None:
        """Header of the first batch whose last offset is >= offset, or None."""
        if offset >= self.next_offset:
            return None
        pos = self.index_position(offset) if pos is None else pos
        while True:
            h = self.read_header(pos)
            if h is None:
                return None
            if h.base_offset + h.last_offset_delta >= offset:
                return h
            pos += h.size

    def batch_start(self, offset: int) -> int | None:
        """File position of the first batch whose last offset is >= offset, or None."""
        if offset >= self.next_offset:
            return None
        if self._dense:
            i = bisect_left(self._b_last, offset)
            return self._b_end[i - 1] if i else 0
        h = self.find_batch(offset)
        return None if h is None else h.position

    def read(self, offset: int, max_bytes: int, min_one_batch: bool) -> bytes:
        """Whole batches from the one holding `offset`, at most max_bytes (but see min_one_batch)."""
        if self._dense:
            if offset >= self.next_offset:
                return b""
            ends = self._b_end
            i = bisect_left(self._b_last, offset)
            start = ends[i - 1] if i else 0
            j = bisect_right(ends, start + max_bytes)  # batches i..j-1 fit in max_bytes
            if j <= i:
                return _pread_exact(self.fd, ends[i] - start, start) if min_one_batch else b""
            return _pread_exact(self.fd, ends[j - 1] - start, start)
        h = self.find_batch(offset)
        if h is None:
            return b""
        start = h.position
        if h.size > max_bytes:
            return _pread_exact(self.fd, h.size, start) if min_one_batch else b""
        data = _pread_exact(self.fd, min(max_bytes, self.size - start), start)
        # Cut at the last batch boundary that fits.
        p, n = 0, len(data)
        while n - p >= LOG_OVERHEAD:
            size = struct.unpack_from(">i", data, p + 8)[0] + LOG_OVERHEAD
            if p + size > n:
                break
            p += size
        return data[:p] if p < n else data

    def find_offset_by_timestamp(self, timestamp: int, min_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after min_offset (the log start offset)
        with timestamp >= `timestamp`, or None."""
        if self.max_timestamp < timestamp:
            return None
        i = bisect_right(self._ti_ts, timestamp) - 1
        # Everything before the batch that first reached entry i's timestamp is older than it.
        start = max(self._ti_off[i] if i >= 0 else self.base_offset, min_offset)
        h = self.find_batch(start)
        while h is not None:
            if h.max_timestamp >= timestamp:
                for r in DefaultRecordBatch(_pread_exact(self.fd, h.size, h.position)):
                    if r.timestamp >= timestamp and r.offset >= min_offset:
                        return r.offset, r.timestamp
            h = self.read_header(h.position + h.size)
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(max timestamp, offset of the first record carrying it), (-1, -1) when empty."""
        if self.max_timestamp < 0:
            return -1, -1
        h = self.find_batch(self.offset_of_max_timestamp)
        if h is not None:
            for r in DefaultRecordBatch(_pread_exact(self.fd, h.size, h.position)):
                if r.timestamp == self.max_timestamp:
                    return r.timestamp, r.offset
        return self.max_timestamp, self.offset_of_max_timestamp

    def largest_timestamp(self) -> int:
        """For retention: the max record timestamp, or the file's mtime if it has none."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._close_index_fds()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        # .txnindex: the segment's aborted transactions (storage/txn_index.py), when it has any
        txnindex = os.path.join(self.dir_path, segment_name(self.base_offset) + ".txnindex")
        for path in (self.log_path, self.index_path, self.timeindex_path, txnindex):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"


def _write_all(fd: int, buf: bytes | bytearray, old_size: int) -> None:
    """os.write until done; on failure cut the file back so it never holds half a batch."""
    mv = memoryview(buf)
    try:
        while mv:
            n = os.write(fd, mv)
            mv = mv[n:]
    except OSError:
        os.ftruncate(fd, old_size)
        raise


def _read_stripped(path: str, entry_size: int) -> bytes | None:
    """An index file's bytes minus Kafka's preallocated all-zero trailing entries."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    if len(data) % entry_size:
        return None
    zero = bytes(entry_size)
    end = len(data)
    while end >= entry_size and data[end - entry_size:end] == zero:
        end -= entry_size
    return data[:end]
