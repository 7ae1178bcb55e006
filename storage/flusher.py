"""Group commit: many `await sync(log, offset)` callers share one fdatasync round.

Owns the scheduling of flush rounds per PartitionLog. At most one round runs at a time, in
an executor thread; a round covers everything appended before it started (its ticket is
taken on the loop thread). Callers whose offset the running round does not cover wait for
the next round, which starts as soon as the running one ends, so under load each round
carries every append that arrived during the previous one.

A failed fdatasync raises the OSError to every waiter of that round. After such a failure
the kernel may have dropped the dirty pages, so the caller should treat the log as suspect
(Kafka halts the broker); the next round retries the same segments.
"""
from __future__ import annotations

import asyncio
import weakref
from concurrent.futures import Executor

from storage.log import PartitionLog

__all__ = ["GroupCommit", "sync"]


class GroupCommit:
    """The flush rounds of one log."""

    def __init__(self, log: PartitionLog, executor: Executor | None = None) -> None:
        self.log = log
        self.executor = executor
        self.rounds = 0
        self._running: asyncio.Future[None] | None = None
        self._running_covers = -1  # durable_offset once the running round succeeds
        self._next: asyncio.Future[None] | None = None

    async def sync(self, upto_offset: int) -> None:
        """Return once log.durable_offset > upto_offset (that offset is on disk)."""
        log = self.log
        if upto_offset >= log.log_end_offset:
            raise ValueError(f"offset {upto_offset} is not in the log (end {log.log_end_offset})")
        while log.durable_offset <= upto_offset:
            if self._running is None:
                fut = self._start_round(None)
            elif self._running_covers > upto_offset:
                fut = self._running
            else:
                if self._next is None:
                    self._next = _new_future()
                fut = self._next
            # shield: a cancelled caller must not cancel a round others wait on.
            await asyncio.shield(fut)

    def _start_round(self, fut: asyncio.Future[None] | None) -> asyncio.Future[None]:
        fut = fut if fut is not None else _new_future()
        ticket = self.log.begin_flush()
        self._running = fut
        self._running_covers = ticket.end_offset
        self.rounds += 1
        asyncio.get_running_loop().create_task(self._run(ticket, fut))
        return fut

    async def _run(self, ticket, fut: asyncio.Future[None]) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, ticket.run)
        except asyncio.CancelledError:
            # Loop shutting down: the thread may still finish, but nobody can be told so.
            self.log.end_flush(ticket, ok=False)
            fut.cancel()
            raise
        except Exception as e:  # every waiter of this round must hear about it
            self.log.end_flush(ticket, ok=False)
            _settle(fut, e)
        else:
            self.log.end_flush(ticket)
            _settle(fut, None)
        finally:
            self._running = None
            if self._next is not None:
                nxt, self._next = self._next, None
                self._start_round(nxt)


def _new_future() -> asyncio.Future[None]:
    fut = asyncio.get_running_loop().create_future()
    # Retrieve the exception even if every waiter was cancelled, to avoid "never retrieved".
    fut.add_done_callback(lambda f: f.cancelled() or f.exception())
    return fut


def _settle(fut: asyncio.Future[None], exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(None)
    else:
        fut.set_exception(exc)


_commits: weakref.WeakKeyDictionary[PartitionLog, GroupCommit] = weakref.WeakKeyDictionary()


def group_commit(log: PartitionLog) -> GroupCommit:
    """The GroupCommit of `log` (created on first use, dropped with the log)."""
    gc = _commits.get(log)
    if gc is None:
        gc = _commits[log] = GroupCommit(log)
    return gc


async def sync(log: PartitionLog, upto_offset: int) -> None:
    """Return once everything up to and including upto_offset is on disk (group commit)."""
    if log.durable_offset > upto_offset:
        return
    await group_commit(log).sync(upto_offset)
