"""PartitionLog: one partition directory (`topic-N/`) of segments, Kafka's on-disk layout.

Owns opening and recovering a partition, assigning offsets on append, rolling segments,
reading whole batches for Fetch, timestamp lookups for ListOffsets, fast record iteration
for start-up loading, retention, and the bookkeeping of what is durable (`durable_offset`).

Threading: everything runs on the event-loop thread except FlushTicket.run, which only
fdatasyncs duplicated file descriptors, so a segment deleted or rolled meanwhile is safe.
"""
from __future__ import annotations

import logging
import os
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator

from aiokafka.record.default_records import DefaultRecordBatch

from kcoord.storage.batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    CorruptBatchError,
    build_batch,
    crc_ok,
    set_base_offset,
    set_leader_epoch,
    set_log_append_time,
    split_batches,
)
from kcoord.storage.files import DEFAULT_SEGMENT_BYTES, DEFAULT_SEGMENT_MS, OFFSETS_SEGMENT_BYTES
from kcoord.storage.log_dir_failure import LogDirFailureChannel
from kcoord.storage.segment import INDEX_INTERVAL_BYTES, MAX_RELATIVE_OFFSET, LogSegment, scan_batches
from kcoord.storage.swap import (
    complete_swap,
    pending_swaps,
    remove_cleaned,
    remove_swaps_below,
    segment_bases,
)
from kcoord.storage.transactions import uncommitted_batches

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "OFFSETS_SEGMENT_BYTES",
    "FlushTicket",
    "OffsetOutOfRangeError",
    "PartitionLog",
]

LOAD_BUFFER_SIZE = 5242880  # offsets.load.buffer.size: read size while loading


def _holds_records(data: bytes) -> bool:
    """Whether whole batches `data` hold a record or a control batch (not only empty batches)."""
    pos, n = 0, len(data)
    while n - pos >= HEADER_SIZE:
        if data[pos + 16] != MAGIC or int.from_bytes(data[pos + 57:pos + 61], "big", signed=True) > 0:
            return True
        pos += int.from_bytes(data[pos + 8:pos + 12], "big", signed=True) + LOG_OVERHEAD
    return False


def _last_offset(data: bytes) -> int:
    """The last offset of the last of the whole batches `data`."""
    pos, last = 0, -1
    while len(data) - pos >= HEADER_SIZE:
        last = int.from_bytes(data[pos:pos + 8], "big", signed=True) + int.from_bytes(data[pos + 23:pos + 27], "big",
                                                                                        signed=True)
        pos += int.from_bytes(data[pos + 8:pos + 12], "big", signed=True) + LOG_OVERHEAD
    return last


class OffsetOutOfRangeError(ValueError):
    """A read below log_start_offset or beyond log_end_offset (Kafka: OFFSET_OUT_OF_RANGE)."""


class FlushTicket:
    """One flush round: fds (dup'ed on the loop thread) to fdatasync, and what it covers."""

    __slots__ = ("end_offset", "_work", "syncs")

    def __init__(self, end_offset: int, work: list[tuple[LogSegment | None, int, int]]) -> None:
        self.end_offset = end_offset  # everything below is durable once run() returns
        self._work = work  # (segment or None for the directory, dup'ed fd, size to mark synced)
        self.syncs = 0

    def run(self) -> None:
        """fdatasync every fd (safe in a worker thread); always closes the duplicates."""
        try:
            for seg, fd, _ in self._work:
                # A dup'ed fd shares the open file, so this syncs the segment even if the log
                # closed or deleted it in the meantime.
                if seg is None:
                    os.fsync(fd)
                else:
                    os.fdatasync(fd)
                self.syncs += 1
        finally:
            for _, fd, _ in self._work:
                os.close(fd)


class PartitionLog:
    """Segments of one partition, oldest first; the last one is active (appended to)."""

    # The partition's replica (server/replication/partition.py) when a replica manager hosts
    # it; None on a single node, where the high watermark is the log end offset.
    replica = None

    def __init__(self, path: str, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 index_interval_bytes: int = INDEX_INTERVAL_BYTES,
                 failures: LogDirFailureChannel | None = None,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.path = path
        # The log directory's failure channel (storage/log_dir_failure.py): an I/O error while
        # appending or syncing takes the directory offline. None: errors are only raised.
        self.failures = failures
        self.log_dir = os.path.dirname(os.path.abspath(path))
        self.segment_bytes = segment_bytes
        # segment.ms / segment.jitter.ms: the active segment rolls at the first append whose
        # records lie segment.ms (less the segment's jitter) after its first batch.
        self.segment_ms = DEFAULT_SEGMENT_MS
        self.segment_jitter_ms = 0
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.index_interval_bytes = index_interval_bytes
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.sync_count = 0  # fdatasync calls made so far (observability and tests)
        self._dir_dirty = False  # a segment file was created since the directory was synced
        self.deleted = False  # its topic was deleted (LogManager.remove): answer as unknown
        # DeleteRecords moves the log start past the first segment's base (log-start-offset-checkpoint)
        self._log_start_offset = 0
        os.makedirs(path, exist_ok=True)
        try:
            self._recover()
        except BaseException:
            for seg in self.segments:
                seg.close()
            raise
        self.durable_offset = self.log_end_offset  # what survived recovery is on disk
        self.last_flush_ms = self.clock_ms()  # flush.ms counts from here (Kafka's lastFlushTime)

    # ------------------------------------------------------------------ opening

    def _finish_compaction(self) -> None:
        """A compactor's leftovers (storage/swap.py): drop uncommitted `.cleaned` files,
        complete committed `.swap` ones."""
        removed = remove_cleaned(self.path)
        if removed:
            logger.info("%s: deleted %d file(s) of an unfinished compaction: %s", self.path,
                        len(removed), ", ".join(sorted(removed)[:5]))
        for base in pending_swaps(self.path):
            replaced = complete_swap(self.path, base, segment_bases(self.path))
            if replaced is not None:
                logger.info("%s: completed the swap of compacted segment %d (replaced %d segment(s))",
                            self.path, base, len(replaced))

    def adopt_swaps(self) -> int:
        """Put in place the compacted segments a compactor committed while we serve (event-loop
        thread, between requests, so every read sees either the old or the new segments).
        Returns how many swaps were completed."""
        done = 0
        for base in pending_swaps(self.path):
            closed = self.segments[:-1]
            replaced = complete_swap(self.path, base, [s.base_offset for s in closed],
                                     limit=self.active.base_offset)
            if replaced is None:
                continue
            gone = set(replaced)
            for seg in closed:
                if seg.base_offset in gone:
                    seg.close()
            new = LogSegment(self.path, base, index_interval_bytes=self.index_interval_bytes)
            new.recover()  # cuts nothing: complete_swap checked every batch
            new.seal()
            new.sync_index_files()
            self.segments = sorted([s for s in self.segments if s.base_offset not in gone] + [new],
                                   key=lambda s: s.base_offset)
            self._bases = [s.base_offset for s in self.segments]
            done += 1
            logger.info("%s: swapped in compacted segment %d (%d bytes) for %d segment(s)",
                        self.path, base, new.size, len(replaced))
        return done

    def _recover(self) -> None:
        self._finish_compaction()
        bases = segment_bases(self.path)
        dropped = 0
        for i, base in enumerate(bases):
            seg = LogSegment(self.path, base, index_interval_bytes=self.index_interval_bytes)
            if self.segments and base < self.segments[-1].next_offset:
                # Overlaps its predecessor: not a log we wrote; treat as corrupt from here on.
                later = bases[i:]
                seg.close()
            else:
                cut = seg.recover()
                self.segments.append(seg)
                if not cut:
                    continue
                dropped += cut
                later = bases[i + 1:]
            # Kafka deletes every segment after a corrupt one: their offsets would not follow.
            for b in later:
                s = LogSegment(self.path, b, index_interval_bytes=self.index_interval_bytes)
                dropped += s.size
                s.delete()
            break
        if dropped:
            logger.warning("%s: recovery dropped %d bytes of torn or corrupt data after offset %d",
                           self.path, dropped, self.segments[-1].next_offset)
        if not self.segments:
            self.segments.append(self._new_segment(0))
        for seg in self.segments[:-1]:
            seg.seal()
        for seg in self.segments:
            seg.sync_index_files()
        self._bases = [s.base_offset for s in self.segments]

    def _new_segment(self, base: int) -> LogSegment:
        self._dir_dirty = True
        return LogSegment(self.path, base, index_interval_bytes=self.index_interval_bytes, create=True,
                          created_ms=self.clock_ms())

    # ------------------------------------------------------------------ offsets

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_start_offset(self) -> int:
        """The first offset a reader may ask for: the first segment's base, or beyond it when
        DeleteRecords moved it (Kafka's logStartOffset)."""
        base = self.segments[0].base_offset
        return base if self._log_start_offset <= base else self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The next offset to assign."""
        return self.segments[-1].next_offset

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ------------------------------------------------------------------ appending

    def _maybe_roll(self, nbytes: int, last_offset: int, max_timestamp: int) -> LogSegment:
        """The segment to append to: a new one when the active one would pass segment.bytes or
        its relative offsets, or when these records come segment.ms after its first batch
        (Kafka's LogSegment.shouldRoll)."""
        seg = self.segments[-1]
        if seg.size > 0 and (seg.size + nbytes > self.segment_bytes
                             or last_offset - seg.base_offset > MAX_RELATIVE_OFFSET
                             or self._reached_roll_ms(seg, max_timestamp)):
            self.roll()
            seg = self.segments[-1]
        return seg

    def _reached_roll_ms(self, seg: LogSegment, max_timestamp: int) -> bool:
        jitter = 0
        if self.segment_jitter_ms > 0:  # Kafka's LogConfig.randomSegmentJitter
            jitter = seg.roll_jitter_seed % min(self.segment_jitter_ms, self.segment_ms)
        return seg.time_waited_for_roll(self.clock_ms(), max_timestamp) > self.segment_ms - jitter

    def roll(self) -> LogSegment:
        """Start a new active segment at log_end_offset (no-op if the active one is empty)."""
        cur = self.segments[-1]
        if cur.size == 0:
            return cur
        cur.seal()
        seg = self._new_segment(cur.next_offset)
        self.segments.append(seg)
        self._bases.append(seg.base_offset)
        return seg

    def append_batches(self, buf: bytes | bytearray, log_append_time_ms: int | None = None,
                       leader_epoch: int = 0, checked: list[BatchHeader] | None = None) -> tuple[int, int, int]:
        """Append producer-written batches: assign offsets, stamp the leader epoch (and
        LogAppendTime if given). Returns (base offset, last offset, log append time or -1).

        Raises CorruptBatchError for bytes that are not whole valid batches (callers should
        validate first to pick the error code; this check keeps garbage out of the log,
        where recovery would otherwise cut it and everything after it). `checked`: the
        headers of `buf` (split_batches) whose framing, CRC and lastOffsetDelta the caller
        has already checked (the Produce handler's validation); they are patched in place.
        """
        data = bytearray(buf)
        if checked is not None:
            headers = checked
        else:
            headers = split_batches(data)
            for h in headers:
                if not crc_ok(data, h):
                    raise CorruptBatchError(f"CRC mismatch in batch at position {h.position}")
                if h.last_offset_delta < 0:
                    raise CorruptBatchError(f"negative lastOffsetDelta in batch at {h.position}")
        first = next_offset = self.log_end_offset
        for h in headers:
            set_base_offset(data, h, next_offset)
            set_leader_epoch(data, h, leader_epoch)
            if log_append_time_ms is not None:
                set_log_append_time(data, h, log_append_time_ms)
            next_offset += h.last_offset_delta + 1
        self._check_online()
        try:
            seg = self._maybe_roll(len(data), next_offset - 1, max((h.max_timestamp for h in headers), default=-1))
            seg.append(data, headers)
        except OSError as e:
            raise self._io_failed("appending records to", e) from e
        return first, next_offset - 1, -1 if log_append_time_ms is None else log_append_time_ms

    def append_as_follower(self, buf: bytes | bytearray | memoryview) -> list[BatchHeader]:
        """Append a leader's batches as they are (offsets, epochs, timestamps kept): a
        follower's fetch. They must be whole valid batches starting at or after log_end_offset
        with increasing offsets; CorruptBatchError otherwise (nothing is written). Returns
        their headers (positions relative to `buf`)."""
        data = bytes(buf)
        headers = split_batches(data)
        expected = self.log_end_offset
        for h in headers:
            if not crc_ok(data, h):
                raise CorruptBatchError(f"CRC mismatch in replicated batch at offset {h.base_offset}")
            if h.base_offset < expected or h.last_offset_delta < 0:
                raise CorruptBatchError(f"replicated batch at offset {h.base_offset} does not follow {expected}")
            expected = h.next_offset
        self._check_online()
        try:
            seg = self._maybe_roll(len(data), expected - 1, max(h.max_timestamp for h in headers))
            if seg.size == 0 and seg.base_offset != headers[0].base_offset:
                # an empty active segment named below the first batch (a truncated log, a gap
                # left by compaction): name it after the batch, as Kafka's roll does
                self._replace_empty_active(headers[0].base_offset)
                seg = self.active
            seg.append(data, headers)
        except OSError as e:
            raise self._io_failed("appending replicated records to", e) from e
        return headers

    def _replace_empty_active(self, base: int) -> None:
        old = self.segments.pop()
        self._bases.pop()
        old.delete()
        seg = self._new_segment(base)
        self.segments.append(seg)
        self._bases.append(base)

    def truncate_to(self, offset: int) -> int:
        """Cut the log back to end at `offset` (a follower's truncation after a leader change):
        segments starting at or after it are deleted, the one holding it is cut at the start of
        the batch holding it. Returns the new log end offset (at or below `offset`)."""
        if offset >= self.log_end_offset:
            return self.log_end_offset
        self._check_online()
        try:
            while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
                seg = self.segments.pop()
                self._bases.pop()
                seg.delete()
                self._dir_dirty = True
            seg = self.segments[-1]
            if seg.base_offset >= offset:  # the only segment: empty it, keep its name
                seg.truncate_at(0)
            else:
                h = seg.find_batch(offset)
                if h is not None:
                    seg.truncate_at(h.position)
        except OSError as e:
            raise self._io_failed("truncating", e) from e
        self.durable_offset = min(self.durable_offset, self.log_end_offset)
        if self._log_start_offset > self.log_end_offset:
            self._log_start_offset = self.log_end_offset
        logger.info("%s: truncated to offset %d", self.path, self.log_end_offset)
        return self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop everything and continue at `offset` (a follower behind its leader's log start)."""
        self._check_online()
        try:
            for seg in self.segments:
                seg.delete()
            self.segments = [self._new_segment(offset)]
            self._bases = [offset]
        except OSError as e:
            raise self._io_failed("truncating", e) from e
        self._log_start_offset = offset
        self.durable_offset = offset
        logger.info("%s: truncated fully, now starting at offset %d", self.path, offset)

    def append_records(self, records: list[tuple[bytes, bytes | None]], timestamp_ms: int,
                       leader_epoch: int = 0) -> tuple[int, int]:
        """Append one batch of (key, value) records, all stamped timestamp_ms (CreateTime).

        The coordinator's path: returns (first offset, last offset).
        """
        self._check_online()
        first = self.log_end_offset
        data = build_batch([(k, v, timestamp_ms) for k, v in records], first, leader_epoch)
        headers = split_batches(data)
        try:
            seg = self._maybe_roll(len(data), first + len(records) - 1, timestamp_ms)
            seg.append(data, headers)
        except OSError as e:
            raise self._io_failed("appending records to", e) from e
        return first, first + len(records) - 1

    # ------------------------------------------------------------------ reading

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True) -> bytes:
        """Whole batches starting with the one holding `offset`, up to max_bytes; KIP-74: with
        min_one_batch the first batch is returned even if larger. b"" at log_end_offset."""
        self._check_online()
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}]")
        out = b""
        for seg in self.segments[self._segment_index(offset):]:
            # Compaction can leave a segment without the offset: move on to the next one.
            data = seg.read(offset, max(max_bytes - len(out), 0), min_one_batch)
            if not data:
                if seg.next_offset > offset:
                    return out
                continue
            out += data
            if _holds_records(data) or _last_offset(data) + 1 < seg.next_offset:
                return out
            # Only empty batches to the segment's end (a compacted segment keeps its last batch,
            # empty, so that its swap spans the segments it replaces): go on into the next one,
            # as Kafka's read passes over a segment the cleaner emptied. A client given nothing
            # but empty batches grows its fetch size instead, and librdkafka gives up after ten.
            offset = seg.next_offset
        return out

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record from the log start offset on with
        timestamp >= `timestamp`, or None."""
        start = self.log_start_offset
        for seg in self.segments[self._segment_index(start):]:
            if seg.max_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, start)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(largest timestamp, offset of the first record carrying it); (-1, -1) if none."""
        best = None
        for seg in self.segments:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        return (-1, -1) if best is None else best.max_timestamp_and_offset()

    def iter_records(self, start_offset: int = 0,
                     buffer_size: int = LOAD_BUFFER_SIZE) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of every record from start_offset on that counts: control
        batches and uncommitted (aborted or open) transactions are skipped.

        The start-up loading hot path: batches were CRC-checked when the log opened, so this
        only frames and decodes them. Stops at the log end seen when each segment is reached.
        """
        hidden = self.uncommitted_batches()
        for seg in self.segments[self._segment_index(start_offset):]:
            if seg.next_offset <= start_offset:
                continue
            pos = seg.index_position(start_offset) if start_offset > seg.base_offset else 0
            for h, body in scan_batches(seg.fd, pos, seg.size, verify_crc=False, chunk=buffer_size):
                if h.base_offset + h.last_offset_delta < start_offset or h.attributes & 0x20:
                    continue
                if hidden and h.base_offset in hidden:
                    continue
                if h.base_offset >= start_offset:
                    for r in DefaultRecordBatch(body):
                        yield r.offset, r.key, r.value
                else:
                    for r in DefaultRecordBatch(body):
                        if r.offset >= start_offset:
                            yield r.offset, r.key, r.value

    def uncommitted_batches(self) -> set[int]:
        """Base offsets of transactional batches that do not count (storage/transactions.py);
        empty without a transactional batch, so kcoord's own logs are not scanned twice."""
        if not any(seg.has_transactions for seg in self.segments):
            return set()
        return uncommitted_batches(
            hb for seg in self.segments for hb in scan_batches(seg.fd, 0, seg.size, verify_crc=False))

    # ------------------------------------------------------------------ retention

    def apply_retention(self, now_ms: int, retention_ms: int, retention_bytes: int) -> int:
        """Delete whole old segments past retention.ms (by their largest timestamp) or while
        the log is larger than retention.bytes (-1 = unlimited). The active segment stays.
        Returns how many segments were deleted; log_start_offset follows."""
        deleted = 0
        total = self.size_in_bytes
        while len(self.segments) > 1:
            seg = self.segments[0]
            too_old = retention_ms >= 0 and now_ms - seg.largest_timestamp() > retention_ms
            too_big = retention_bytes >= 0 and total - seg.size >= retention_bytes
            if not (too_old or too_big):
                break
            self.segments.pop(0)
            self._bases.pop(0)
            total -= seg.size
            seg.delete()
            deleted += 1
        if deleted:
            self._dir_dirty = True
            self.durable_offset = max(self.durable_offset, self.log_start_offset)
            logger.info("%s: retention deleted %d segment(s); log start offset now %d",
                        self.path, deleted, self.log_start_offset)
            remove_swaps_below(self.path, self.segments[0].base_offset)
        return deleted

    # ------------------------------------------------------------------ log start offset

    def increment_log_start_offset(self, offset: int) -> int:
        """DeleteRecords: move the log start to `offset` (never backwards; beyond the high
        watermark, i.e. the log end, is OffsetOutOfRangeError). Whole segments below it are
        deleted by delete_segments_before_start(), which the caller runs once the new start is
        checkpointed. Returns the log start offset."""
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of partition {self.name} since it is "
                f"larger than the high watermark {self.log_end_offset}")
        if offset > self.log_start_offset:
            self._log_start_offset = offset
        return self.log_start_offset

    def undo_log_start_offset(self, previous: int) -> None:
        """Take back an increment whose checkpoint could not be written."""
        self._log_start_offset = previous

    def restore_log_start_offset(self, offset: int) -> None:
        """At start-up, from the checkpoint (never past what the log holds: a log torn behind
        its checkpointed start starts at its end)."""
        self._log_start_offset = max(self._log_start_offset, min(offset, self.log_end_offset))

    def delete_segments_before_start(self) -> int:
        """Delete the closed segments that lie wholly below the log start offset (the active
        one stays). Returns how many."""
        start = self.log_start_offset
        deleted = 0
        while len(self.segments) > 1 and self.segments[1].base_offset <= start:
            seg = self.segments.pop(0)
            self._bases.pop(0)
            seg.delete()
            deleted += 1
        if deleted:
            self._dir_dirty = True
            self.durable_offset = max(self.durable_offset, start)
            logger.info("%s: deleted %d segment(s) below the log start offset %d", self.path, deleted, start)
            remove_swaps_below(self.path, self.segments[0].base_offset)
        return deleted

    @property
    def name(self) -> str:
        """`topic-partition`, as Kafka names a partition in messages."""
        return os.path.basename(self.path)

    # ------------------------------------------------------------------ durability

    def begin_flush(self) -> FlushTicket:
        """Snapshot what to fdatasync (loop thread). Pair with ticket.run() and end_flush()."""
        self._check_online()
        work: list[tuple[LogSegment | None, int, int]] = []
        try:
            for seg in self.segments:
                if seg.size > seg.synced_size:
                    work.append((seg, os.dup(seg.fd), seg.size))
            if self._dir_dirty:
                # New or deleted segment files: their directory entries must be durable too.
                work.append((None, os.open(self.path, os.O_RDONLY), 0))
        except OSError as e:
            for _, fd, _ in work:
                os.close(fd)
            raise self._io_failed("syncing", e) from e
        self._dir_dirty = False
        return FlushTicket(self.log_end_offset, work)

    def end_flush(self, ticket: FlushTicket, ok: bool = True, error: BaseException | None = None) -> None:
        """Record a finished round (loop thread); a failed one leaves everything unsynced, and
        a failed fdatasync (`error`) takes the log directory offline: the kernel may have
        dropped the pages it could not write, so a retry could not be trusted."""
        self.sync_count += ticket.syncs
        if not ok or error is not None:
            if any(seg is None for seg, _, _ in ticket._work):
                self._dir_dirty = True
            if isinstance(error, OSError):
                self._io_failed("syncing", error)
            return
        for seg, _, size in ticket._work:
            if seg is not None and size > seg.synced_size:
                seg.synced_size = size
        if ticket.end_offset > self.durable_offset:
            self.durable_offset = ticket.end_offset
        self.last_flush_ms = self.clock_ms()

    def flush(self) -> None:
        """fdatasync every segment with unsynced bytes, now, on this thread."""
        ticket = self.begin_flush()
        try:
            ticket.run()
        except OSError as e:
            self.end_flush(ticket, ok=False, error=e)
            raise self._offline_error(e) from e
        self.end_flush(ticket)

    # ------------------------------------------------------------------ failures

    def _check_online(self) -> None:
        """LogDirOfflineError if an earlier I/O error took this log's directory offline."""
        if self.failures is not None:
            self.failures.check(self.log_dir)

    def offline_error(self) -> OSError | None:
        """What every operation on this log raises once its directory is offline; else None."""
        if self.failures is not None and self.failures.is_offline(self.log_dir):
            return self.failures.error(self.log_dir)
        return None

    def _io_failed(self, what: str, error: OSError) -> OSError:
        """The error to raise for `error`: with a failure channel, the directory goes offline."""
        if self.failures is None:
            return error
        return self.failures.fail(self.log_dir, f"Error while {what} {os.path.basename(self.path)} in dir "
                                                f"{self.log_dir}", error)

    def _offline_error(self, error: OSError) -> OSError:
        return error if self.failures is None else self.failures.error(self.log_dir)

    def close(self) -> None:
        """Flush and close every file."""
        try:
            self.flush()
        finally:
            for seg in self.segments:
                seg.close()

    def __repr__(self) -> str:
        return (f"PartitionLog({self.path!r}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={len(self.segments)})")
