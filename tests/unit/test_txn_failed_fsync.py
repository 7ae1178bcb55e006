"""The transaction coordinator on the one rule for state changes (server/coordinator/result.py):
a write's records are replayed into the coordinator when the write is made, every request and
reader acts on the id's last durable state while it is in flight, and a write whose fdatasync
fails leaves the transaction exactly as it was (state, partitions, producer id and epoch), the
id free for its next request. The coordinator runs on its real runtime over one real
__transaction_state partition in tmp_path; the fdatasync really fails (the active segment's
descriptor is swapped for /dev/null's: write(2) succeeds, fdatasync(2) returns EINVAL, and the
log directory goes offline, so every later write fails too and is answered at once)."""
from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.topics import TXN_TOPIC
from kcoord.server.clock import FakeClock
from kcoord.server.coordinator.runtime import CoordinatorRuntime
from kcoord.server.deferred import Deferred
from kcoord.server.txn.coordinator import TransactionCoordinator
from kcoord.server.txn.metadata import TxnConfig
from kcoord.server.txn.shard import TxnRecords
from kcoord.server.txn.state import TxnState as S
from kcoord.storage.log_manager import LogManager

T = "tx"
STORAGE = E.NOT_COORDINATOR  # KAFKA_STORAGE_ERROR, as Kafka's transaction coordinator maps it


class OnDisk:
    def __init__(self, tmp_path: Any) -> None:
        self.logs = LogManager(str(tmp_path))
        self.logs.create(TXN_TOPIC, 0)
        pids = itertools.count(1000)
        self.rt = CoordinatorRuntime(
            lambda r: TransactionCoordinator(TxnConfig(), FakeClock(), 1, lambda: next(pids), r.committed),
            TxnRecords(lambda tid: 0), self.logs, FakeClock(), 5000, 1048588)
        self.coord: TransactionCoordinator = self.rt.shard  # type: ignore[assignment]
        self.coord.active = True
        self.coord.answer_end_when_prepared = True

    def submit(self, result: Any) -> Any:
        return self.rt.submit(result)

    def break_fdatasync(self) -> None:
        plog = self.logs.get(TXN_TOPIC, 0)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, plog.active.fd)
        os.close(null)

    def snapshot(self) -> tuple:
        meta = self.coord.get(T)
        assert meta is not None
        return meta.snapshot() + (meta.last_producer_epoch, meta.pending)

    def durable_view(self) -> tuple:
        """What DescribeTransactions and KIP-890 verification report."""
        code, meta = self.coord.describe(T)
        assert code == E.NONE and meta is not None
        return meta.state, frozenset(meta.partitions), meta.producer_epoch


async def answer(x: Any) -> Any:
    for _ in range(2000):
        if not isinstance(x, Deferred):
            return x
        if x.done:
            return x.result()
        await asyncio.sleep(0.005)
    raise AssertionError("never answered")


async def ongoing(h: OnDisk) -> tuple[int, int]:
    """The id with a durable ongoing transaction over out-0."""
    code, pid, epoch = await answer(h.submit(h.coord.init_producer_id(T, 60000)))
    assert code == E.NONE
    assert await answer(h.submit(h.coord.add_partitions(T, pid, epoch, [("out", 0)]))) == E.NONE
    return pid, epoch


async def test_a_failed_add_partitions_leaves_the_transaction_as_it_was(tmp_path):
    h = OnDisk(tmp_path)
    pid, epoch = await ongoing(h)
    before = h.snapshot()
    h.break_fdatasync()
    pending = h.submit(h.coord.add_partitions(T, pid, epoch, [("out", 1)]))
    # replayed now, as the write is made; every reader still sees the durable transaction
    assert h.coord.get(T).partitions == {("out", 0), ("out", 1)}
    assert h.durable_view() == (S.ONGOING, {("out", 0)}, epoch)
    assert h.coord.verify_partitions(T, pid, epoch, [("out", 1)]) == {("out", 1): E.TRANSACTION_ABORTABLE}
    assert h.coord.add_partitions(T, pid, epoch, [("out", 0)]).response == E.CONCURRENT_TRANSACTIONS
    assert await answer(pending) == STORAGE
    assert h.snapshot() == before  # state, partitions, producer id and epoch; nothing pending
    # the id is free: its next requests are served from the transaction as it was
    assert h.coord.add_partitions(T, pid, epoch, [("out", 0)]).response == E.NONE
    assert h.coord.verify_partitions(T, pid, epoch, [("out", 0), ("out", 1)]) == {
        ("out", 0): E.NONE, ("out", 1): E.TRANSACTION_ABORTABLE}
    assert h.durable_view() == (S.ONGOING, {("out", 0)}, epoch)
    assert await answer(h.submit(h.coord.end_txn(T, pid, epoch, commit=True))) == (STORAGE, -1, -1)
    assert h.snapshot() == before


async def test_a_failed_end_txn_leaves_the_transaction_ongoing_at_its_epoch(tmp_path):
    h = OnDisk(tmp_path)
    pid, epoch = await ongoing(h)
    before = h.snapshot()
    h.break_fdatasync()
    pending = h.submit(h.coord.end_txn(T, pid, epoch, commit=True, client_version=2))  # bumps the epoch
    assert h.coord.get(T).state is S.PREPARE_COMMIT and h.coord.get(T).producer_epoch == epoch + 1
    assert h.durable_view() == (S.ONGOING, {("out", 0)}, epoch)
    assert h.coord.verify_partitions(T, pid, epoch, [("out", 0)]) == {("out", 0): E.NONE}
    assert h.coord.end_txn(T, pid, epoch, commit=True, client_version=2).response == (
        E.CONCURRENT_TRANSACTIONS, -1, -1)
    assert await answer(pending) == (STORAGE, -1, -1)
    assert h.snapshot() == before
    assert h.coord.marker_jobs == [] and h.coord.completing(T) is None  # no markers for it
    # the epoch was not bumped: the producer's next EndTxn is taken, and answered
    assert await answer(h.submit(h.coord.end_txn(T, pid, epoch, commit=False, client_version=2))) == (
        STORAGE, -1, -1)
    assert h.snapshot() == before


async def test_a_failed_first_write_leaves_no_transactional_id(tmp_path):
    h = OnDisk(tmp_path)
    h.break_fdatasync()
    pending = h.submit(h.coord.init_producer_id(T, 60000))
    assert h.coord.get(T) is not None  # replayed now
    assert h.coord.describe(T) == (E.TRANSACTIONAL_ID_NOT_FOUND, None)  # not durable
    assert h.coord.init_producer_id(T, 60000).response == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    assert await answer(pending) == (STORAGE, -1, -1)
    assert h.coord.get(T) is None and h.coord.describe(T) == (E.TRANSACTIONAL_ID_NOT_FOUND, None)
    assert await answer(h.submit(h.coord.init_producer_id(T, 60000))) == (STORAGE, -1, -1)
    assert h.coord.get(T) is None
