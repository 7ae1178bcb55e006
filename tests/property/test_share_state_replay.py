"""Property (KIP-932 durable share state): the same random fetches, acknowledgements, lock
expiries, member leaves and restarts as test_share_partition_delivery, with every state change
but an acquisition persisted the way the server persists it (server/share/state.py: ShareUpdate
and, every few updates, ShareSnapshot records, encoded to bytes and decoded again), and every
restart rebuilding the partition from a fresh replay of all the records so far:

- the delivery invariants still hold (no record held twice, none lost, each finished once);
- replaying the records gives the live state: once every lock has run out, the replayed start
  offset and the state of every offset in the window equal the live partition's.
"""
from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol.share_records import StateBatch
from kcoord.server.group.share import partition as sp_mod
from kcoord.server.group.share.partition import RecordState, SharePartition
from kcoord.server.share.state import ShareStateRecords, ShareStateShard
from tests.property.test_share_partition_delivery import CONFIG, LOCK, World, logs, op

KEY = ("g", uuid.UUID(int=7), 0)
FMT = ShareStateRecords(50)


class DurableWorld(World):
    def __init__(self, log: list[tuple[int, int]], snapshot_every: int) -> None:
        super().__init__(log)
        self.snapshot_every = snapshot_every
        self.log_records: list[tuple[bytes, bytes | None]] = []
        self.shard = ShareStateShard(50, snapshot_every)
        self._persist([], full=True)

    def _persist(self, changed, full: bool = False) -> None:
        batches = [StateBatch(r.first, r.last, int(RecordState.AVAILABLE if r.state is RecordState.ACQUIRED
                                                   else r.state), r.delivery_count) for r in changed]
        for rec in self.shard.records_for(KEY, self.p.start_offset, batches, self.now, full=full):
            k, v = FMT.encode(rec)
            self.log_records.append((k, v))
            self.shard.replay(FMT.decode(k, v))

    def _count_terminal(self, changed) -> None:
        super()._count_terminal(changed)
        durable = [r for r in changed if r.state is not RecordState.ACQUIRED]
        if durable:
            self._persist(durable)

    def replayed(self) -> ShareStateShard:
        shard = ShareStateShard(50, self.snapshot_every)
        for k, v in self.log_records:
            shard.replay(FMT.decode(k, v))
        return shard

    def restart(self) -> None:
        s = self.replayed().get(KEY)
        snap = sp_mod.Snapshot(s.start_offset, tuple(sp_mod.StateBatch(b.first_offset, b.last_offset,
                                                                       b.delivery_state, b.delivery_count)
                                                     for b in s.batches))
        self.p = SharePartition.from_snapshot(snap, **CONFIG)
        self.holder.clear()

    def check_replay(self) -> None:
        """Every lock expired: the replayed state is the live one."""
        s = self.replayed().get(KEY)
        assert s.start_offset == self.p.start_offset
        persisted = {}
        for b in s.batches:
            for o in range(b.first_offset, b.last_offset + 1):
                persisted[o] = (b.delivery_state, b.delivery_count)
        assert max(persisted, default=-1) < max(self.p.end_offset, self.p.start_offset)
        for r in self.p.runs:
            assert r.state is not RecordState.ACQUIRED
            for o in range(r.first, r.last + 1):
                got = persisted.get(o, (int(RecordState.AVAILABLE), 0))
                if got[1] == 0 and r.state is RecordState.AVAILABLE:
                    continue  # never delivered since a restart filled the hole
                assert got == (int(r.state), r.delivery_count), f"offset {o}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(logs(), st.lists(op, max_size=80), st.integers(0, 4))
def test_share_state_replay(log, ops, snapshot_every):
    w = DurableWorld(log, snapshot_every)
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
    w.advance(LOCK + 1)
    w.check()
    w.check_replay()
    w.finish()
    w.check_replay()
