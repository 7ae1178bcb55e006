"""Property (KIP-932, the share group coordinator): whatever members join, heartbeat (with their
epoch, a stale one, or a subscription change), leave, expire, fail to append, and topics grow,

- the records written, encoded and decoded, replayed into a fresh coordinator give exactly the
  live groups (epochs, members, targets, initialized share partitions);
- every member's assignment is a subset of its subscribed topics' partitions, and while all
  members are reconciled to the assignment epoch of the topics as they are, every subscribed
  partition is assigned to someone."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_group_helpers import FakeTopics  # noqa: E402
from test_share_group_coordinator import Harness  # noqa: E402

from kcoord.protocol.coordinator_codec import decode_record, encode_key, encode_value  # noqa: E402
from kcoord.protocol.errors import ErrorCode  # noqa: E402
from kcoord.server.group.coordinator import GroupCoordinator  # noqa: E402

GROUPS = ["g1", "g2"]
MEMBERS = ["m0", "m1", "m2", "m3"]
SUBS = [("a",), ("b",), ("a", "b")]

op = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(GROUPS), st.sampled_from(MEMBERS), st.sampled_from(SUBS)),
    st.tuples(st.just("beat"), st.sampled_from(GROUPS), st.sampled_from(MEMBERS), st.integers(-1, 1)),
    st.tuples(st.just("resubscribe"), st.sampled_from(GROUPS), st.sampled_from(MEMBERS), st.sampled_from(SUBS)),
    st.tuples(st.just("leave"), st.sampled_from(GROUPS), st.sampled_from(MEMBERS)),
    st.tuples(st.just("time"), st.integers(1000, 50000)),
    st.tuples(st.just("fail_next"),),
    st.tuples(st.just("grow"), st.sampled_from(["a", "b"])),
)


def picture(coord: GroupCoordinator) -> dict[str, Any]:
    out = {}
    for g in coord.groups():
        if g.TYPE != "share":
            continue
        out[g.group_id] = (g.group_epoch, g.assignment_epoch, dict(g.members), dict(g.target_assignment),
                           dict(g.initialized), g.state_name())
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=40))
def test_replay_equals_live_state_and_assignments_cover_the_topics(ops) -> None:
    topics = FakeTopics(a=2, b=3)
    h = Harness(topics)
    for o in ops:
        kind = o[0]
        if kind == "join":
            h.hb(o[2], 0, list(o[3]), group=o[1])
        elif kind in ("beat", "resubscribe"):
            g = h.coord.group(o[1])
            m = g.members.get(o[2]) if g is not None else None
            epoch = (m.member_epoch if m is not None else 1) + (o[3] if kind == "beat" else 0)
            r = h.hb(o[2], max(epoch, 1), list(o[3]) if kind == "resubscribe" else None, group=o[1])
            if m is not None and kind == "beat" and o[3] == 0:
                assert r.error_code in (0, ErrorCode.NOT_COORDINATOR), r
        elif kind == "leave":
            h.hb(o[2], -1, group=o[1])
        elif kind == "time":
            h.advance(o[1])
        elif kind == "fail_next":
            h.fail_next = ErrorCode.NOT_COORDINATOR
        elif kind == "grow":
            topics.create(o[1], topics.by_name[o[1]].num_partitions + 1)
        check_assignments(h)
    h.fail_next = None
    live = picture(h.coord)
    fresh = GroupCoordinator(h.config, h.clock, 50)
    fresh.set_topics(topics)
    parts = {fresh.partition_of(g) for g in GROUPS}
    for p in parts:
        fresh.begin_loading(p)
    for r in h.log:
        fresh.replay(decode_record(encode_key(r.key), encode_value(r.value)))
    for p in parts:
        fresh.end_loading(p)
    assert picture(fresh) == live


def check_assignments(h: Harness) -> None:
    topics = h.topics
    for g in h.coord.groups():
        if g.TYPE != "share":
            continue
        for m in g.members.values():
            allowed = {(topics.by_name[n].topic_id, p) for n in m.subscribed_topic_names
                       for p in range(topics.by_name[n].num_partitions)}
            assert m.partitions() <= allowed or m.member_epoch != g.assignment_epoch, (g, m)
        # once the group has seen the topics as they are (a topic that grew is seen at the next
        # heartbeat) and every member took the current target, everything subscribed is assigned
        if g.members and all(m.member_epoch == g.assignment_epoch for m in g.members.values()) \
                and g.assignment_epoch == g.group_epoch and h.coord.share._metadata(g) == g.subscription_metadata:
            wanted = {(topics.by_name[n].topic_id, p) for m in g.members.values() for n in m.subscribed_topic_names
                      for p in range(topics.by_name[n].num_partitions)}
            got = set().union(*(m.partitions() for m in g.members.values()))
            assert got == wanted, (g, got, wanted)
