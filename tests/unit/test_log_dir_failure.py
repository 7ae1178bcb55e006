"""A log directory taken offline (storage/log_dir_failure.py): what every operation on it does
afterwards, in process (the server halts on top of this: tests/integration/test_storage_failures.py
breaks real disks)."""
from __future__ import annotations

import asyncio
import errno
import logging
import os

import pytest

from kcoord.protocol.coordinator_records import CoordinatorRecord, OffsetKey, OffsetValue
from kcoord.protocol.errors import ErrorCode, error_code_of
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.clock import SystemClock
from kcoord.server.coordinator.writer import LogWriter
from kcoord.server.group.shard import OffsetsRecords
from kcoord.storage.flusher import GroupCommit
from kcoord.storage.log_dir_failure import LogDirFailureChannel, LogDirOfflineError
from kcoord.storage.log_manager import LogManager


def _manager(tmp_path) -> LogManager:
    logs = LogManager(str(tmp_path / "data"))
    for p in range(3):
        logs.create(OFFSETS_TOPIC, p)
    logs.create("t", 0)
    return logs


def _break_writes(plog) -> None:
    """The active segment's descriptor swapped for a read-only one: write(2) really fails (EBADF)."""
    seg = plog.active
    ro = os.open(seg.log_path, os.O_RDONLY)
    os.dup2(ro, seg.fd)
    os.close(ro)


def test_a_failed_append_takes_the_directory_offline_once(tmp_path, caplog):
    logs = _manager(tmp_path)
    t0 = logs.get("t", 0)
    t0.append_records([(b"k", b"v")], 1)
    _break_writes(t0)
    with caplog.at_level(logging.ERROR, logger="kcoord.logdir"):
        with pytest.raises(LogDirOfflineError):
            t0.append_records([(b"k", b"v2")], 2)
        # every partition of the directory is offline now, and it is not logged again
        other = logs.get(OFFSETS_TOPIC, 1)
        with pytest.raises(LogDirOfflineError):
            other.append_records([(b"k", b"v")], 3)
        with pytest.raises(LogDirOfflineError):
            other.read(0, 1000)
    root = os.path.abspath(logs.log_dir)
    lines = [r for r in caplog.records if "is now offline" in r.getMessage()]
    assert len(lines) == 1 and root in lines[0].getMessage() and "appending records to t-0" in lines[0].getMessage()
    assert logs.failures.online == set() and root in logs.failures.offline
    assert t0.log_end_offset == 1  # nothing half-appended is counted
    assert error_code_of(LogDirOfflineError("x")) == ErrorCode.KAFKA_STORAGE_ERROR


async def test_nobody_waiting_on_an_offline_directory_is_told_durable(tmp_path):
    logs = _manager(tmp_path)
    plog = logs.get(OFFSETS_TOPIC, 0)
    _, last = plog.append_records([(b"k", b"v")], 1)
    logs.failures.fail(os.path.abspath(logs.log_dir), "Error while syncing test", OSError(errno.EIO, "EIO"))
    got: list[BaseException | None] = []
    GroupCommit(plog).when_durable(last, got.append)
    assert len(got) == 1 and isinstance(got[0], LogDirOfflineError)
    assert plog.durable_offset <= last


async def test_coordinator_writes_to_an_offline_directory_answer_not_coordinator(tmp_path):
    """Kafka's group coordinator maps KAFKA_STORAGE_ERROR to NOT_COORDINATOR."""
    logs = _manager(tmp_path)
    reverted: list = []
    writer = LogWriter(logs, OffsetsRecords(3), SystemClock(), 5.0, 1048588)
    done: list = []
    writer.write([CoordinatorRecord(OffsetKey("g", "t", 0), OffsetValue(offset=1))], done.append,
                 lambda: reverted.append(1))
    while not done:
        await asyncio.sleep(0.01)
    assert done == [None]
    logs.failures.fail(os.path.abspath(logs.log_dir), "Error while syncing test", OSError(errno.EIO, "EIO"))
    writer.write([CoordinatorRecord(OffsetKey("g", "t", 0), OffsetValue(offset=2))], done.append,
                 lambda: reverted.append(2))
    while len(done) < 2:
        await asyncio.sleep(0.01)
    assert done[1] == ErrorCode.NOT_COORDINATOR
    assert reverted == [2]  # the refused write is taken back, the durable one is not


def test_listeners_hear_of_each_directory_once():
    ch = LogDirFailureChannel(["/a", "/b"])
    heard: list[str] = []
    ch.add_listener(heard.append)
    ch.fail("/a", "first", OSError(errno.EIO, "EIO"))
    ch.fail("/a", "second", OSError(errno.EIO, "EIO"))
    assert heard == ["/a"] and ch.online == {"/b"}
    with pytest.raises(LogDirOfflineError, match="first"):
        ch.check("/a")
    ch.check("/b")


async def test_a_partition_first_written_after_the_failure_is_refused_too(tmp_path):
    """A declared __consumer_offsets partition gets its directory at its first write: not in
    an offline directory."""
    logs = LogManager(str(tmp_path / "data"))
    logs.declare(OFFSETS_TOPIC, 0)
    logs.failures.fail(os.path.abspath(logs.log_dir), "Error while syncing test", OSError(errno.EIO, "EIO"))
    writer = LogWriter(logs, OffsetsRecords(1), SystemClock(), 5.0, 1048588)
    done: list = []
    reverted: list = []
    writer.write([CoordinatorRecord(OffsetKey("g", "t", 0), OffsetValue(offset=1))], done.append,
                 lambda: reverted.append(1))
    assert done == [ErrorCode.NOT_COORDINATOR] and writer.pending == 0 and reverted == [1]
    assert not (tmp_path / "data" / f"{OFFSETS_TOPIC}-0").exists()
