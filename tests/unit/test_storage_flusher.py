"""kcoord.storage.flusher group commit on real files with real fdatasync."""
from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from kcoord.storage.flusher import GroupCommit, group_commit, sync
from kcoord.storage.log import PartitionLog


@pytest.fixture
def log(tmp_path):
    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"), segment_bytes=4000)
    yield log
    log.close()


async def test_many_concurrent_syncs_share_few_fdatasyncs(log):
    async def commit(i: int) -> int:
        _, last = log.append_records([(b"k%d" % i, b"v" * 50)], 1000 + i)
        await sync(log, last)
        assert log.durable_offset > last
        return last

    lasts = await asyncio.gather(*(commit(i) for i in range(100)))
    assert sorted(lasts) == list(range(100))
    assert log.durable_offset == log.log_end_offset == 100
    # 100 callers; a handful of rounds, each one fdatasync per touched segment (+ dir).
    assert group_commit(log).rounds <= 3
    assert 1 <= log.sync_count <= 10 < 100


async def test_callers_arriving_during_a_round_wait_for_the_next(log):
    # Continuous appends while syncing: every caller still only returns once durable.
    async def writer(n: int) -> None:
        for i in range(n):
            _, last = log.append_records([(b"k", b"x" * 200)], i)
            await sync(log, last)
            assert log.durable_offset > last
            await asyncio.sleep(0)

    await asyncio.gather(*(writer(30) for _ in range(10)))
    assert log.durable_offset == log.log_end_offset == 300
    # Many rolls happened meanwhile (4000-byte segments), and nothing was lost.
    assert len(log.segments) > 10
    assert group_commit(log).rounds < 300


async def test_sync_of_durable_offset_returns_at_once(log):
    log.append_records([(b"k", b"v")], 1)
    log.flush()
    n = log.sync_count
    await sync(log, 0)
    assert log.sync_count == n


async def test_sync_beyond_the_log_end_is_refused(log):
    with pytest.raises(ValueError):
        await sync(log, 0)


async def test_retention_deleting_segments_during_a_round(log):
    for i in range(200):
        log.append_records([(b"k", b"x" * 200)], i)
    gc = group_commit(log)
    task = asyncio.ensure_future(gc.sync(199))
    await asyncio.sleep(0)  # the round has taken its ticket (dup'ed fds)
    assert log.apply_retention(10**12, 0, -1) > 0
    await task
    assert log.durable_offset == 200


class FailingExecutor(ThreadPoolExecutor):
    """Runs the first `fail` flush rounds as a failing fdatasync would (EIO), then for real."""

    def __init__(self, fail: int) -> None:
        super().__init__(max_workers=1)
        self.fail = fail

    def submit(self, fn, *args, **kwargs):
        if self.fail:
            self.fail -= 1

            def broken():
                try:
                    raise OSError(5, "Input/output error")
                finally:
                    fn(*args, **kwargs)  # still closes the dup'ed fds

            return super().submit(broken)
        return super().submit(fn, *args, **kwargs)


async def test_failed_round_raises_to_every_waiter_then_retries(log):
    ex = FailingExecutor(fail=1)
    gc = GroupCommit(log, executor=ex)
    for i in range(5):
        log.append_records([(b"k", b"v")], i)
    results = await asyncio.gather(*(gc.sync(i) for i in range(5)), return_exceptions=True)
    assert all(isinstance(r, OSError) and r.errno == 5 for r in results)
    assert log.durable_offset == 0
    await gc.sync(4)  # the next round redoes the same segments
    assert log.durable_offset == 5
    ex.shutdown()


async def test_cancelled_waiter_does_not_cancel_the_round(log):
    log.append_records([(b"k", b"v")], 1)
    gc = group_commit(log)
    a = asyncio.ensure_future(gc.sync(0))
    b = asyncio.ensure_future(gc.sync(0))
    await asyncio.sleep(0)
    a.cancel()
    await b
    assert log.durable_offset == 1
    with pytest.raises(asyncio.CancelledError):
        await a


def test_no_fd_leak_from_rounds(log):
    before = len(os.listdir("/proc/self/fd"))
    for i in range(50):
        log.append_records([(b"k", b"v" * 300)], i)
        log.flush()
    # Rolls add segment files (3 fds each); flush rounds themselves leave nothing open.
    assert len(os.listdir("/proc/self/fd")) - before == 3 * (len(log.segments) - 1)


async def test_rounds_bound_the_gil_switch_interval(log):
    """A busy loop must hand the GIL to the flush thread within SWITCH_INTERVAL_S, not the
    interpreter's default 5 ms (only ever lowered)."""
    import sys

    from kcoord.storage.flusher import SWITCH_INTERVAL_S

    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)
        _, last = log.append_records([(b"k", b"v")], 1)
        await sync(log, last)
        assert sys.getswitchinterval() == SWITCH_INTERVAL_S
        sys.setswitchinterval(SWITCH_INTERVAL_S / 2)  # a lower choice stays
        _, last = log.append_records([(b"k", b"v")], 2)
        await sync(log, last)
        assert sys.getswitchinterval() == SWITCH_INTERVAL_S / 2
    finally:
        sys.setswitchinterval(before)
