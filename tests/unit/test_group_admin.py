"""DescribeGroups / ListGroups / DeleteGroups."""
from __future__ import annotations

from test_group_helpers import E, Harness, done, stable_group

from kcoord.protocol.coordinator_records import GroupKey, OffsetKey

G = "group"


def h_() -> Harness:
    return Harness(group_initial_rebalance_delay_ms=0)


def test_describe_stable_other_states_and_missing() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2, client_id="cid")
    done(h.commit("simple", {("t", 0): 1}))
    r = done(h.describe(G, "simple", "missing", version=5, ops=True))
    stable, simple, missing = r.groups
    assert (stable.group_state, stable.protocol_type, stable.protocol_data) == ("Stable", "consumer", "range")
    assert [m.member_id for m in stable.members] == ids
    assert stable.members[0].member_assignment == ids[0].encode() and stable.members[0].member_metadata
    assert stable.members[0].client_id == "cid" and stable.members[0].client_host == "/127.0.0.1"
    assert stable.authorized_operations == {3, 6, 8}  # READ, DELETE, DESCRIBE
    assert (simple.group_state, simple.protocol_type, simple.members) == ("Empty", "", [])
    assert (missing.error_code, missing.group_state) == (0, "Dead")
    h.join(G, leader)
    pr = done(h.describe(G, version=0)).groups[0]
    assert pr.group_state == "PreparingRebalance" and pr.protocol_data == ""
    assert all(m.member_metadata == b"" and m.member_assignment == b"" for m in pr.members)
    assert done(h.describe(G, version=2)).groups[0].authorized_operations is None


def test_list_groups_with_state_and_type_filters() -> None:
    h = h_()
    stable_group(h, "a", 1)
    done(h.commit("b", {("t", 0): 1}))
    all_ = done(h.list(version=0))
    assert all_.error_code == 0 and {(g.group_id, g.protocol_type) for g in all_.groups} == {("a", "consumer"),
                                                                                           ("b", "")}
    assert [g.group_id for g in done(h.list(version=4, states=["stable"])).groups] == ["a"]
    assert [g.group_id for g in done(h.list(version=4, states=["Empty", "Dead"])).groups] == ["b"]
    assert len(done(h.list(version=5, types=["classic"])).groups) == 2
    assert done(h.list(version=5, types=["consumer"])).groups == []
    assert {g.group_type for g in done(h.list(version=5)).groups} == {"classic"}
    assert done(h.list(version=3, states=["stable"])).groups.__len__() == 2  # no filter before v4
    h.coord.begin_loading(h.coord.partition_of("zzz"))
    assert done(h.list()).error_code == E.COORDINATOR_LOAD_IN_PROGRESS


def test_delete_groups() -> None:
    h = h_()
    stable_group(h, "busy", 1)
    done(h.commit("idle", {("t", 0): 1, ("t", 1): 2}))
    n = len(h.log)
    r = done(h.delete("idle", "busy", "missing", "idle"))
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("idle", 0), ("busy", E.NON_EMPTY_GROUP), ("missing", E.GROUP_ID_NOT_FOUND)]
    assert h.coord.group("idle") is None
    written = h.log[n:]
    assert [(type(x.key), x.value) for x in written] == [(OffsetKey, None), (OffsetKey, None), (GroupKey, None)]
    assert done(h.fetch("idle", None)).topics == []
    # deleting again: gone
    assert done(h.delete("idle")).results[0].error_code == E.GROUP_ID_NOT_FOUND


def test_delete_group_append_failure_revives_it() -> None:
    h = h_()
    done(h.commit("idle", {("t", 0): 1}))
    h.fail_next = E.NOT_COORDINATOR
    assert done(h.delete("idle")).results[0].error_code == E.NOT_COORDINATOR
    assert h.state("idle") == "Empty" and h.offsets("idle") == {("t", 0): 1}


def test_delete_groups_while_loading() -> None:
    h = h_()
    h.coord.begin_loading(h.coord.partition_of("x"))
    assert done(h.delete("x")).results[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
