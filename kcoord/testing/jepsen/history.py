"""A recorded history: every client operation as an invocation and its completion (ok: done,
fail: surely not done, info: unknown), nemesis faults, and observations of who leads what.
Times are seconds on the monotonic clock since the history began. Thread-safe."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TYPES = ("invoke", "ok", "fail", "info")


@dataclass(frozen=True)
class Op:
    index: int          # position in the history
    id: int             # pairs an invocation with its completion
    process: str        # the client (or "nemesis", or an observer)
    type: str           # invoke | ok | fail | info
    f: str              # send | commit | txn | kill | stop | start | leader | coordinator
    value: Any
    time: float


class History:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._open: dict[int, Op] = {}
        self._next_id = 0
        self._t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._t0

    def _add(self, op_id: int, process: str, type_: str, f: str, value: Any, at: float | None) -> Op:
        op = Op(len(self._ops), op_id, process, type_, f, value, self.now() if at is None else at)
        self._ops.append(op)
        return op

    def invoke(self, process: str, f: str, value: Any, at: float | None = None) -> int:
        with self._lock:
            op_id = self._next_id
            self._next_id += 1
            self._open[op_id] = self._add(op_id, process, "invoke", f, value, at)
            return op_id

    def complete(self, op_id: int, type_: str, value: Any = None, at: float | None = None) -> None:
        """End an invocation; value None keeps the invoked value."""
        assert type_ in ("ok", "fail", "info"), type_
        with self._lock:
            inv = self._open.pop(op_id)
            self._add(op_id, inv.process, type_, inv.f, inv.value if value is None else value, at)

    def record(self, process: str, f: str, value: Any, type_: str = "ok", invoked_at: float | None = None,
               at: float | None = None) -> None:
        """An operation seen only when it ended (a client in another process reporting it)."""
        op_id = self.invoke(process, f, value, at=invoked_at)
        self.complete(op_id, type_, at=at)

    def observe(self, f: str, value: Any, source: str) -> None:
        """A fact seen at one moment (f: leader | coordinator)."""
        self.record(source, f, value)

    def close_open(self) -> None:
        """Invocations never completed (a client gone) end as info: their outcome is unknown."""
        with self._lock:
            for op_id, inv in list(self._open.items()):
                self._add(op_id, inv.process, "info", inv.f, inv.value, None)
            self._open.clear()

    @property
    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def pairs(self, f: str | None = None) -> list[tuple[Op, Op | None]]:
        """(invocation, completion or None) of every operation, in invocation order."""
        done: dict[int, Op] = {}
        invs: list[Op] = []
        for op in self.ops:
            if f is not None and op.f != f:
                continue
            if op.type == "invoke":
                invs.append(op)
            else:
                done[op.id] = op
        return [(i, done.get(i.id)) for i in invs]

    def dump(self, path: Path) -> None:
        """One JSON object per line, for reading after a failure."""
        with open(path, "w") as out:
            for op in self.ops:
                out.write(json.dumps(asdict(op), default=str) + "\n")
