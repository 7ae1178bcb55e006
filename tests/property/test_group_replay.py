"""Property: whatever commits, rebalances, leaves, session expiries, deletes, offset deletes,
expirations and failed appends happen, replaying the records that were appended into a fresh
coordinator (begin_loading / replay / end_loading) yields the same groups and offsets as the
live coordinator."""
from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "unit"))

from test_group_helpers import E, Harness, done, stable_group, sub  # noqa: E402

from kcoord.server.clock import FakeClock  # noqa: E402
from kcoord.server.group.classic.state import GroupState  # noqa: E402
from kcoord.server.group.coordinator import GroupCoordinator  # noqa: E402

GROUPS = ["g0", "g1", "g2"]
TOPICS = ["t0", "t1"]
KW = dict(session=10000, rebalance=30000)


def snapshot(coord: GroupCoordinator) -> dict:
    out = {}
    for g in coord.groups():
        if g.state is GroupState.DEAD:
            continue
        offsets = sorted(
            (t, p, v.offset, v.metadata, v.commit_timestamp, v.leader_epoch, v.expire_timestamp)
            for t, p, v in coord.committed_offsets(g.group_id)
        )
        if g.state is GroupState.EMPTY and g.generation_id == 0 and not offsets:
            continue  # created in memory by a request, never written (Kafka expires these too)
        assert g.state in (GroupState.EMPTY, GroupState.STABLE), g
        members = [
            (mid, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
             m.session_timeout_ms, m.metadata(g.protocol_name) if g.protocol_name else b"", m.assignment)
            for mid, m in g.members.items()
        ]
        ts = g.current_state_timestamp if g.state is GroupState.EMPTY and g.protocol_type else None
        out[g.group_id] = (str(g.state), g.generation_id, g.protocol_type, g.protocol_name, g.leader_id,
                           members, ts, offsets)
    return out


def reload(h: Harness) -> GroupCoordinator:
    fresh = GroupCoordinator(h.config, FakeClock(h.clock.now_ms() + 12345), h.coord.num_partitions)
    for p in range(fresh.num_partitions):
        fresh.begin_loading(p)
    for r in h.log:
        fresh.replay(r)
    for p in range(fresh.num_partitions):
        fresh.end_loading(p)
    return fresh


def heartbeat_all(h: Harness) -> None:
    for g in h.coord.groups():
        if g.state is GroupState.STABLE:
            for mid, m in list(g.members.items()):
                h.heartbeat(g.group_id, mid, g.generation_id, instance=m.group_instance_id)


group = st.sampled_from(GROUPS)
offsets = st.dictionaries(st.tuples(st.sampled_from(TOPICS), st.integers(0, 2)), st.integers(0, 1000),
                          min_size=1, max_size=4)
op = st.one_of(
    st.tuples(st.just("commit"), group, offsets, st.booleans()),
    st.tuples(st.just("form"), group, st.integers(1, 3), st.booleans()),
    st.tuples(st.just("rebalance"), group),
    st.tuples(st.just("leave_all"), group),
    st.tuples(st.just("static_restart"), group, st.booleans()),
    st.tuples(st.just("expire_sessions"),),
    st.tuples(st.just("delete"), group, st.booleans()),
    st.tuples(st.just("offset_delete"), group, st.sampled_from(TOPICS), st.booleans()),
    st.tuples(st.just("age"), st.integers(1, 4), st.booleans()),
)


def apply(h: Harness, action: tuple) -> None:
    kind = action[0]
    if kind == "commit":
        _, gid, offs, fail = action
        g = h.coord.group(gid)
        if fail:
            h.fail_next = E.NOT_ENOUGH_REPLICAS
        if g is not None and g.state is GroupState.STABLE:
            leader = g.leader_id
            h.commit(gid, dict(offs), member_id=leader, generation=g.generation_id,
                     instance=g.members[leader].group_instance_id, metadata="m")
        else:
            h.commit(gid, dict(offs), version=2 if fail else 8, retention=50_000 if fail else -1)
        h.fail_next = None
    elif kind == "form":
        _, gid, n, static = action
        g = h.coord.group(gid)
        if g is None or (g.state is GroupState.EMPTY and not g.members):
            if static:
                pending = [h.join(gid, version=5, instance=f"{gid}-i{i}", **KW) for i in range(n)]
                h.advance(0)
                resps = [done(p) for p in pending]
                ids = [r.member_id for r in resps]
                for r in resps:
                    done(h.sync(gid, r.member_id, r.generation_id,
                                {m: m.encode() for m in ids} if r.leader == r.member_id else None,
                                instance=h.coord.group(gid).members[r.member_id].group_instance_id))
            else:
                stable_group(h, gid, n, protocols=[("range", sub("t0"))], **KW)
    elif kind == "rebalance":
        _, gid = action
        g = h.coord.group(gid)
        if g is not None and g.state is GroupState.STABLE:
            members = [(mid, m.group_instance_id) for mid, m in g.members.items()]
            joins = [h.join(gid, mid, version=5, instance=inst, protocols=[("range", sub("t0", "t1"))], **KW)
                     for mid, inst in members]
            resps = [done(j) for j in joins]
            ids = [r.member_id for r in resps]
            for r, (_, inst) in zip(resps, members, strict=True):
                done(h.sync(gid, r.member_id, r.generation_id,
                            {m: b"R" + m.encode() for m in ids} if r.leader == r.member_id else None,
                            instance=inst))
    elif kind == "leave_all":
        _, gid = action
        g = h.coord.group(gid)
        if g is not None and g.state is GroupState.STABLE:
            h.leave(gid, *[(mid, m.group_instance_id) for mid, m in g.members.items()])
    elif kind == "static_restart":
        _, gid, fail = action
        g = h.coord.group(gid)
        if g is not None and g.state is GroupState.STABLE and g.static_members:
            inst = sorted(g.static_members)[0]
            if fail:
                h.fail_next = E.NOT_LEADER_OR_FOLLOWER
            done(h.join(gid, version=9, instance=inst, protocols=[("range", sub("t0"))], **KW))
            h.fail_next = None
    elif kind == "expire_sessions":
        h.advance(KW["session"])
        h.advance(KW["rebalance"])  # static members only leave through their session
    elif kind == "delete":
        _, gid, fail = action
        if fail:
            h.fail_next = E.NOT_COORDINATOR
        h.delete(gid)
        h.fail_next = None
    elif kind == "offset_delete":
        _, gid, topic, fail = action
        if fail:
            h.fail_next = E.NOT_COORDINATOR
        h.offset_delete(gid, {topic: [0, 1, 2]})
        h.fail_next = None
    elif kind == "age":
        _, steps, fail = action
        for _ in range(steps):
            h.advance(5000)
            heartbeat_all(h)
        if fail:
            h.fail_next = E.NOT_COORDINATOR
        h.run(h.coord.expire_offsets())
        h.fail_next = None


@settings(max_examples=int(os.environ.get("KCOORD_PROPERTY_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=25))
def test_replaying_the_log_rebuilds_the_live_state(actions: list[tuple]) -> None:
    h = Harness(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=1)
    for action in actions:
        apply(h, action)
        live = snapshot(h.coord)
        assert snapshot(reload(h)) == live, action
