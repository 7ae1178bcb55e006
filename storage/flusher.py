"""Group commit: many writers waiting for durability share one fdatasync round.

Owns the scheduling of flush rounds per PartitionLog. At most one round runs at a time, in
an executor thread; a round covers everything appended before it started (its ticket is
taken on the loop thread). Waiters whose offset the running round does not cover wait for
the next round, which starts as soon as the running one ends, so under load each round
carries every append that arrived during the previous one.

The core is callback based (`when_durable`) so that the hot path of a commit costs no
asyncio task; `sync()` is the awaitable form.

A failed fdatasync is reported to every waiter of that round, and the log's directory goes
offline (storage/log_dir_failure.py): after such a failure the kernel may have dropped the
dirty pages, so no later round may tell anyone that data of that log is durable. Every waiter
of an offline log is failed at once; a log without a failure channel (tools, unit tests)
retries the same segments in the next round.
"""
from __future__ import annotations

import asyncio
import sys
import weakref
from collections.abc import Callable
from concurrent.futures import Executor

from kcoord.storage.log import FlushTicket, PartitionLog

__all__ = ["GroupCommit", "group_commit", "sync"]

Callback = Callable[[BaseException | None], None]


class GroupCommit:
    """The flush rounds of one log."""

    def __init__(self, log: PartitionLog, executor: Executor | None = None) -> None:
        self.log = log
        self.executor = executor
        self.rounds = 0
        self._running = False
        self._waiters: list[tuple[int, Callback]] = []

    def when_durable(self, upto_offset: int, callback: Callback) -> None:
        """Call `callback(None)` once upto_offset is on disk, or `callback(error)` if the
        round that should have made it durable failed. Called at once if already durable."""
        log = self.log
        if log.durable_offset > upto_offset:
            callback(None)
            return
        offline = log.offline_error()
        if offline is not None:
            callback(offline)
            return
        if upto_offset >= log.log_end_offset:
            raise ValueError(f"offset {upto_offset} is not in the log (end {log.log_end_offset})")
        self._waiters.append((upto_offset, callback))
        if not self._running:
            self._start_round()

    async def sync(self, upto_offset: int) -> None:
        """Return once log.durable_offset > upto_offset (that offset is on disk)."""
        if self.log.durable_offset > upto_offset:
            return
        fut = asyncio.get_running_loop().create_future()

        def settle(exc: BaseException | None) -> None:
            if fut.done():  # the caller was cancelled; the round goes on for the others
                return
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

        self.when_durable(upto_offset, settle)
        await fut

    def _start_round(self) -> None:
        _prompt_thread_handoffs()
        try:
            ticket = self.log.begin_flush()
        except OSError as e:  # the directory is (now) offline: nobody here becomes durable
            self._fail_all(e)
            return
        self._running = True
        self.rounds += 1
        fut = asyncio.get_running_loop().run_in_executor(self.executor, ticket.run)
        fut.add_done_callback(lambda f: self._round_done(ticket, f))

    def _round_done(self, ticket: FlushTicket, fut: asyncio.Future[None]) -> None:
        if fut.cancelled():  # the loop is shutting down; nobody can be told it is durable
            exc: BaseException | None = OSError("flush cancelled: shutting down")
            self.log.end_flush(ticket, ok=False)
        else:
            exc = fut.exception()
            self.log.end_flush(ticket, ok=exc is None, error=exc)
        self._running = False
        offline = self.log.offline_error()
        if offline is not None:  # this failure, or an earlier one, took the directory offline
            self._fail_all(offline)
            return
        durable = self.log.durable_offset
        done: list[tuple[Callback, BaseException | None]] = []
        still: list[tuple[int, Callback]] = []
        for upto, cb in self._waiters:
            if exc is None and upto < durable:
                done.append((cb, None))
            elif exc is not None and upto < ticket.end_offset:
                done.append((cb, exc))
            else:
                still.append((upto, cb))
        self._waiters = still
        if still:
            self._start_round()
        for cb, e in done:
            cb(e)

    def _fail_all(self, exc: BaseException) -> None:
        waiters, self._waiters = self._waiters, []
        for _upto, cb in waiters:
            cb(exc)


# A busy event loop keeps the GIL until the interpreter's switch interval (5 ms by default)
# runs out, and a flush round needs it twice in its thread: to start the fdatasync and to
# report it. Under load every round, and so every commit, waited milliseconds for that; a
# shorter interval bounds the wait. Only ever lowered (never above what the process chose).
# The flush threads are kcoord's only other Python threads, and they spend their time in
# fdatasync, so switching sooner costs nothing while nothing else wants the GIL.
SWITCH_INTERVAL_S = 0.0005


def _prompt_thread_handoffs() -> None:
    if sys.getswitchinterval() > SWITCH_INTERVAL_S:
        sys.setswitchinterval(SWITCH_INTERVAL_S)


_commits: weakref.WeakKeyDictionary[PartitionLog, GroupCommit] = weakref.WeakKeyDictionary()


def group_commit(log: PartitionLog) -> GroupCommit:
    """The GroupCommit of `log` (created on first use, dropped with the log)."""
    gc = _commits.get(log)
    if gc is None:
        gc = _commits[log] = GroupCommit(log)
    return gc


async def sync(log: PartitionLog, upto_offset: int) -> None:
    """Return once everything up to and including upto_offset is on disk (group commit)."""
    await group_commit(log).sync(upto_offset)
