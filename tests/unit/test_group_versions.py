"""Every supported version of every group API answers with a response that encodes."""
from __future__ import annotations

import pytest
from test_group_helpers import Harness, done, parked

G = "group"


@pytest.mark.parametrize("version", range(10))
def test_join_sync_heartbeat_leave_each_version(version: int) -> None:
    h = Harness(group_initial_rebalance_delay_ms=0)
    inst = "i" if version >= 5 else None
    first = h.join(G, version=version, instance=inst)
    if version >= 4 and inst is None:
        first = h.join(G, done(first).member_id, version=version)
    h.advance(0)
    r = done(first)
    assert r.error_code == 0 and r.API_VERSION == version
    sv, hv, lv = min(version, 5), min(version, 4), min(version, 5)
    s = done(h.sync(G, r.member_id, r.generation_id, {r.member_id: b"x"}, version=sv,
                    instance=inst if sv >= 3 else None))
    assert s.error_code == 0 and s.assignment == b"x"
    assert done(h.heartbeat(G, r.member_id, r.generation_id, version=hv, instance=inst if hv >= 3 else None)) \
        .error_code == 0
    le = done(h.leave(G, (r.member_id, inst if lv >= 3 else None), version=lv))
    assert le.error_code == 0
    assert not parked(first)


@pytest.mark.parametrize("version", range(10))
def test_commit_fetch_each_version(version: int) -> None:
    h = Harness()
    c = done(h.commit(G, {("t", 0): 7}, version=version))
    assert c.topics[0].partitions[0].error_code == 0
    f = done(h.fetch(G, {"t": [0]}, version=version))
    parts = f.groups[0].topics[0].partitions if version >= 8 else f.topics[0].partitions
    assert parts[0].committed_offset == 7


@pytest.mark.parametrize("version", range(6))
def test_describe_list_each_version(version: int) -> None:
    h = Harness()
    done(h.commit(G, {("t", 0): 7}))
    assert done(h.describe(G, version=version, ops=version >= 3)).groups[0].group_state == "Empty"
    assert [g.group_id for g in done(h.list(version=version)).groups] == [G]


@pytest.mark.parametrize("version", range(3))
def test_delete_groups_each_version(version: int) -> None:
    h = Harness()
    done(h.commit(G, {("t", 0): 7}))
    assert done(h.delete(G, version=version)).results[0].error_code == 0


def test_offset_delete_v0() -> None:
    h = Harness()
    done(h.commit(G, {("t", 0): 7, ("t", 1): 8}))
    assert done(h.offset_delete(G, {"t": [0]})).topics[0].partitions[0].error_code == 0
