"""OffsetCommit / OffsetFetch / OffsetDelete, retention (KIP-211) and loading, after Kafka's
GroupCoordinatorTest and GroupMetadataManagerTest."""
from __future__ import annotations

import logging

from test_group_helpers import E, Harness, done, stable_group, sub

from kcoord.protocol.coordinator_records import (
    CoordinatorRecord,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
)

G = "group"
DAY = 24 * 3600 * 1000


def errors(resp) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def h_(**kw) -> Harness:
    return Harness(group_initial_rebalance_delay_ms=0, **kw)


# ---------------------------------------------------------------- commit


def test_standalone_commit_creates_empty_group_and_fetch_reads_it() -> None:
    h = h_()
    r = done(h.commit(G, {("t", 0): 5, ("t", 1): 6, ("u", 0): 7}, metadata="m"))
    assert set(errors(r).values()) == {0}
    assert h.state(G) == "Empty" and h.coord.group(G).protocol_type is None
    f = done(h.fetch(G, {"t": [0, 1, 2]}, version=5))
    rows = {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code) for t in f.topics
            for p in t.partitions}
    assert rows == {("t", 0): (5, "m", 0), ("t", 1): (6, "m", 0), ("t", 2): (-1, "", 0)}
    assert h.offsets(G) == {("t", 0): 5, ("t", 1): 6, ("u", 0): 7}
    assert [r.value.offset for r in h.log] == [5, 6, 7]


def test_commit_with_generation_to_missing_group_is_illegal_generation() -> None:
    h = h_()
    r = done(h.commit(G, {("t", 0): 1}, member_id="m", generation=1))
    assert errors(r) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.coord.group(G) is None


def test_member_commit_rules() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 2)
    ok = done(h.commit(G, {("t", 0): 1}, member_id=ids[1], generation=gen))
    assert errors(ok) == {("t", 0): 0}
    assert errors(done(h.commit(G, {("t", 0): 1}, member_id="x", generation=gen)))[("t", 0)] == E.UNKNOWN_MEMBER_ID
    assert errors(done(h.commit(G, {("t", 0): 1}, member_id=ids[1], generation=gen + 1)))[("t", 0)] == \
        E.ILLEGAL_GENERATION
    # a standalone commit into a group with members
    assert errors(done(h.commit(G, {("t", 0): 1})))[("t", 0)] == E.UNKNOWN_MEMBER_ID
    # during PreparingRebalance a member of the current generation may still commit
    h.join(G, leader)
    assert errors(done(h.commit(G, {("t", 0): 2}, member_id=ids[1], generation=gen)))[("t", 0)] == 0


def test_commit_in_completing_rebalance_is_rebalance_in_progress() -> None:
    h = h_()
    a = h.join(G, version=3)
    h.advance(0)
    ra = done(a)
    r = done(h.commit(G, {("t", 0): 1}, member_id=ra.member_id, generation=ra.generation_id))
    assert errors(r)[("t", 0)] == E.REBALANCE_IN_PROGRESS


def test_commit_counts_as_heartbeat() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 1, session=10000)
    for _ in range(5):
        h.advance(6000)
        done(h.commit(G, {("t", 0): 1}, member_id=leader, generation=gen))
    assert h.state(G) == "Stable"


def test_commit_to_empty_group_with_generation_minus_one_and_member_id() -> None:
    h = h_()
    done(h.commit(G, {("t", 0): 1}))
    r = done(h.commit(G, {("t", 0): 2}, member_id="whoever", generation=-1))
    assert errors(r)[("t", 0)] == 0


def test_offset_metadata_too_large_per_partition() -> None:
    h = h_(offset_metadata_max_bytes=4)
    r = done(h.commit(G, {("t", 0): 1}, metadata="12345"))
    assert errors(r) == {("t", 0): E.OFFSET_METADATA_TOO_LARGE}
    assert h.log == []
    # mixed: the valid partitions are stored
    h2 = h_(offset_metadata_max_bytes=4)
    done(h2.commit(G, {("t", 0): 1}, metadata="1234"))
    assert h2.offsets(G) == {("t", 0): 1}


def test_commit_versions_v1_timestamp_v2_retention_v6_epoch() -> None:
    h = h_()
    done(h.commit(G, {("t", 0): 1}, version=1, commit_ts=123))
    assert h.log[-1].value.commit_timestamp == 123 and h.log[-1].value.expire_timestamp is None
    now = h.clock.now_ms()
    done(h.commit(G, {("t", 1): 1}, version=2, retention=1000))
    assert h.log[-1].value.expire_timestamp == now + 1000 and h.log[-1].value.commit_timestamp == now
    done(h.commit(G, {("t", 2): 1}, version=5, retention=1000))  # ignored from v5
    assert h.log[-1].value.expire_timestamp is None
    done(h.commit(G, {("t", 3): 9}, version=7, epoch=4))
    assert h.log[-1].value.leader_epoch == 4
    f = done(h.fetch(G, {"t": [3]}, version=6))
    assert f.topics[0].partitions[0].committed_leader_epoch == 4


def test_commit_v0_and_fetch_v0_v1() -> None:
    h = h_()
    done(h.commit(G, {("t", 0): 3}, version=0))
    f0 = done(h.fetch(G, {"t": [0, 1]}, version=0))
    rows = {p.partition_index: (p.committed_offset, p.error_code) for p in f0.topics[0].partitions}
    assert rows == {0: (3, 0), 1: (-1, E.UNKNOWN_TOPIC_OR_PARTITION)}
    f1 = done(h.fetch(G, {"t": [1]}, version=1))
    assert f1.topics[0].partitions[0].error_code == 0


def test_append_failure_maps_error_and_clears_pending() -> None:
    h = h_()
    h.fail_next = E.COORDINATOR_NOT_AVAILABLE
    r = done(h.commit(G, {("t", 0): 1}))
    assert errors(r) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE}
    assert not h.coord.offset_manager.pending(G) and h.offsets(G) == {}


# ---------------------------------------------------------------- fetch


def test_fetch_all_and_missing_group_and_multi_group_v8() -> None:
    h = h_()
    done(h.commit("a", {("t", 0): 1}))
    done(h.commit("b", {("u", 1): 2}))
    f = done(h.fetch("a", None, version=2))
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in f.topics] == [("t", [1])]
    missing = done(h.fetch("nope", {"t": [0]}, version=3))
    assert missing.error_code == 0 and missing.topics[0].partitions[0].committed_offset == -1
    assert done(h.fetch("nope", None, version=3)).topics == []
    from kafka.protocol.consumer import OffsetFetchRequest
    Grp = OffsetFetchRequest.OffsetFetchRequestGroup
    req = OffsetFetchRequest(version=8, require_stable=False, groups=[
        Grp(group_id="a", topics=None), Grp(group_id="b", topics=[Grp.OffsetFetchRequestTopics(name="u",
                                                                                             partition_indexes=[1])])])
    r = done(h.run(h.coord.offset_fetch(req, 8)))
    assert [(g.group_id, g.topics[0].partitions[0].committed_offset) for g in r.groups] == [("a", 1), ("b", 2)]


def test_fetch_require_stable_reports_pending_commits() -> None:
    h = h_()
    done(h.commit(G, {("t", 0): 1}))
    h.hold = True
    h.commit(G, {("t", 0): 2})
    f = done(h.fetch(G, {"t": [0]}, version=7, require_stable=True))
    assert f.topics[0].partitions[0].error_code == E.UNSTABLE_OFFSET_COMMIT
    f = done(h.fetch(G, {"t": [0]}, version=7, require_stable=False))
    assert f.topics[0].partitions[0].committed_offset == 1
    f = done(h.fetch(G, {"t": [0]}, version=9, require_stable=True))
    assert f.groups[0].topics[0].partitions[0].error_code == E.UNSTABLE_OFFSET_COMMIT
    h.release()
    f = done(h.fetch(G, {"t": [0]}, version=7, require_stable=True))
    assert f.topics[0].partitions[0].committed_offset == 2 and f.topics[0].partitions[0].error_code == 0


def test_fetch_during_load_v1_puts_error_in_partitions() -> None:
    h = h_()
    h.coord.begin_loading(h.coord.partition_of(G))
    f1 = done(h.fetch(G, {"t": [0]}, version=1))
    assert f1.topics[0].partitions[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    f3 = done(h.fetch(G, {"t": [0]}, version=3))
    assert f3.error_code == E.COORDINATOR_LOAD_IN_PROGRESS


# ---------------------------------------------------------------- delete


def test_offset_delete_rules() -> None:
    h = h_()
    assert done(h.offset_delete("nope", {"t": [0]})).error_code == E.GROUP_ID_NOT_FOUND
    ids, gen, leader = stable_group(h, G, 1, protocols=[("range", sub("t"))])
    done(h.commit(G, {("t", 0): 1, ("u", 0): 2}, member_id=leader, generation=gen))
    r = done(h.offset_delete(G, {"t": [0], "u": [0]}))
    assert r.error_code == 0 and errors(r) == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0}
    assert h.offsets(G) == {("t", 0): 1}
    # a non-consumer group with members
    h2 = h_()
    stable_group(h2, "c", 1, ptype="connect")
    assert done(h2.offset_delete("c", {"t": [0]})).error_code == E.NON_EMPTY_GROUP


def test_offset_delete_last_offset_of_empty_group_kills_it() -> None:
    h = h_()
    done(h.commit(G, {("t", 0): 1}))
    r = done(h.offset_delete(G, {"t": [0, 1]}))
    assert errors(r) == {("t", 0): 0, ("t", 1): 0}
    assert h.coord.group(G) is None
    assert h.log[-1].key == GroupKey(G) and h.log[-1].value is None


# ---------------------------------------------------------------- retention (KIP-211)


def test_retention_of_standalone_offsets_by_commit_time(caplog) -> None:
    h = h_(offsets_retention_minutes=1)
    done(h.commit(G, {("t", 0): 1}))
    h.advance(30_000)
    done(h.commit(G, {("t", 1): 1}))
    h.advance(30_000)
    with caplog.at_level(logging.INFO, logger="kcoord.group"):
        h.run(h.coord.expire_offsets())
    assert "Removed 1 expired offsets in 0 milliseconds." in caplog.text
    assert h.offsets(G) == {("t", 1): 1}
    h.advance(30_000)
    h.run(h.coord.expire_offsets())
    assert h.coord.group(G) is None  # Empty with no offsets -> Dead + tombstone
    assert h.log[-1].key == GroupKey(G) and h.log[-1].value is None


def test_retention_starts_when_group_became_empty() -> None:
    h = h_(offsets_retention_minutes=1)
    ids, gen, leader = stable_group(h, G, 1, session=10000)
    done(h.commit(G, {("t", 0): 1}, member_id=leader, generation=gen))
    for _ in range(20):  # stays Stable (subscribed to t): offsets kept
        h.advance(5000)
        h.heartbeat(G, leader, gen)
    h.run(h.coord.expire_offsets())
    assert h.offsets(G) == {("t", 0): 1}
    done(h.leave(G, (leader, None)))
    assert h.state(G) == "Empty"
    h.advance(59_999)
    h.run(h.coord.expire_offsets())
    assert h.offsets(G) == {("t", 0): 1}
    h.advance(1)
    h.run(h.coord.expire_offsets())
    assert h.coord.group(G) is None


def test_stable_consumer_group_expires_unsubscribed_topics_by_commit_time() -> None:
    h = h_(offsets_retention_minutes=1)
    ids, gen, leader = stable_group(h, G, 1, session=100_000, protocols=[("range", sub("t"))])
    done(h.commit(G, {("t", 0): 1, ("old", 0): 1}, member_id=leader, generation=gen))
    h.advance(60_000)
    h.run(h.coord.expire_offsets())
    assert h.offsets(G) == {("t", 0): 1}


def test_explicit_expire_timestamp_wins() -> None:
    h = h_(offsets_retention_minutes=100)
    done(h.commit(G, {("t", 0): 1}, version=2, retention=1000))
    h.advance(1000)
    h.run(h.coord.expire_offsets())
    assert h.offsets(G) == {}


def test_pending_commits_do_not_expire() -> None:
    h = h_(offsets_retention_minutes=1)
    done(h.commit(G, {("t", 0): 1}))
    h.advance(60_000)
    h.hold = True
    h.commit(G, {("t", 0): 2})
    h.hold = False
    h.run(h.coord.expire_offsets())
    assert h.offsets(G) == {("t", 0): 1}


# ---------------------------------------------------------------- loading


def member_value(mid: str, inst: str | None = None) -> MemberValue:
    return MemberValue(mid, inst, "c", "/h", 30000, 10000, sub("t"), b"A")


def test_loading_rebuilds_groups_and_arms_sessions() -> None:
    h = h_()
    p = h.coord.partition_of(G)
    h.coord.begin_loading(p)
    assert done(h.describe(G)).groups[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert errors(done(h.commit(G, {("t", 0): 1})))[("t", 0)] == E.COORDINATOR_LOAD_IN_PROGRESS
    recs = [
        CoordinatorRecord(OffsetKey(G, "t", 0), OffsetValue(5, "", 1)),
        CoordinatorRecord(GroupKey(G), GroupValue("consumer", 3, "range", "m1", 100,
                                                  [member_value("m1"), member_value("m2", "s")])),
        CoordinatorRecord(OffsetKey(G, "t", 1), OffsetValue(6, "", 1)),
        CoordinatorRecord(OffsetKey(G, "t", 1), None),
        CoordinatorRecord(OffsetKey("other", "x", 0), OffsetValue(1, "", 1)),
        CoordinatorRecord(GroupKey("gone"), GroupValue("consumer", 1, None, None, 5, [])),
        CoordinatorRecord(GroupKey("gone"), None),
    ]
    for r in recs:
        h.coord.replay(r)
    h.coord.end_loading(p)
    for other in ("other", "gone"):
        if h.coord.partition_of(other) != p:
            h.coord.end_loading(h.coord.partition_of(other))
    g = h.coord.group(G)
    assert str(g.state) == "Stable" and g.generation_id == 3 and g.leader_id == "m1"
    assert g.current_static_member_id("s") == "m2" and g.get("m1").assignment == b"A"
    assert g.subscribed_topics == {"t"}
    assert h.offsets(G) == {("t", 0): 5}
    assert h.state("other") == "Empty" and h.coord.group("gone") is None
    # a loaded member can heartbeat / sync; a silent one expires
    assert done(h.heartbeat(G, "m1", 3)).error_code == 0
    assert done(h.sync(G, "m1", 3)).assignment == b"A"
    h.advance(6000)
    h.heartbeat(G, "m1", 3)
    h.advance(4000)
    assert not g.has("m2") and str(g.state) == "PreparingRebalance"


def test_loaded_group_over_capacity_rebalances() -> None:
    h = h_(group_max_size=1)
    p = h.coord.partition_of(G)
    h.coord.begin_loading(p)
    h.coord.replay(CoordinatorRecord(GroupKey(G), GroupValue("consumer", 1, "range", "a",
                                                             5, [member_value("a"), member_value("b")])))
    h.coord.end_loading(p)
    assert h.state(G) == "PreparingRebalance"


def test_begin_loading_drops_state_of_that_partition() -> None:
    h = h_()
    ids, gen, leader = stable_group(h, G, 1)
    h.coord.begin_loading(h.coord.partition_of(G))
    assert h.coord.group(G) is None


def test_unknown_key_is_skipped(caplog) -> None:
    h = h_()
    h.coord.replay(CoordinatorRecord(key=object(), value=None))  # type: ignore[arg-type]
    assert "unknown key" in caplog.text


def test_million_offsets_are_compact() -> None:
    import tracemalloc

    from kcoord.server.group.offsets import OffsetStore
    tracemalloc.start()
    s = OffsetStore()
    base = tracemalloc.get_traced_memory()[0]
    v = OffsetValue(123456789, "", 1_700_000_000_000)
    for t in range(20):
        for p in range(1000):
            s.put(f"topic-{t}", p, v)
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert len(s) == 20_000
    assert used / len(s) < 60, used / len(s)  # bytes per offset (a million: < 60 MB)
    assert s.get("topic-5", 77) == v
    assert s.remove("topic-5", 77) and s.get("topic-5", 77) is None and len(s) == 19_999
    assert s.get("topic-5", 999) == v
    s.put("topic-5", 2**31 - 1, v)  # huge partition numbers do not grow the arrays
    assert s.get("topic-5", 2**31 - 1) == v and len(s) == 20_000
    assert s.remove("topic-5", 2**31 - 1) and len(s) == 19_999
