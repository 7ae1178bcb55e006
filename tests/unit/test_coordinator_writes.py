"""Coalesced durable appends of coordinator records (real logs in tmp_path, real fsync). The writer
never replays: each write carries its revert (the runtime replayed it when it was made), run
only when the write fails."""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

from kcoord.protocol.coordinator_records import CoordinatorRecord, OffsetKey, OffsetValue
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.partitioner import partition_for
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.clock import SystemClock
from kcoord.server.coordinator.writer import LogWriter
from kcoord.server.group.shard import OffsetsRecords
from kcoord.storage.batch import split_batches
from kcoord.storage.flusher import GroupCommit, _commits
from kcoord.storage.log_manager import LogManager

N = 4


def _record(group: str, offset: int) -> CoordinatorRecord:
    return CoordinatorRecord(OffsetKey(group, "t", 0), OffsetValue(offset=offset, commit_timestamp=1))


def _writer(logs: LogManager, max_bytes: int = 1048588, timeout_s: float = 5.0) -> LogWriter[CoordinatorRecord]:
    return LogWriter(logs, OffsetsRecords(N), SystemClock(), timeout_s, max_bytes)


def _write(writer, records: list[CoordinatorRecord], done, reverted: list[CoordinatorRecord]) -> None:
    """A write whose revert notes its records (the runtime's would put back what they replaced)."""
    writer.write(records, done, lambda: reverted.extend(records))


def _setup(tmp_path, timeout_s: float = 5.0):
    logs = LogManager(str(tmp_path))
    for p in range(N):
        logs.create(OFFSETS_TOPIC, p)
    reverted: list[CoordinatorRecord] = []
    return logs, reverted, _writer(logs, timeout_s=timeout_s)


def _group_in(partition: int, skip: int = 0) -> str:
    found = [g for g in (f"g{i}" for i in range(1000)) if partition_for(g, N) == partition]
    return found[skip]


async def test_writes_of_one_loop_turn_share_one_batch(tmp_path):
    logs, reverted, writer = _setup(tmp_path)
    g = _group_in(1)
    done: list[ErrorCode | None] = []
    for i in range(100):
        _write(writer, [_record(g, i)], done.append, reverted)
    assert done == [] and writer.pending == 100
    while len(done) < 100:
        await asyncio.sleep(0.001)
    assert done == [None] * 100 and writer.pending == 0 and reverted == []
    plog = logs.get(OFFSETS_TOPIC, 1)
    assert plog.log_end_offset == 100 and plog.durable_offset >= 100
    assert [OffsetsRecords.decode(k, v).value.offset for _, k, v in plog.iter_records()] == list(range(100))
    assert len(split_batches(plog.read(0, 10_000_000))) == 1  # one batch, one write
    logs.close()


async def test_a_write_spanning_partitions_completes_when_all_are_durable(tmp_path):
    logs, reverted, writer = _setup(tmp_path)
    recs = [_record(_group_in(0), 1), _record(_group_in(3), 2), _record(_group_in(0, 1), 3)]
    fut = asyncio.get_running_loop().create_future()
    _write(writer, recs, fut.set_result, reverted)
    assert await asyncio.wait_for(fut, 10) is None
    assert reverted == []
    assert logs.get(OFFSETS_TOPIC, 0).log_end_offset == 2 and logs.get(OFFSETS_TOPIC, 3).log_end_offset == 1
    logs.close()


async def test_missing_partition_log_maps_to_coordinator_not_available(tmp_path):
    logs = LogManager(str(tmp_path))
    writer = _writer(logs)
    done: list = []
    reverted: list = []
    _write(writer, [_record("g", 1)], done.append, reverted)
    assert done == [ErrorCode.COORDINATOR_NOT_AVAILABLE] and writer.pending == 0
    assert [r.value.offset for r in reverted] == [1]


async def test_too_large_maps_to_invalid_commit_offset_size(tmp_path):
    logs, reverted, _ = _setup(tmp_path)
    writer = _writer(logs, max_bytes=1000)
    done: list = []
    big = CoordinatorRecord(OffsetKey("g", "t", 0), OffsetValue(offset=1, metadata="x" * 2000))
    _write(writer, [big], done.append, reverted)
    assert done == [ErrorCode.INVALID_COMMIT_OFFSET_SIZE] and reverted == [big]
    assert logs.get(OFFSETS_TOPIC, partition_for("g", N)).log_end_offset == 0
    logs.close()


async def test_not_durable_in_time_is_answered_and_reverted(tmp_path):
    """A write not durable within the timeout is answered with the error and reverted; if its
    fdatasync lands later, nothing more happens to it (a restart loads what the log has, as
    Kafka's would)."""
    logs, reverted, writer = _setup(tmp_path, timeout_s=0.05)
    g = _group_in(2)
    plog = logs.get(OFFSETS_TOPIC, 2)
    gate = threading.Event()
    pool = concurrent.futures.ThreadPoolExecutor(1)

    class SlowDisk(concurrent.futures.Executor):
        def submit(self, fn, *a, **kw):
            return pool.submit(lambda: (gate.wait(5), fn(*a, **kw))[1])

    _commits[plog] = GroupCommit(plog, executor=SlowDisk())
    done: list = []
    _write(writer, [_record(g, 7)], done.append, reverted)
    while not done:
        await asyncio.sleep(0.01)
    assert done == [ErrorCode.COORDINATOR_NOT_AVAILABLE] and [r.value.offset for r in reverted] == [7]
    assert writer.pending == 0
    gate.set()  # the sync finally completes
    deadline = time.monotonic() + 30
    while plog.durable_offset < 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert plog.durable_offset >= 1
    assert done == [ErrorCode.COORDINATOR_NOT_AVAILABLE] and len(reverted) == 1  # answered and reverted once
    logs.close()
    pool.shutdown()


def test_cached_offset_keys_encode_like_fresh_ones():
    from kcoord.protocol.coordinator_codec import _OFFSET_KEYS, decode_key, encode_key, offset_key

    k = offset_key("grp", "topic", 7)
    assert k is offset_key("grp", "topic", 7)  # shared by the commits of that partition
    assert encode_key(k) == encode_key(OffsetKey("grp", "topic", 7))
    assert decode_key(encode_key(k)) == k
    long_group = "g" * 600  # long names are not kept (bounded memory)
    assert decode_key(encode_key(offset_key(long_group, "t", 0))) == OffsetKey(long_group, "t", 0)
    assert (long_group, "t", 0) not in _OFFSET_KEYS
