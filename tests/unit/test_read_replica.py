"""KIP-392's RackAwareReplicaSelector as the leader applies it (server/replication/read_replica.py)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from kcoord.server.replication.read_replica import RACK_AWARE, preferred_read_replica

RACKS = {1: "a", 2: "b", 3: "b", 4: "c"}


def leader(isr=(1, 2, 3, 4), leos=None, caught_up=None, is_leader=True):
    leos = leos or {2: 100, 3: 100, 4: 100}
    caught_up = caught_up or {2: 1000, 3: 1000, 4: 1000}
    followers = {r: SimpleNamespace(log_end_offset=leos[r], last_caught_up_ms=caught_up[r]) for r in leos}
    return SimpleNamespace(broker_id=1, is_leader=is_leader, isr=isr, followers=followers)


@pytest.mark.parametrize("replica, rack, offset, racks, selector, expected", [
    (leader(), "c", 50, RACKS, RACK_AWARE, 4),                      # the follower in the client's rack
    (leader(), "a", 50, RACKS, RACK_AWARE, None),                   # the leader's rack: read from the leader
    (leader(), None, 50, RACKS, RACK_AWARE, None),                  # no client rack
    (leader(), "", 50, RACKS, RACK_AWARE, None),
    (leader(), "z", 50, RACKS, RACK_AWARE, None),                   # no replica in that rack
    (leader(), "c", 50, RACKS, "", None),                           # no selector configured
    (leader(), "c", 50, RACKS, "com.example.Other", None),
    (leader(isr=(1, 2, 3)), "c", 50, RACKS, RACK_AWARE, None),      # out of the ISR: never chosen
    (leader(leos={2: 100, 3: 100, 4: 40}), "c", 50, RACKS, RACK_AWARE, None),  # has not reached the offset
    (leader(), "c", 50, {1: "a", 2: "b", 3: "b"}, RACK_AWARE, None),  # not a live broker
    (leader(leos={2: 90, 3: 100, 4: 100}), "b", 50, RACKS, RACK_AWARE, 3),   # the highest log end offset
    (leader(caught_up={2: 900, 3: 1000, 4: 1000}), "b", 50, RACKS, RACK_AWARE, 3),  # then the latest caught up
    (leader(), "b", 50, RACKS, RACK_AWARE, 3),                      # then the highest id
    (leader(is_leader=False), "c", 50, RACKS, RACK_AWARE, None),    # only a leader names a replica
])
def test_rack_aware_selector(replica, rack, offset, racks, selector, expected):
    assert preferred_read_replica(selector, replica, rack, offset, racks, now_ms=2000) == expected
