"""Coordinator CPU time for one complete rebalance round: N members JoinGroup (v5, the first
one joining an Empty group, the others while it prepares), the initial delay elapses, every
member gets its JoinGroup answer, the leader's SyncGroup assignment is "appended" and replayed
and every follower's SyncGroup is answered. Driven directly through GroupCoordinator with a
FakeClock; prints members, ms (time.process_time) and µs per member.

Run: python bench/bench_rebalance.py [N ...]
"""
from __future__ import annotations

import gc
import sys
import time

from kafka.protocol.consumer import JoinGroupRequest, SyncGroupRequest

from kcoord.server.clock import FakeClock
from kcoord.server.deferred import Deferred
from kcoord.server.group.config import GroupConfig
from kcoord.server.group.coordinator import GroupCoordinator

SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x05topic\xff\xff\xff\xff"


def resolve(x):
    return x.result() if isinstance(x, Deferred) else x


def one_round(n: int) -> float:
    clock = FakeClock()
    config = GroupConfig(group_initial_rebalance_delay_ms=3000)
    coord = GroupCoordinator(config, clock)
    proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)]
    joins = [
        JoinGroupRequest(version=3, group_id="bench", session_timeout_ms=30000, rebalance_timeout_ms=60000,
                         member_id="", protocol_type="consumer", protocols=proto)
        for _ in range(n)
    ]
    gc.collect()
    t0 = time.process_time()
    parked = [coord.join_group(j, 3, f"c{i}", "/127.0.0.1").response for i, j in enumerate(joins)]
    # the initial delay re-arms while members arrive; step until the join completes
    while not all(p.done for p in parked):
        clock.advance(config.group_initial_rebalance_delay_ms)
    resps = [p.result() for p in parked]
    gen, leader = resps[0].generation_id, resps[0].leader
    ids = [r.member_id for r in resps]
    syncs = []
    for mid in ids:
        assignments = []
        if mid == leader:
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=b"a") for m in ids]
        req = SyncGroupRequest(version=3, group_id="bench", generation_id=gen, member_id=mid, assignments=assignments)
        result = coord.sync_group(req, 3)
        if result.records:  # the leader: append (instantly) then replay, as the runtime does
            for r in result.records:
                coord.replay(r)
            answer = result.on_appended(None)
            # a Deferred response is the answer itself (the replay completed it)
            syncs.append(result.response if isinstance(result.response, Deferred) else resolve(answer))
        else:
            syncs.append(result.response)
    syncs = [resolve(s) for s in syncs]
    elapsed = time.process_time() - t0
    assert all(s.error_code == 0 for s in syncs) and len(syncs) == n
    assert str(coord.group("bench").state) == "Stable"
    return elapsed


def main(sizes: list[int]) -> None:
    one_round(100)  # warm up imports and class caches
    print(f"{'members':>8} {'ms':>10} {'µs/member':>10}")
    for n in sizes:
        best = min(one_round(n) for _ in range(3 if n <= 1000 else 1))
        print(f"{n:>8} {best * 1000:>10.1f} {best * 1e6 / n:>10.1f}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100, 1000, 10000])
