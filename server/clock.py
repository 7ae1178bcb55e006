"""Time as the coordinator sees it: injectable so tests advance time instead of sleeping."""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class SystemClock:
    """Wall-clock milliseconds; timers on the running asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self.closed = False

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        loop = self._loop or asyncio.get_running_loop()
        return loop.call_later(max(0, delay_ms) / 1000.0, self._fire, callback)

    def _fire(self, callback: Callable[[], None]) -> None:
        if not self.closed:
            callback()

    def close(self) -> None:
        """Timers set on this clock no longer fire (a reset drops the state that set them)."""
        self.closed = True


class _FakeTimer:
    __slots__ = ("deadline", "seq", "callback", "cancelled")

    def __init__(self, deadline: int, seq: int, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.seq = seq
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: _FakeTimer) -> bool:
        return (self.deadline, self.seq) < (other.deadline, other.seq)


class FakeClock:
    """A clock that only moves when a test calls advance(); due timers fire in deadline order."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._timers: list[_FakeTimer] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        t = _FakeTimer(self._now + max(0, delay_ms), next(self._seq), callback)
        heapq.heappush(self._timers, t)
        return t

    def advance(self, ms: int) -> None:
        target = self._now + ms
        while self._timers and self._timers[0].deadline <= target:
            t = heapq.heappop(self._timers)
            if t.cancelled:
                continue
            self._now = max(self._now, t.deadline)
            t.callback()
        self._now = target

    def pending(self) -> int:
        return sum(1 for t in self._timers if not t.cancelled)
