"""A TransactionCoordinator driven synchronously: results are replayed as the runtime does
(when the write is made, reverted if it fails: server/coordinator/changes.py), "appended" to
an in-memory log (the encoded bytes), and answered; markers are completed on demand; a restart
replays the log into a fresh coordinator the way start-up loading does."""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.txn_log import TxnRecord, decode_txn_record, encode_txn_key, encode_txn_value
from kcoord.server.clock import FakeClock
from kcoord.server.coordinator.changes import InFlight
from kcoord.server.deferred import Deferred
from kcoord.server.txn.coordinator import TransactionCoordinator
from kcoord.server.txn.metadata import TxnConfig
from kcoord.server.txn.result import TxnResult
from kcoord.server.txn.state import TxnState

TOPIC = "out"
OFFSETS = "__consumer_offsets"


class TxnHarness:
    def __init__(self, partitions: int = 4, clock: FakeClock | None = None,
                 log: list[tuple[bytes, bytes | None]] | None = None, next_pid: int = 1000, **cfg: Any) -> None:
        self.clock = clock or FakeClock()
        self.cfg = cfg
        self.partitions = partitions
        self.pids = itertools.count(next_pid)
        self.allocated: list[int] = []
        self.in_flight: InFlight[TxnRecord] = InFlight(lambda r: self.coord.replay(r))
        self.coord = TransactionCoordinator(TxnConfig(**cfg), self.clock, partitions, self._allocate,
                                            self.in_flight.committed)
        self.coord.active = True
        self.log: list[tuple[bytes, bytes | None]] = [] if log is None else log
        self.fail: ErrorCode | None = None  # the next append fails with this code

    def _allocate(self) -> int:
        pid = next(self.pids)
        self.allocated.append(pid)
        return pid

    # ---------------------------------------------------------------- running results

    def run(self, result: TxnResult) -> Any:
        if not result.records:
            return result.response
        finish = self.begin(result)
        if self.fail is not None:
            code, self.fail = self.fail, None
            return finish(code)
        return finish(None)

    def begin(self, result: TxnResult) -> Callable[[ErrorCode | None], Any]:
        """Make the result's write as the runtime does (its records replayed now); the write
        stays in flight until the returned call ends it: durable (None, appended to the log)
        or failed (a code: reverted). Returns the answer."""
        assert result.on_appended is not None
        previous = []
        for r in result.records:  # as the runtime: replayed as the write is made
            previous.append(self.coord.current_record(r.key))
            self.coord.replay(r)
        change = self.in_flight.begin(result.records, previous)

        def finish(code: ErrorCode | None) -> Any:
            if code is not None:
                change.revert()
                change.failed()
                return self._settle(result.on_appended(code))
            for r in result.records:
                self.log.append((encode_txn_key(r.key), encode_txn_value(r.value)))
            change.settle()
            return self._settle(result.on_appended(None))

        return finish

    @staticmethod
    def _settle(answer: Any) -> Any:
        if isinstance(answer, Deferred) and answer.done:
            return answer.result()
        return answer

    def finish_markers(self) -> int:
        """Complete every transaction whose markers are waiting (as if all were written)."""
        n = 0
        while self.coord.marker_jobs:
            jobs, self.coord.marker_jobs = self.coord.marker_jobs, []
            for job, d in jobs:
                self.run(self.coord.complete(job))
                d.complete(None)
                n += 1
        return n

    # ---------------------------------------------------------------- the APIs

    def init(self, tid: str, timeout: int = 60000, expected: tuple[int, int] | None = None) -> tuple:
        return self.run(self.coord.init_producer_id(tid, timeout, expected))

    def add(self, tid: str, pid: int, epoch: int, parts: list[tuple[str, int]] | None = None) -> ErrorCode:
        return self.run(self.coord.add_partitions(tid, pid, epoch, parts or [(TOPIC, 0)]))

    def end(self, tid: str, pid: int, epoch: int, commit: bool, finish: bool = True) -> Any:
        answer = self.run(self.coord.end_txn(tid, pid, epoch, commit))
        if finish and isinstance(answer, Deferred):
            self.finish_markers()
            assert answer.done
            return answer.result()
        return answer

    def verify(self, tid: str, pid: int, epoch: int, tp: tuple[str, int] = (TOPIC, 0)) -> ErrorCode:
        return self.coord.verify_partitions(tid, pid, epoch, [tp])[tp]

    def state(self, tid: str) -> TxnState | None:
        m = self.coord.get(tid)
        return None if m is None else m.state

    def to_state(self, tid: str, target: TxnState) -> tuple[int, int]:
        """Bring `tid` (new) into `target`; Prepare* states keep their markers pending."""
        code, pid, epoch = self.init(tid)
        assert code == ErrorCode.NONE
        if target is TxnState.EMPTY:
            return pid, epoch
        assert self.add(tid, pid, epoch) == ErrorCode.NONE
        if target is TxnState.ONGOING:
            return pid, epoch
        commit = target in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
        finish = target in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        self.end(tid, pid, epoch, commit, finish=finish)
        assert self.state(tid) is target
        return pid, epoch

    # ---------------------------------------------------------------- restarts

    def restart(self) -> TxnHarness:
        """A fresh coordinator loading this log (latest record per key, like the runtime)."""
        h = TxnHarness(self.partitions, self.clock, list(self.log), next_pid=next(self.pids), **self.cfg)
        for p in range(self.partitions):
            h.coord.begin_loading(p)
        latest: dict[bytes, bytes | None] = {}
        for k, v in self.log:
            latest.pop(k, None)
            latest[k] = v
        for k, v in latest.items():
            rec = decode_txn_record(k, v)
            assert rec is not None
            h.coord.replay(rec)
        for p in range(self.partitions):
            h.coord.end_loading(p)
        return h

    def decoded_log(self) -> list[TxnRecord]:
        out = []
        for k, v in self.log:
            rec = decode_txn_record(k, v)
            assert rec is not None
            out.append(rec)
        return out
