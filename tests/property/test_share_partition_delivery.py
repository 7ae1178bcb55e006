"""Property (KIP-932 share partitions): whatever several members fetch, acknowledge (with any
type, including stale acknowledgements of records whose lock already ran out), however time
advances, members leave and the partition is rebuilt from its snapshot ("restarts"):

- no record is ever held by two members at once (an independent model of who holds what,
  kept from the partition's answers, agrees with the partition at every step);
- no record is lost: every offset below the window start was accepted or archived, every
  offset in the window has a state, nothing past the log end is in flight;
- when everyone then keeps fetching and accepting, every record ends accepted or archived
  exactly once and the window start reaches the log end."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.server.group.share.partition import (
    AckBatch,
    AckError,
    AckType,
    RecordState,
    SharePartition,
)

LOCK = 100
MEMBERS = ["m0", "m1", "m2"]
CONFIG = {"lock_duration_ms": LOCK, "delivery_count_limit": 3, "max_record_locks": 100}


@st.composite
def logs(draw):
    """The log: contiguous batches of 1-5 records, 5-40 records in all."""
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=10))
    batches, off = [], 0
    for s in sizes:
        batches.append((off, off + s - 1))
        off += s
    return batches


op = st.one_of(
    st.tuples(st.just("fetch"), st.sampled_from(MEMBERS), st.integers(1, 12)),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.lists(st.sampled_from(list(AckType)), min_size=1, max_size=4),
              st.integers(0, 20), st.integers(1, 12)),
    st.tuples(st.just("time"), st.integers(1, LOCK)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("restart"),),
)


class World:
    def __init__(self, log: list[tuple[int, int]]) -> None:
        self.log = log
        self.log_end = log[-1][1] + 1
        self.p = SharePartition(0, **CONFIG)
        self.now = 0
        self.holder: dict[int, tuple[str, int]] = {}  # offset -> (member, lock deadline)
        self.believes: dict[str, set[int]] = {m: set() for m in MEMBERS}  # possibly stale
        self.terminal: dict[int, int] = {}  # offset -> times it became accepted / archived

    # --- bookkeeping from the partition's answers
    def _count_terminal(self, changed) -> None:
        for r in changed:
            if r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                for o in range(r.first, r.last + 1):
                    self.terminal[o] = self.terminal.get(o, 0) + 1
                    assert self.terminal[o] == 1, f"offset {o} finished twice"
                    self.holder.pop(o, None)
            elif r.state is RecordState.AVAILABLE:
                for o in range(r.first, r.last + 1):
                    self.holder.pop(o, None)
            elif r.state is RecordState.ACQUIRED:  # renewed
                for o in range(r.first, r.last + 1):
                    assert self.holder[o][0] == r.member
                    self.holder[o] = (r.member, r.lock_deadline)

    def fetch(self, m: str, max_records: int) -> list[int]:
        nxt = self.p.next_fetch_offset()
        batches = [b for b in self.log if b[1] >= nxt]
        got = self.p.acquire(m, batches, max_records, self.now)
        offsets = [o for a in got for o in range(a.first_offset, a.last_offset + 1)]
        for o in offsets:
            assert o not in self.holder, f"offset {o} handed to {m} while {self.holder[o][0]} holds it"
            assert o < self.log_end
            self.holder[o] = (m, self.now + LOCK)
        self.believes[m].update(offsets)
        return offsets

    def ack(self, m: str, types: list[AckType], pick: int, length: int) -> None:
        """One batch over up to `length` records from the `pick`th one it believes it holds
        (stopping at a gap in what it believes): one type for all, or types cycled per offset."""
        mine = sorted(self.believes[m])
        if not mine:
            return
        start = end = mine[pick % len(mine)]
        while end + 1 in self.believes[m] and end + 1 - start < length:
            end += 1
        n = end - start + 1
        per_offset = tuple(int(types[i % len(types)]) for i in range(n))
        batches = [AckBatch(start, end, per_offset if len(types) > 1 else (int(types[0]),))]
        renewed = {start + i for i in range(n) if per_offset[i] == AckType.RENEW}
        held_before = dict(self.holder)
        try:
            changed = self.p.acknowledge(m, batches, self.now)
        except AckError:
            # refused as a whole: some record is no longer its own (or past the window end)
            assert any(held_before.get(o, ("",))[0] != m
                       for b in batches for o in range(b.first_offset, b.last_offset + 1)
                       if o >= self.p.start_offset)
            for b in batches:
                self.believes[m].difference_update(
                    o for o in range(b.first_offset, b.last_offset + 1) if held_before.get(o, ("",))[0] != m)
            return
        self._count_terminal(changed)
        self.believes[m].difference_update(set(range(start, end + 1)) - renewed)

    def advance(self, dt: int) -> None:
        self.now += dt
        self._count_terminal(self.p.expire_locks(self.now))

    def leave(self, m: str) -> None:
        self._count_terminal(self.p.release_member(m, self.now))
        self.believes[m].clear()

    def restart(self) -> None:
        """A new partition from the persisted snapshot: locks do not survive."""
        self.p = SharePartition.from_snapshot(self.p.snapshot(), **CONFIG)
        self.holder.clear()

    def check(self) -> None:
        p = self.p
        live = {}
        for r in p.runs:
            if r.state is RecordState.ACQUIRED:
                for o in range(r.first, r.last + 1):
                    live[o] = (r.member, r.lock_deadline)
        assert live == self.holder
        assert p.end_offset <= self.log_end
        for o in range(p.start_offset):
            assert self.terminal.get(o) == 1, f"offset {o} below the start but never finished"
        covered = [o for r in p.runs for o in range(r.first, r.last + 1)]
        assert covered == list(range(p.start_offset, p.end_offset)), "a hole in the window"
        for r in p.runs:
            done = r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
            for o in range(r.first, r.last + 1):
                assert (self.terminal.get(o) == 1) == done

    def finish(self) -> None:
        """Everyone keeps fetching and accepting everything it gets."""
        for _ in range(200):
            if self.p.start_offset == self.log_end:
                break
            self.advance(LOCK)  # whatever is still locked from before runs out
            for m in MEMBERS:
                self.believes[m].clear()
                self.fetch(m, 10)
                while self.believes[m]:
                    self.ack(m, [AckType.ACCEPT], 0, 1000)
                self.check()
        assert self.p.start_offset == self.log_end
        assert self.p.runs == []
        assert sorted(self.terminal) == list(range(self.log_end))
        assert set(self.terminal.values()) == {1}


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs(), st.lists(op, max_size=80))
def test_share_partition_delivery(log, ops):
    w = World(log)
    for o in ops:
        kind = o[0]
        if kind == "fetch":
            w.fetch(o[1], o[2])
        elif kind == "ack":
            w.ack(o[1], o[2], o[3], o[4])
        elif kind == "time":
            w.advance(o[1])
        elif kind == "leave":
            w.leave(o[1])
        else:
            w.restart()
        w.check()
    w.finish()
