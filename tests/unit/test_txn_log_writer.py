"""Appends to __transaction_state (server/coordinator/writer.py): one batch per partition per loop
turn, answered once durable; CompleteX records (durable=False) at their append. The writer never
replays: each write carries its revert, run only when the write fails."""
from __future__ import annotations

import asyncio
import errno
import os

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.partitioner import partition_for
from kcoord.protocol.topics import TXN_TOPIC
from kcoord.protocol.txn_log import TxnKey, TxnRecord, TxnValue, decode_txn_record
from kcoord.server.clock import SystemClock
from kcoord.server.coordinator.writer import LogWriter
from kcoord.server.txn.shard import TxnRecords
from kcoord.storage.batch import split_batches
from kcoord.storage.log_manager import LogManager

N = 4


def _setup(tmp_path, max_bytes: int = 1048588):
    logs = LogManager(str(tmp_path))
    for p in range(N):
        logs.create(TXN_TOPIC, p)
    reverted: list[TxnRecord] = []
    writer = LogWriter(logs, TxnRecords(lambda tid: partition_for(tid, N)), SystemClock(), 5.0, max_bytes)
    return logs, reverted, writer


def _write(writer, record: TxnRecord, done, reverted: list[TxnRecord], durable: bool = True) -> None:
    """A write whose revert notes its record (the runtime's would put back what it replaced)."""
    writer.write([record], done, lambda: reverted.append(record), durable)


def _rec(tid: str, state: int = 0) -> TxnRecord:
    return TxnRecord(TxnKey(tid), TxnValue(1, 0, 1000, state, {"t": [0]} if state else {}, 5, -1))


async def test_writes_of_a_loop_turn_share_a_batch_answered_when_durable(tmp_path):
    logs, reverted, writer = _setup(tmp_path)
    tids = [t for t in (f"tx{i}" for i in range(100)) if partition_for(t, N) == 1][:5]
    done: list = []
    for t in tids:
        _write(writer, _rec(t), done.append, reverted)
    assert done == []
    while len(done) < len(tids):
        await asyncio.sleep(0.001)
    assert done == [None] * len(tids) and reverted == []
    plog = logs.get(TXN_TOPIC, 1)
    assert plog.durable_offset >= len(tids)
    batches = split_batches(plog.read(0, 1 << 20))
    assert len(batches) == 1
    assert [decode_txn_record(k, v).key.transactional_id for _, k, v in plog.iter_records()] == tids
    logs.close()


async def test_a_complete_record_is_answered_at_its_append(tmp_path):
    logs, reverted, writer = _setup(tmp_path)
    done: list = []
    _write(writer, _rec("a", 4), done.append, reverted, durable=False)
    writer.flush()
    assert done == [None] and reverted == []
    plog = logs.get(TXN_TOPIC, partition_for("a", N))
    assert plog.log_end_offset == 1  # appended; its fdatasync comes with the next durable write
    done2: list = []
    _write(writer, _rec("a", 1), done2.append, reverted)
    while not done2:
        await asyncio.sleep(0.001)
    assert plog.durable_offset == 2 and done2 == [None] and reverted == []
    logs.close()


async def test_failures_are_mapped_and_reverted(tmp_path):
    logs, reverted, writer = _setup(tmp_path, max_bytes=200)
    done: list = []
    big = TxnRecord(TxnKey("a"), TxnValue(1, 0, 1000, 1, {"t" * 100: list(range(50))}, 5, 5))
    _write(writer, big, done.append, reverted)
    assert done == [ErrorCode.UNKNOWN_SERVER_ERROR] and reverted == [big]  # RECORD_LIST_TOO_LARGE, as Kafka maps it
    empty = LogManager(str(tmp_path / "none"))
    w2 = LogWriter(empty, TxnRecords(lambda tid: 0), SystemClock(), 5.0, 1 << 20)
    _write(w2, _rec("a"), done.append, reverted)
    assert done[-1] == ErrorCode.COORDINATOR_NOT_AVAILABLE and reverted == [big, _rec("a")]
    logs.close()


async def test_a_complete_record_whose_append_fails_is_answered(tmp_path):
    """A durable=False write hears of a failed append too (it used to wait forever, holding
    the writer's pending count and so the coordinator's shutdown)."""
    logs, reverted, writer = _setup(tmp_path)
    plog = logs.get(TXN_TOPIC, partition_for("a", N))
    logs.failures.fail(os.path.abspath(logs.log_dir), "Error while syncing test", OSError(errno.EIO, "EIO"))
    done: list = []
    _write(writer, _rec("a", 4), done.append, reverted, durable=False)
    writer.flush()
    assert done == [ErrorCode.NOT_COORDINATOR] and reverted == [_rec("a", 4)] and writer.pending == 0
    assert plog.log_end_offset == 0
