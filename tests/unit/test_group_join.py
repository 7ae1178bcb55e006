"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup, after Kafka's GroupCoordinatorTest."""
from __future__ import annotations

import pytest
from test_group_helpers import E, Harness, done, parked, stable_group, sub

G = "group"


def h_() -> Harness:
    return Harness(group_initial_rebalance_delay_ms=0)


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("session", [5999, 1800001])
def test_invalid_session_timeout(session: int) -> None:
    r = done(h_().join(G, session=session))
    assert r.error_code == E.INVALID_SESSION_TIMEOUT


def test_empty_group_id_is_invalid_for_membership_apis() -> None:
    h = h_()
    assert done(h.join("")).error_code == E.INVALID_GROUP_ID
    assert done(h.sync("", "m", 1)).error_code == E.INVALID_GROUP_ID
    assert done(h.heartbeat("", "m", 1)).error_code == E.INVALID_GROUP_ID
    assert done(h.leave("", ("m", None))).error_code == E.INVALID_GROUP_ID


def test_unknown_member_id_in_missing_group() -> None:
    h = h_()
    r = done(h.join(G, "not-a-member"))
    assert r.error_code == E.UNKNOWN_MEMBER_ID
    assert h.coord.group(G) is None


def test_inconsistent_protocol_type_and_no_common_protocol() -> None:
    h = h_()
    ids, gen, _ = stable_group(h, G, 1)
    assert done(h.join(G, version=3, ptype="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert done(h.join(G, version=3, protocols=[("roundrobin", b"")])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # an empty protocol list / empty type cannot start a group either
    assert done(h.join("other", version=3, protocols=[])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert done(h.join("other2", version=3, ptype="")).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_member_id_required_for_v4_dynamic_member_and_pending_expiry() -> None:
    h = h_()
    r = done(h.join(G, version=4))
    assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id.startswith("client-")
    g = h.coord.group(G)
    assert r.member_id in g.pending_members
    # the pending member times out after its session timeout
    h.advance(10000)
    assert r.member_id not in g.pending_members
    assert done(h.join(G, r.member_id, version=4)).error_code == E.UNKNOWN_MEMBER_ID


def test_v3_join_gets_member_id_directly() -> None:
    h = h_()
    p = h.join(G, version=3, client_id="cli")
    h.advance(0)
    r = done(p)
    assert r.error_code == 0 and r.member_id.startswith("cli-") and r.leader == r.member_id
    assert r.generation_id == 1 and r.protocol_name == "range"
    assert [m.member_id for m in r.members] == [r.member_id]


def test_pending_member_blocks_join_completion_until_it_joins() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 1)
    pend = done(h.join(G))  # MEMBER_ID_REQUIRED, pending
    lead = h.join(G, leader)  # leader rejoins -> rebalance; waits for the pending member
    assert parked(lead)
    new = h.join(G, pend.member_id)
    r1, r2 = done(lead), done(new)
    assert r1.generation_id == r2.generation_id == gen + 1
    assert {m.member_id for m in r1.members} == {leader, pend.member_id}


# ---------------------------------------------------------------- lifecycle


def test_join_sync_lifecycle_and_versioned_fields() -> None:
    h = h_()
    a = h.join_known(G, version=7)
    h.advance(0)
    ra = done(a)
    assert ra.protocol_type == "consumer" and ra.protocol_name == "range"
    s = done(h.sync(G, ra.member_id, ra.generation_id, {ra.member_id: b"A"}, version=5,
                    ptype="consumer", pname="range"))
    assert s.error_code == 0 and s.assignment == b"A" and s.protocol_type == "consumer"
    g = h.coord.group(G)
    assert str(g.state) == "Stable" and g.get(ra.member_id).assignment == b"A"
    # the record went through append + replay
    assert len(h.log) == 1 and h.log[0].value.members[0].assignment == b"A"


def test_sync_errors() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2)
    assert done(h.sync(G, "nobody", gen)).error_code == E.UNKNOWN_MEMBER_ID
    assert done(h.sync(G, ids[1], gen + 1)).error_code == E.ILLEGAL_GENERATION
    assert done(h.sync(G, ids[1], gen, version=5, ptype="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert done(h.sync(G, ids[1], gen, version=5, pname="rr")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert done(h.sync("missing", ids[1], gen)).error_code == E.UNKNOWN_MEMBER_ID
    # stable: sync returns the current assignment
    assert done(h.sync(G, ids[1], gen)).assignment == ids[1].encode()
    # during PreparingRebalance
    h.join(G, leader)
    assert done(h.sync(G, ids[1], gen)).error_code == E.REBALANCE_IN_PROGRESS


def test_followers_wait_for_leader_sync() -> None:
    h = h_()
    a, b = h.join(G, version=3), h.join(G, version=3)
    h.advance(0)
    ra, rb = done(a), done(b)
    leader, follower = (ra, rb) if ra.leader == ra.member_id else (rb, ra)
    assert leader.members and not follower.members  # member metadata only to the leader
    fs = h.sync(G, follower.member_id, follower.generation_id)
    assert parked(fs)
    done(h.sync(G, leader.member_id, leader.generation_id, {follower.member_id: b"F"}))
    assert done(fs).assignment == b"F"
    # the leader left out nobody... but a member missing from the assignment gets b""
    assert h.log[-1].value.members[0].assignment in (b"", b"F")


def test_unchanged_follower_rejoin_does_not_rebalance_but_leader_does() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2)
    follower = ids[1]
    r = done(h.join(G, follower))
    assert r.error_code == 0 and r.generation_id == gen and r.members == [] and r.leader == leader
    assert h.state(G) == "Stable"
    # follower with changed metadata rebalances
    p = h.join(G, follower, protocols=[("range", sub("t", "u"))])
    assert parked(p) and h.state(G) == "PreparingRebalance"
    q = h.join(G, leader)
    assert done(q).generation_id == gen + 1 and done(p).generation_id == gen + 1


def test_leader_rejoin_rebalances() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2)
    p = h.join(G, leader)
    assert parked(p) and h.state(G) == "PreparingRebalance"
    # the follower learns through its heartbeat
    assert done(h.heartbeat(G, ids[1], gen)).error_code == E.REBALANCE_IN_PROGRESS
    q = h.join(G, ids[1])
    assert done(p).generation_id == done(q).generation_id == gen + 1


def test_rejoin_in_completing_rebalance_with_same_metadata_gets_current_generation() -> None:
    h = h_()
    a, _b = h.join(G, version=3), h.join(G, version=3)
    h.advance(0)
    ra = done(a)
    again = done(h.join(G, ra.member_id, version=3))
    assert again.generation_id == ra.generation_id
    assert bool(again.members) == (ra.leader == ra.member_id)
    assert h.state(G) == "CompletingRebalance"


def test_rebalance_timeout_evicts_members_that_do_not_rejoin() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 3, rebalance=20000, session=30000)
    p = h.join(G, leader, rebalance=20000, session=30000)
    h.heartbeat(G, ids[1], gen)
    q = h.join(G, ids[1], rebalance=20000, session=30000)
    assert parked(p) and parked(q)
    h.advance(20000)
    rp, _rq = done(p), done(q)
    assert rp.generation_id == gen + 1
    assert {m.member_id for m in rp.members} == {leader, ids[1]}
    assert not h.coord.group(G).has(ids[2])


def test_leader_not_rejoining_hands_leadership_to_a_joined_member() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2, rebalance=20000, session=30000)
    q = h.join(G, ids[1], protocols=[("range", sub("x"))], rebalance=20000, session=30000)
    h.advance(20000)
    r = done(q)
    assert r.leader == ids[1] and r.members


def test_session_expiry_removes_member_and_rebalances() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2, session=10000)
    h.advance(5000)
    assert done(h.heartbeat(G, leader, gen)).error_code == 0
    h.advance(5000)
    # ids[1] never heartbeats: expired -> rebalance
    assert done(h.heartbeat(G, leader, gen)).error_code == E.REBALANCE_IN_PROGRESS
    assert h.state(G) == "PreparingRebalance"
    assert not h.coord.group(G).has(ids[1])
    p = h.join(G, leader, session=10000)
    r = done(p)
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [leader]


def test_session_expiry_during_rebalance_completes_the_join() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2, session=10000, rebalance=60000)
    p = h.join(G, leader, session=10000, rebalance=60000)  # leader waits for ids[1]
    h.advance(10000)  # ids[1]'s session runs out before the rebalance timeout
    r = done(p)
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [leader]


def test_last_member_expiring_empties_group_and_writes_record() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 1, session=10000)
    h.advance(10000)  # expired -> PreparingRebalance -> join completes with nobody -> Empty
    assert h.state(G) == "Empty"
    g = h.coord.group(G)
    assert g.generation_id == gen + 1
    last = h.log[-1].value
    assert last.generation == gen + 1 and last.members == [] and last.protocol is None


def test_new_member_join_timeout() -> None:
    h = h_()
    kw = dict(session=10000, rebalance=600000)
    ids, gen, leader = stable_group(h, G, 2, **kw)
    p = h.join(G, leader, **kw)  # waits for ids[1], which keeps heartbeating but never rejoins
    n = h.join(G, version=3, **kw)
    for _ in range(60):
        h.advance(5000)
        h.heartbeat(G, ids[1], gen)
    # a new member parked for 5 minutes is dropped and told to retry
    r = done(n)
    assert r.error_code == E.UNKNOWN_MEMBER_ID and r.member_id == ""
    assert parked(p)


def test_sync_timeout_removes_members_that_never_sync() -> None:
    h = h_()
    kw = dict(version=3, rebalance=20000, session=30000)
    a, b = h.join(G, **kw), h.join(G, **kw)
    h.advance(0)
    ra, rb = done(a), done(b)
    leader = ra if ra.leader == ra.member_id else rb
    follower = rb if leader is ra else ra
    done(h.sync(G, leader.member_id, leader.generation_id, {}))
    assert h.state(G) == "Stable"
    h.heartbeat(G, leader.member_id, leader.generation_id)
    h.advance(10000)
    h.heartbeat(G, leader.member_id, leader.generation_id)
    h.advance(10000)  # rebalance timeout: the follower never synced
    g = h.coord.group(G)
    assert not g.has(follower.member_id)
    assert h.state(G) == "PreparingRebalance"


def test_leader_failing_during_sync() -> None:
    h = h_()
    a, b = h.join(G, version=3, session=10000), h.join(G, version=3, session=10000)
    h.advance(0)
    ra, rb = done(a), done(b)
    leader = ra if ra.leader == ra.member_id else rb
    follower = rb if leader is ra else ra
    fs = h.sync(G, follower.member_id, follower.generation_id)
    assert parked(fs)
    h.advance(10000)  # the leader's session expires before it syncs
    assert done(fs).error_code == E.REBALANCE_IN_PROGRESS
    assert not h.coord.group(G).has(leader.member_id)


def test_leader_sync_append_failure_propagates_error_and_rebalances() -> None:
    h = h_()
    a, b = h.join(G, version=3), h.join(G, version=3)
    h.advance(0)
    ra, rb = done(a), done(b)
    leader = ra if ra.leader == ra.member_id else rb
    follower = rb if leader is ra else ra
    fs = h.sync(G, follower.member_id, follower.generation_id)
    h.fail_next = E.NOT_COORDINATOR
    ls = done(h.sync(G, leader.member_id, leader.generation_id, {}))
    assert ls.error_code == E.NOT_COORDINATOR and done(fs).error_code == E.NOT_COORDINATOR
    assert h.state(G) == "PreparingRebalance"


def test_initial_delay_rearmed_and_capped_by_rebalance_timeout() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    first = h.join(G, version=3, rebalance=10000)
    h.advance(2999)
    second = h.join(G, version=3, rebalance=10000)  # re-arms
    h.advance(1)
    assert parked(first)  # 3000 elapsed but a member arrived: another 3000
    h.advance(2999)
    third = h.join(G, version=3, rebalance=10000)
    h.advance(1)
    assert parked(first)
    # keep adding: the cap (rebalance timeout 10000) ends it regardless
    for _ in range(10):
        h.join(G, version=3, rebalance=10000)
        h.advance(1000)
        if not parked(first):
            break
    assert not parked(first)
    assert h.clock.now_ms() - 1_700_000_000_000 <= 10000 + 1000
    assert done(first).generation_id == 1 and done(second).error_code == 0 and done(third).error_code == 0


def test_initial_delay_completes_after_delay_with_single_member() -> None:
    h = Harness(group_initial_rebalance_delay_ms=3000)
    p = h.join(G, version=3)
    h.advance(2999)
    assert parked(p)
    h.advance(1)
    assert done(p).generation_id == 1


# ---------------------------------------------------------------- heartbeats in every state


def test_heartbeat_in_every_state() -> None:
    h = h_()
    assert done(h.heartbeat(G, "m", 1)).error_code == E.UNKNOWN_MEMBER_ID  # no group
    done(h.commit(G, {("t", 0): 1}))  # Empty group
    assert done(h.heartbeat(G, "m", 0)).error_code == E.UNKNOWN_MEMBER_ID
    a = h.join(G, version=3)
    h.advance(0)
    ra = done(a)
    m, gen = ra.member_id, ra.generation_id
    assert h.state(G) == "CompletingRebalance"
    assert done(h.heartbeat(G, m, gen)).error_code == 0
    assert done(h.heartbeat(G, m, gen + 1)).error_code == E.ILLEGAL_GENERATION
    assert done(h.heartbeat(G, "other", gen)).error_code == E.UNKNOWN_MEMBER_ID
    done(h.sync(G, m, gen, {m: b""}))
    assert done(h.heartbeat(G, m, gen)).error_code == 0  # Stable
    h.join(G, m)  # leader rejoin -> PreparingRebalance (completes immediately: only member)
    assert h.state(G) == "CompletingRebalance"
    assert done(h.heartbeat(G, m, gen)).error_code == E.ILLEGAL_GENERATION
    # Dead (deleted) groups
    h2 = h_()
    done(h2.commit(G, {("t", 0): 1}))
    h2.hold = True
    h2.delete(G)
    assert done(h2.heartbeat(G, "m", 0)).error_code == E.COORDINATOR_NOT_AVAILABLE


def test_heartbeat_in_preparing_rebalance() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2)
    h.join(G, leader)
    assert done(h.heartbeat(G, ids[1], gen)).error_code == E.REBALANCE_IN_PROGRESS


def test_heartbeat_while_loading_is_answered_blindly() -> None:
    h = h_()
    h.coord.begin_loading(h.coord.partition_of(G))
    assert done(h.heartbeat(G, "m", 1)).error_code == 0
    assert done(h.sync(G, "m", 1)).error_code == E.REBALANCE_IN_PROGRESS
    assert done(h.join(G)).error_code == E.COORDINATOR_LOAD_IN_PROGRESS


# ---------------------------------------------------------------- static members (KIP-345)


def static_group(h: Harness, n: int, version: int = 5, **kw: int) -> tuple[list[str], int, str]:
    pending = [h.join(G, version=version, instance=f"i{i}", **kw) for i in range(n)]
    h.advance(0)
    resps = [done(p) for p in pending]
    gen, leader = resps[0].generation_id, resps[0].leader
    ids = [r.member_id for r in resps]
    for m in ids:
        done(h.sync(G, m, gen, {x: x.encode() for x in ids} if m == leader else None, instance=f"i{ids.index(m)}"))
    return ids, gen, leader


def test_static_member_ids_and_fencing() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 2)
    assert ids[0].startswith("i0-")
    # an old member id with the instance id is fenced
    assert done(h.heartbeat(G, "i1-old", gen, instance="i1")).error_code == E.FENCED_INSTANCE_ID
    assert done(h.sync(G, "i1-old", gen, instance="i1")).error_code == E.FENCED_INSTANCE_ID
    assert done(h.commit(G, {("t", 0): 1}, member_id="i1-old", generation=gen, instance="i1")).topics[0] \
        .partitions[0].error_code == E.FENCED_INSTANCE_ID
    assert done(h.heartbeat(G, ids[1], gen, instance="unknown")).error_code == E.UNKNOWN_MEMBER_ID


def test_static_follower_restart_with_same_metadata_does_not_rebalance() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 2)
    r = done(h.join(G, version=5, instance="i1"))  # unknown member id, known instance
    assert r.error_code == 0 and r.member_id != ids[1] and r.generation_id == gen
    assert r.leader == leader and r.members == []
    assert h.state(G) == "Stable"
    g = h.coord.group(G)
    assert g.current_static_member_id("i1") == r.member_id and not g.has(ids[1])
    # the new id was persisted; the old one is fenced
    assert h.log[-1].value.members[1].member_id == r.member_id
    assert done(h.heartbeat(G, ids[1], gen, instance="i1")).error_code == E.FENCED_INSTANCE_ID
    assert done(h.sync(G, r.member_id, gen, instance="i1")).assignment == ids[1].encode()


def test_static_leader_restart_v9_skip_assignment() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 2, version=9)
    r = done(h.join(G, version=9, instance="i0"))
    assert r.error_code == 0 and r.skip_assignment and r.leader == r.member_id
    assert {m.member_id for m in r.members} == {r.member_id, ids[1]}
    assert h.state(G) == "Stable"


def test_static_leader_restart_before_v9_hides_leadership() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 2, version=5)
    r = done(h.join(G, version=5, instance="i0"))
    assert r.error_code == 0 and r.leader == ids[0] != r.member_id and r.members == []
    assert h.coord.group(G).leader_id == r.member_id


def test_static_member_restart_with_protocol_change_rebalances() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 1)
    p = h.join(G, version=5, instance="i0", protocols=[("roundrobin", b""), ("range", sub("t"))])
    # a single member: the vote moves to roundrobin -> rebalance; it completes right away
    r = done(p)
    assert r.generation_id == gen + 1 and r.protocol_name == "roundrobin"


def test_static_member_replacement_fences_parked_join() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 2)
    p = h.join(G, ids[1], version=5, instance="i1", protocols=[("range", sub("new"))])  # parks (rebalance)
    assert parked(p)
    q = h.join(G, version=5, instance="i1", protocols=[("range", sub("new"))])
    assert done(p).error_code == E.FENCED_INSTANCE_ID
    assert parked(q)


def test_static_member_in_completing_rebalance_triggers_rebalance() -> None:
    h = h_()
    _a, _b = h.join(G, version=5, instance="a"), h.join(G, version=5, instance="b")
    h.advance(0)
    assert h.state(G) == "CompletingRebalance"
    h.join(G, version=5, instance="b")
    assert h.state(G) == "PreparingRebalance"


def test_static_replacement_append_failure_reverts() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 2)
    h.fail_next = E.NOT_COORDINATOR
    r = done(h.join(G, version=5, instance="i1"))
    assert r.error_code == E.NOT_COORDINATOR and r.member_id == ""
    g = h.coord.group(G)
    assert g.current_static_member_id("i1") == ids[1] and g.has(ids[1])


def test_static_members_survive_missed_rebalance() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 2, session=60000, rebalance=30000)
    p = h.join(G, ids[0], version=5, instance="i0", session=60000, rebalance=30000)
    h.advance(30000)  # i1 does not rejoin but is static: kept
    r = done(p)
    assert {m.member_id for m in r.members} == set(ids)


def test_unknown_static_member_joins_as_new() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 1)
    p = h.join(G, version=5, instance="new")
    assert parked(p) and h.state(G) == "PreparingRebalance"


# ---------------------------------------------------------------- leave


def test_leave_v0_and_errors() -> None:
    h = h_()
    assert done(h.leave(G, ("m", None), version=0)).error_code == E.UNKNOWN_MEMBER_ID
    ids, gen, leader = stable_group(h, G, 2)
    assert done(h.leave(G, ("nobody", None), version=1)).error_code == E.UNKNOWN_MEMBER_ID
    assert done(h.leave(G, (ids[1], None), version=2)).error_code == 0
    assert h.state(G) == "PreparingRebalance"


def test_batched_leave_by_member_and_instance_id() -> None:
    h = h_()
    ids, gen, leader = static_group(h, 3)
    r = done(h.leave(G, ("", "i0"), (ids[1], "i1"), ("", "nope"), ("x", "i2"), version=3))
    assert r.error_code == 0
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        ("", "i0", 0), (ids[1], "i1", 0), ("", "nope", E.UNKNOWN_MEMBER_ID), ("x", "i2", E.FENCED_INSTANCE_ID)]
    g = h.coord.group(G)
    assert list(g.members) == [ids[2]]


def test_leave_pending_member() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 1)
    pend = done(h.join(G)).member_id
    r = done(h.leave(G, (pend, None)))
    assert r.members[0].error_code == 0
    assert pend not in h.coord.group(G).pending_members


def test_last_member_leaving_empties_group() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 1)
    done(h.leave(G, (leader, None)))
    assert h.state(G) == "Empty"
    assert h.log[-1].value.generation == gen + 1


def test_leave_during_rebalance_completes_join() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2)
    p = h.join(G, leader)
    done(h.leave(G, (ids[1], None)))
    assert done(p).generation_id == gen + 1


# ---------------------------------------------------------------- group.max.size


def test_group_max_size() -> None:
    h = Harness(group_initial_rebalance_delay_ms=0, group_max_size=2)
    a, b = h.join(G, version=3), h.join(G, version=3)
    c = done(h.join(G, version=3))
    assert c.error_code == E.GROUP_MAX_SIZE_REACHED and c.member_id == ""
    h.advance(0)
    assert done(a).error_code == 0 and done(b).error_code == 0
    # Stable/CompletingRebalance: known members still accepted, new ones rejected
    assert done(h.join(G, version=3)).error_code == E.GROUP_MAX_SIZE_REACHED


def test_join_to_dead_group() -> None:
    h = h_()
    done(h.commit(G, {("t", 0): 1}))
    h.hold = True
    h.delete(G)
    assert done(h.join(G, version=3)).error_code == E.COORDINATOR_NOT_AVAILABLE


def test_empty_group_rejects_known_member() -> None:
    h = h_()
    done(h.commit(G, {("t", 0): 1}))
    assert done(h.join(G, "ghost", version=3)).error_code == E.UNKNOWN_MEMBER_ID


def test_protocol_vote() -> None:
    h = h_()
    a = h.join(G, version=3, protocols=[("range", b""), ("roundrobin", b"")])
    b = h.join(G, version=3, protocols=[("roundrobin", b""), ("range", b"")])
    c = h.join(G, version=3, protocols=[("roundrobin", b""), ("range", b"")])
    h.advance(0)
    assert done(a).protocol_name == "roundrobin"
    assert done(b).protocol_name == done(c).protocol_name == "roundrobin"


def test_join_response_v0_to_v6_protocol_name_not_null_on_error() -> None:
    h = h_()
    r = done(h.join(G, session=1, version=0))
    assert r.error_code == E.INVALID_SESSION_TIMEOUT
    assert bytes(r.encode())  # protocol_name "" (not null) in v0


def test_v0_join_uses_session_timeout_as_rebalance_timeout() -> None:
    h = h_()
    p = h.join(G, version=0, session=7000)
    h.advance(0)
    m = done(p).member_id
    assert h.coord.group(G).get(m).rebalance_timeout_ms == 7000


def test_background_writes_queue_until_a_writer_is_set() -> None:
    from kcoord.server.clock import FakeClock
    from kcoord.server.group.config import GroupConfig
    from kcoord.server.group.coordinator import GroupCoordinator

    h = h_()
    ids, gen, leader = stable_group(h, G, 1, session=10000)
    # a coordinator without a writer: the Empty-group record waits in drain_background()
    coord = GroupCoordinator(GroupConfig(group_initial_rebalance_delay_ms=0), FakeClock())
    for r in h.log:
        coord.replay(r)
    coord.clock.advance(10000)  # the loaded member's session expires -> Empty
    queued = coord.drain_background()
    assert len(queued) == 1 and queued[0].records[0].value.generation == gen + 1
    assert coord.drain_background() == []
