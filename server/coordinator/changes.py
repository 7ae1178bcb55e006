"""What the runtime keeps of each write in flight (server/coordinator/result.py states the rule):
the records that put back what the write's records replaced, so that a write whose records
never reach the log is reverted exactly; and, per key a write in flight changed, the value
last made durable, which reads of committed state see (Kafka's reads at the last committed
offset)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

R = TypeVar("R")

# what a key's committed value is not known to differ from its current one
CURRENT: Any = object()


class InFlight(Generic[R]):
    """The writes not yet durable (nor reverted), in the order they were made."""

    def __init__(self, replay: Callable[[R], None]) -> None:
        self.replay = replay
        self.writes: dict[Change[R], None] = {}  # insertion-ordered: oldest first
        # key -> [its last durable record, how many writes in flight changed it]
        self.keys: dict[Any, list[Any]] = {}

    def begin(self, records: Sequence[R], previous: list[R]) -> Change[R]:
        """A write made now: `records` were replayed, `previous` puts back what they replaced."""
        keys = self.keys
        if len(previous) == 1:  # the usual write: one record (one hash of its key)
            key = previous[0].key  # type: ignore[attr-defined]
            change: Change[R] = Change(self, records, previous, (key,))
            keys.setdefault(key, [previous[0], 0])[1] += 1
        else:
            change = Change(self, records, previous, ())
            first: dict[Any, R] = {}
            for p in previous:  # the first previous record of a key is what it held before the write
                first.setdefault(p.key, p)  # type: ignore[attr-defined]
            change.touched = tuple(first)
            for key, p in first.items():
                entry = keys.get(key)
                if entry is None:
                    keys[key] = [p, 1]
                else:
                    entry[1] += 1
        self.writes[change] = None
        return change

    def committed(self, key: Any) -> Any:
        """The record last made durable for `key` while a write of it is in flight, else CURRENT."""
        entry = self.keys.get(key)
        return CURRENT if entry is None else entry[0]

    def _release(self, change: Change[R], durable: bool) -> None:
        self.writes.pop(change, None)
        keys = self.keys
        last: dict[Any, R] | None = None
        for key in change.touched:
            entry = keys.pop(key, None)
            if entry is None:
                continue
            entry[1] -= 1
            if entry[1] > 0:  # a later write of the key is still in flight
                keys[key] = entry
                if durable:  # this one is now the key's committed value
                    if last is None:
                        last = {r.key: r for r in change.records}  # type: ignore[attr-defined]
                    if key in last:
                        entry[0] = last[key]


class Change(Generic[R]):
    """One write's effect on its shard's state, kept until it is durable or reverted."""

    __slots__ = ("owner", "records", "previous", "touched", "done", "taken_back", "__weakref__")

    def __init__(self, owner: InFlight[R], records: Sequence[R], previous: list[R],
                 touched: tuple[Any, ...]) -> None:
        self.owner = owner
        self.records = records
        self.previous = previous
        self.touched = touched  # the keys it changed
        self.done = False
        self.taken_back = False  # reverted with an earlier write it was made on top of

    def settle(self) -> None:
        """The write is durable (answered without an error). One reverted with an earlier
        write that failed is replayed again: its records made it to the log after all."""
        if not self.done:
            self.done = True
            self.owner._release(self, durable=True)
        elif self.taken_back:
            self.taken_back = False
            replay = self.owner.replay
            for r in self.records:
                replay(r)

    def failed(self) -> None:
        """The write was answered with an error: reverted already, or (its partition was
        unloaded, its state dropped) nothing to put back; it is no longer in flight."""
        if not self.done:
            self.done = True
            self.owner._release(self, durable=False)
        self.taken_back = False

    def revert(self) -> None:
        """The records never reached the log: put the shard back as it was before the write.
        Writes made after it that touched the same keys were made on top of it: they are
        reverted first, newest first (their own failure, which follows, finds them done)."""
        if self.done:
            return
        owner = self.owner
        later: list[Change[R]] = []
        seen = False
        mine = set(self.touched)
        for c in owner.writes:
            if c is self:
                seen = True
            elif seen and mine.intersection(c.touched):
                later.append(c)
        for c in reversed(later):
            c._put_back()
            c.taken_back = True
        self._put_back()

    def _put_back(self) -> None:
        self.done = True
        replay = self.owner.replay
        for r in reversed(self.previous):
            replay(r)
        self.owner._release(self, durable=False)
