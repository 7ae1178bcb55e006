"""Delayed operations (Kafka's DelayedOperation / DelayedOperationPurgatory), on an injectable
Clock and without threads.

An operation completes exactly once: either some event makes `try_complete()` succeed (it
calls `force_complete()`), or its timer fires, in which case `on_complete()` runs and then
`on_expiration()`. Operations are watched under any hashable keys; `check_and_complete(key)`
retries the ones watching that key. Nothing here knows about groups: the group coordinator
(join, sync, heartbeats) and the Fetch handler (long polls) both use it.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable

from kcoord.server.clock import Clock, TimerHandle


class DelayedOperation:
    """Subclass and override try_complete / on_complete / on_expiration."""

    __slots__ = ("delay_ms", "deadline_ms", "_timer_at", "_completed", "_timer", "_keys", "_purgatory")

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.deadline_ms = 0  # set when watched; extend() may move it
        self._timer_at = 0  # when the armed timer fires (may be before deadline_ms)
        self._completed = False
        self._timer: TimerHandle | None = None
        self._keys: tuple[Hashable, ...] = ()
        self._purgatory: Purgatory | None = None

    # -- to override ----------------------------------------------------------------------

    def try_complete(self) -> bool:
        """Check whether the operation can complete now; if so call force_complete()."""
        return False

    def try_complete_key(self, key: Hashable) -> bool:
        """try_complete after an event on `key` only (check_and_complete's call): override
        when the operation can look at just what changed."""
        return self.try_complete()

    def on_complete(self) -> None:
        """Runs exactly once, on completion or on expiration (before on_expiration)."""

    def on_expiration(self) -> None:
        """Runs after on_complete when the operation completed because its delay elapsed."""

    # -- final ----------------------------------------------------------------------------

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self) -> bool:
        """Complete now. True only for the one caller that actually completed it."""
        if self._completed:
            return False
        self._completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        self.on_complete()
        return True


class Purgatory:
    def __init__(self, clock: Clock, name: str = "") -> None:
        self.clock = clock
        self.name = name
        # key -> ops watching it; dicts keep insertion order and remove in O(1)
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete `op` now if it can; otherwise watch it under `keys` and arm its timer.

        Returns True if it completed during this call.
        """
        if op.try_complete():
            return True
        op._keys = tuple(keys)
        op._purgatory = self
        for key in op._keys:
            self._watchers.setdefault(key, {})[op] = None
        # something may have changed while it was being registered (Kafka re-checks too)
        if op.try_complete():
            return True
        if not op.is_completed:
            op.deadline_ms = op._timer_at = self.clock.now_ms() + op.delay_ms
            op._timer = self.clock.call_later(op.delay_ms, lambda: self._expire(op))
        return op.is_completed

    def extend(self, op: DelayedOperation, delay_ms: int) -> bool:
        """Move a watched operation's expiry to `delay_ms` from now; False (and nothing done)
        if it already completed. A later deadline only stores an integer (the armed timer
        re-arms itself for the rest when it fires); an earlier one re-arms the timer. This
        makes "complete the old one and watch a new one" (Kafka's per-heartbeat
        DelayedHeartbeat) nearly free for operations whose completion has no effect of its own."""
        if op._completed:
            return False
        op.deadline_ms = deadline = self.clock.now_ms() + delay_ms
        if deadline < op._timer_at:
            if op._timer is not None:
                op._timer.cancel()
            op._timer_at = deadline
            op._timer = self.clock.call_later(delay_ms, lambda: self._expire(op))
        return True

    def check_and_complete(self, key: Hashable) -> int:
        """Retry the operations watching `key`; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        done = 0
        for op in list(ops):
            if not op.is_completed and op.try_complete_key(key):
                done += 1
        return done

    def watched(self, key: Hashable) -> int:
        ops = self._watchers.get(key)
        return 0 if ops is None else len(ops)

    def __len__(self) -> int:
        """Number of distinct pending operations."""
        return len({op for ops in self._watchers.values() for op in ops})

    def cancel(self, key: Hashable) -> list[DelayedOperation]:
        """Stop watching `key` and drop the timers of the ops watching it, without completing
        them (Kafka: cancelForKey). Returns the dropped operations."""
        ops = self._watchers.pop(key, None)
        if not ops:
            return []
        dropped = list(ops)
        for op in dropped:
            if op._timer is not None:
                op._timer.cancel()
                op._timer = None
            self._unwatch(op)
        return dropped

    def _expire(self, op: DelayedOperation) -> None:
        op._timer = None
        if op.is_completed:
            return
        remaining = op.deadline_ms - self.clock.now_ms()
        if remaining > 0:  # extended since the timer was armed
            op._timer_at = op.deadline_ms
            op._timer = self.clock.call_later(remaining, lambda: self._expire(op))
            return
        if op.force_complete():
            op.on_expiration()

    def _unwatch(self, op: DelayedOperation) -> None:
        for key in op._keys:
            ops = self._watchers.get(key)
            if ops is not None:
                ops.pop(op, None)
                if not ops:
                    del self._watchers[key]
        op._keys = ()
