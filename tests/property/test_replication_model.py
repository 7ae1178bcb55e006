"""Replicas never diverge: random appends, follower fetches, ISR shrinks, leader elections
(from the ISR), crashes and a deposed leader that keeps writing until it hears of the new
epoch leave every replica that has finished truncating a prefix of the leader's log, and what
was once committed (below a high watermark) is never retracted.

A model of the logs (each record is its epoch and a unique id) with the real parts that decide:
LeaderEpochCache (storage/leader_epoch.py) on every replica, and the follower's truncation
rule (server/replication/partition.truncation_point) driven by the leader's answer to
OffsetsForLeaderEpoch (LeaderEpochCache.end_offset_for), as the fetcher does."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.server.replication.partition import truncation_point
from kcoord.storage.leader_epoch import UNDEFINED_EPOCH, LeaderEpochCache

N = 3


class Replica:
    def __init__(self, rid: int) -> None:
        self.rid = rid
        self.log: list[tuple[int, int]] = []  # (epoch, unique id) per offset
        self.cache = LeaderEpochCache(None)
        self.hw = 0
        self.truncating = False

    def truncate(self, offset: int) -> None:
        del self.log[offset:]
        self.cache.truncate_from_end(len(self.log))
        self.hw = min(self.hw, len(self.log))


class Cluster:
    def __init__(self) -> None:
        self.replicas = [Replica(i) for i in range(N)]
        self.leader = 0
        self.epoch = 0
        self.isr = set(range(N))
        self.zombie: int | None = None  # a deposed leader that has not heard of the new epoch
        self.follower_leo: dict[int, int] = {}
        self.epoch_start = 0
        self.uid = 0
        self.committed: list[tuple[int, int]] = []
        self.replicas[0].cache.assign(0, 0)

    @property
    def lead(self) -> Replica:
        return self.replicas[self.leader]

    def append(self, r: Replica, epoch: int, n: int) -> None:
        r.cache.assign(epoch, len(r.log))
        for _ in range(n):
            self.uid += 1
            r.log.append((epoch, self.uid))

    def update_hw(self) -> None:
        lead = self.lead
        new = min([len(lead.log)] + [self.follower_leo.get(f, -1) for f in self.isr if f != self.leader])
        if new > lead.hw:
            lead.hw = new
        # a new leader's high watermark may lag the old one's until its followers fetch (Kafka's
        # too): what was committed must still be in its log, and only a higher mark commits more
        assert lead.log[:len(self.committed)] == self.committed, "a committed record was retracted"
        if lead.hw > len(self.committed):
            self.committed = lead.log[:lead.hw]

    def fetch(self, f: int, n: int) -> None:
        r, lead = self.replicas[f], self.lead
        if f == self.leader or f == self.zombie:
            return
        if r.truncating:
            for _ in range(64):
                asked = r.cache.latest_epoch
                if asked == UNDEFINED_EPOCH:
                    break
                leader_epoch, leader_end = lead.cache.end_offset_for(asked, len(lead.log))
                offset, done = truncation_point(r.cache, len(r.log), r.hw, asked, leader_epoch, leader_end)
                r.truncate(offset)
                if done:
                    break
            r.truncating = False
        self.follower_leo[f] = len(r.log)  # the fetch offset tells the leader
        self.update_hw()
        if f not in self.isr and len(r.log) >= lead.hw and len(r.log) >= self.epoch_start:
            self.isr.add(f)
        for epoch, uid in lead.log[len(r.log):len(r.log) + n]:  # the batches, as they are
            r.cache.assign(epoch, len(r.log))
            r.log.append((epoch, uid))
        r.hw = max(r.hw, min(lead.hw, len(r.log)))

    def elect(self, new: int) -> None:
        """The controller makes `new` (an ISR member) leader in a new epoch; the old leader
        becomes a zombie until it is told."""
        old = self.leader
        self.epoch += 1
        self.leader = new
        self.zombie = old if old != new else None
        self.isr = {b for b in self.isr if b != old} | {new}
        lead = self.lead
        lead.truncating = False
        self.epoch_start = len(lead.log)
        lead.cache.assign(self.epoch, self.epoch_start)
        self.follower_leo = {}
        for r in self.replicas:
            if r.rid != new:
                r.truncating = True  # a leader change: every follower truncates first

    def tell_zombie(self) -> None:
        if self.zombie is not None:
            self.replicas[self.zombie].truncating = True
            self.zombie = None

    def check(self) -> None:
        lead = self.lead.log
        assert lead[:len(self.committed)] == self.committed
        for r in self.replicas:
            if r.rid in (self.leader, self.zombie) or r.truncating:
                continue
            assert r.log == lead[:len(r.log)], f"replica {r.rid} diverged from leader {self.leader}"
            assert r.cache.entries() == _epochs_of(r.log)


def _epochs_of(log: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for offset, (epoch, _) in enumerate(log):
        if not out or out[-1][0] != epoch:
            out.append((epoch, offset))
    return out


ops = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 3)),
    st.tuples(st.just("fetch"), st.integers(0, N - 1), st.integers(0, 4)),
    st.tuples(st.just("shrink"), st.integers(0, N - 1)),
    st.tuples(st.just("elect"), st.integers(0, N - 1)),
    st.tuples(st.just("zombie_append"), st.integers(1, 2)),
    st.tuples(st.just("tell_zombie")),
    st.tuples(st.just("crash"), st.integers(0, N - 1)),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(ops, max_size=60))
def test_replicas_never_diverge_and_commits_stay(history):
    c = Cluster()
    for op in history:
        kind = op[0]
        if kind == "append":
            c.append(c.lead, c.epoch, op[1])
            c.update_hw()
        elif kind == "fetch":
            c.fetch(op[1], op[2])
        elif kind == "shrink" and op[1] != c.leader and op[1] in c.isr:
            c.isr.discard(op[1])
            c.update_hw()
        elif kind == "elect" and op[1] in c.isr and op[1] != c.zombie:
            c.elect(op[1])
            c.update_hw()
        elif kind == "zombie_append" and c.zombie is not None:
            z = c.replicas[c.zombie]
            c.append(z, z.cache.latest_epoch, op[1])  # acks=1 writes a deposed leader still takes
        elif kind == "tell_zombie":
            c.tell_zombie()
        elif kind == "crash":
            x = op[1]
            if x == c.leader:
                others = sorted(b for b in c.isr if b != x and b != c.zombie)
                if not others:
                    continue  # no clean leader to elect: the partition would be offline
                c.elect(others[0])
                c.tell_zombie()  # it restarts and learns the state
            else:
                c.replicas[x].truncating = True  # restarts: truncates before fetching again
                if x == c.zombie:
                    c.zombie = None
        c.check()
