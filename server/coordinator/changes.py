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
        # key -> [its last durable record, how many writes in flight changed it]. An entry
        # whose count falls to 0 stays (a key written again, the usual case, costs one look-up
        # and no allocation) until idle entries outnumber the rest; then they are dropped.
        self.keys: dict[Any, list[Any]] = {}
        self.idle = 0  # entries with a count of 0

    def begin(self, records: Sequence[R], previous: list[R]) -> Change[R]:
        """A write made now: `records` were replayed, `previous` puts back what they replaced."""
        keys = self.keys
        if len(previous) == 1:  # the usual write: one record (one hash of its key)
            p = previous[0]
            key = p.key  # type: ignore[attr-defined]
            entry = keys.get(key)
            if entry is None:
                entry = keys[key] = [p, 1]
            elif entry[1]:
                entry[1] += 1
            else:  # idle: what the key holds now is its durable value
                entry[0] = p
                entry[1] = 1
                self.idle -= 1
            change: Change[R] = Change(self, records, previous, (key,), (entry,))
        else:
            first: dict[Any, R] = {}
            for p in previous:  # the first previous record of a key is what it held before the write
                first.setdefault(p.key, p)  # type: ignore[attr-defined]
            entries = []
            for key, p in first.items():
                entry = keys.get(key)
                if entry is None:
                    entry = keys[key] = [p, 1]
                elif entry[1]:
                    entry[1] += 1
                else:
                    entry[0] = p
                    entry[1] = 1
                    self.idle -= 1
                entries.append(entry)
            change = Change(self, records, previous, tuple(first), tuple(entries))
        self.writes[change] = None
        return change

    def committed(self, key: Any) -> Any:
        """The record last made durable for `key` while a write of it is in flight, else CURRENT."""
        entry = self.keys.get(key)
        return CURRENT if entry is None or not entry[1] else entry[0]

    def _release(self, change: Change[R], durable: bool) -> None:
        self.writes.pop(change, None)
        idle = 0
        last: dict[Any, R] | None = None
        for i, entry in enumerate(change.entries):
            n = entry[1] - 1
            entry[1] = n
            if n == 0:
                idle += 1
            elif durable:  # a later write of the key is still in flight: this one is now its durable value
                if last is None:
                    last = {r.key: r for r in change.records}  # type: ignore[attr-defined]
                r = last.get(change.touched[i])
                if r is not None:
                    entry[0] = r
        if idle:
            self.idle += idle
            keys = self.keys
            if self.idle > 1024 and self.idle * 2 > len(keys):
                self.keys = {k: e for k, e in keys.items() if e[1]}
                self.idle = 0


class Change(Generic[R]):
    """One write's effect on its shard's state, kept until it is durable or reverted."""

    __slots__ = ("owner", "records", "previous", "touched", "entries", "done", "taken_back", "__weakref__")

    def __init__(self, owner: InFlight[R], records: Sequence[R], previous: list[R],
                 touched: tuple[Any, ...], entries: tuple[list[Any], ...]) -> None:
        self.owner = owner
        self.records = records
        self.previous = previous
        self.touched = touched  # the keys it changed
        self.entries = entries  # their entries in the owner's `keys`, in the same order
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
        Writes made after it that touched the same keys were made on top of it, and so were
        those made after them on any key they touched: they are all reverted first, newest
        first (their own failure, which follows, finds them done)."""
        if self.done:
            return
        owner = self.owner
        later: list[Change[R]] = []
        seen = False
        tainted = set(self.touched)  # keys whose state a write to revert made
        for c in owner.writes:
            if c is self:
                seen = True
            elif seen and not tainted.isdisjoint(c.touched):
                later.append(c)
                tainted.update(c.touched)
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
