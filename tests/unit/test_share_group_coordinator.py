"""Share groups (KIP-932), the group coordinator's side, on a fake clock: joining with a
client-chosen member id, the `simple` assignor's placement (several members per partition),
group and member epochs, fencing, leaving, session expiry, group.share.max.size, the admin APIs
answering for a share group as Kafka does, failed appends undone, and replaying the records
(through their bytes) into a fresh coordinator giving the live state."""
from __future__ import annotations

from typing import Any

import pytest
from test_group_helpers import ConsumerHarness, FakeTopics, done, wire

from kcoord.protocol.coordinator_codec import decode_record, encode_key, encode_value
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_messages import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest
from kcoord.server.group.coordinator import GroupCoordinator
from kcoord.server.group.share import assignor
from kcoord.server.group.share.settings import SETTINGS, group_config_fields

G = "sg"


class Harness(ConsumerHarness):
    def __init__(self, topics: FakeTopics | None = None, **cfg: Any) -> None:
        self.left: list[tuple[str, str]] = []
        super().__init__(topics or FakeTopics(t=2), **cfg)
        self.coord.share.on_member_left = [lambda g, m: self.left.append((g, m))]

    def hb(self, member_id: str, epoch: int, topics: list[str] | None = None, group: str = G,
           rack: str | None = None) -> Any:
        req = ShareGroupHeartbeatRequest(version=1, group_id=group, member_id=member_id, member_epoch=epoch,
                                         rack_id=rack, subscribed_topic_names=topics)
        return done(self.run(self.coord.share_group_heartbeat(wire(req, 1), 1, "client-" + member_id,
                                                             "/127.0.0.1")))

    def join(self, member_id: str, topics: list[str] | None = None, **kw: Any) -> Any:  # type: ignore[override]
        return self.hb(member_id, 0, topics or ["t"], **kw)

    def describe(self, *groups: str) -> Any:
        req = ShareGroupDescribeRequest(version=1, group_ids=list(groups), include_authorized_operations=False)
        return done(self.run(self.coord.share_group_describe(wire(req, 1), 1)))

    def assigned(self, member_id: str) -> set[tuple[str, int]]:
        got = self.coord.share.assignment(G, member_id)
        assert got is not None
        names = {self.topics.id(n): n for n in self.topics.by_name}
        return {(names[t], p) for t, p in got}


def owned(r: Any, h: Harness) -> set[tuple[str, int]] | None:
    if r.assignment is None:
        return None
    names = {h.topics.id(n): n for n in h.topics.by_name}
    return {(names[tp.topic_id], p) for tp in r.assignment.topic_partitions for p in tp.partitions}


def converge(h: Harness, epochs: dict[str, int]) -> None:
    for _ in range(3):
        for m in list(epochs):
            r = h.hb(m, epochs[m])
            assert r.error_code == 0, r
            epochs[m] = r.member_epoch


# ---------------------------------------------------------------- joining and the assignor


def test_first_member_joins_at_epoch_1_with_every_partition() -> None:
    h = Harness()
    r = h.join("m1")
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "m1", 1, 5000)
    assert owned(r, h) == {("t", 0), ("t", 1)}
    g = h.coord.group(G)
    assert (g.group_epoch, g.assignment_epoch, g.state_name(), g.listed_protocol_type()) == (1, 1, "Stable", "share")
    # a steady heartbeat writes nothing and carries no assignment
    n = len(h.log)
    r = h.hb("m1", 1)
    assert (r.error_code, r.member_epoch, r.assignment) == (0, 1, None)
    assert len(h.log) == n


@pytest.mark.parametrize("n, expected", [
    # Java's "m0".hashCode() = 3427, "m1" 3428, "m2" 3429: hashed onto partition 1, 0, 1
    (1, [{0, 1}]),  # hashed onto 1; partition 0 dealt to it
    (2, [{1}, {0}]),
    (3, [{1}, {0}, {1}]),  # partition 1 is read by two members
])
def test_simple_assignor_placement_over_two_partitions(n: int, expected: list[set[int]]) -> None:
    h = Harness()
    epochs = {}
    for i in range(n):
        epochs[f"m{i}"] = h.join(f"m{i}").member_epoch
    converge(h, epochs)
    got = [{p for _, p in h.assigned(f"m{i}")} for i in range(n)]
    assert got == expected
    assert set().union(*got) == {0, 1}  # every partition is read
    g = h.coord.group(G)
    assert g.group_epoch == n and all(m.member_epoch == n for m in g.members.values())


def test_assignor_hashes_members_keeps_current_partitions_and_deals_the_rest() -> None:
    import uuid
    t = uuid.uuid4()
    assert assignor.java_hash("hello") == 99162322 and assignor.java_hash("é€") == 15587
    one = assignor.assign({"m0": ("T",)}, {"T": (t, 4)})
    assert one == {"m0": {t: frozenset({0, 1, 2, 3})}}
    # m1 joins: "m0" hashes onto 3, "m1" onto 0; m0 keeps 1 of its current ones (desired 2)
    # and the deal hands 2 to m0, which may go one over the desired count
    two = assignor.assign({"m0": ("T",), "m1": ("T",)}, {"T": (t, 4)}, one)
    assert two == {"m0": {t: frozenset({1, 2, 3})}, "m1": {t: frozenset({0})}}
    # more members than partitions: every member is hashed onto one, partitions are shared
    many = assignor.assign({f"m{i}": ("T",) for i in range(7)}, {"T": (t, 2)})
    assert all(len(a[t]) == 1 for a in many.values())
    assert {p for a in many.values() for p in a[t]} == {0, 1}


def test_assignor_heterogeneous_subscriptions() -> None:
    import uuid
    a, b = uuid.uuid4(), uuid.uuid4()
    out = assignor.assign({"x": ("A",), "y": ("A", "B"), "z": ("C",)}, {"A": (a, 3), "B": (b, 1)})
    assert out["z"] == {}
    assert out["x"].get(a, frozenset()) | out["y"].get(a, frozenset()) == frozenset({0, 1, 2})
    assert out["y"][b] == frozenset({0})
    assert set(out["x"]) <= {a}


def test_assignor_places_again_what_a_member_that_left_the_topic_held() -> None:
    """m0 moves from topic A to topic B: the partition of A it held goes to A's remaining
    subscriber instead of staying unassigned (found by test_share_group_replay)."""
    import uuid
    a, b = uuid.uuid4(), uuid.uuid4()
    topics = {"A": (a, 2), "B": (b, 3)}
    both = assignor.assign({"m0": ("A",), "m1": ("A",)}, topics)
    assert {p for m in both.values() for p in m[a]} == {0, 1}
    moved = assignor.assign({"m0": ("B",), "m1": ("A",)}, topics, both)
    assert moved["m1"] == {a: frozenset({0, 1})}
    assert set(moved["m0"]) == {b}


def test_partition_added_bumps_the_group_epoch_and_reassigns() -> None:
    h = Harness()
    assert h.join("m1").member_epoch == 1
    h.topics.create("t", 3)
    r = h.hb("m1", 1)
    assert r.member_epoch == 2 and owned(r, h) == {("t", 0), ("t", 1), ("t", 2)}


# ---------------------------------------------------------------- errors


def test_request_errors_as_kafka() -> None:
    h = Harness()
    assert h.hb("", 0, ["t"]).error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("m", 0, None).error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("m", 0, []).error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("m", -2, ["t"]).error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("m", 0, ["t"], rack="").error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("m", 0, ["t"], group="").error_code == ErrorCode.INVALID_REQUEST
    assert h.hb("m", 1).error_code == ErrorCode.GROUP_ID_NOT_FOUND  # no such group
    assert h.hb("m", -1).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.join("m1").error_code == 0
    assert h.hb("other", 1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.hb("other", -1).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.hb("m1", 5).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert h.join("m2").member_epoch == 2
    assert h.hb("m1", 1).error_code == 0  # the previous epoch is accepted (a lost response)
    assert h.hb("m1", 2).member_epoch == 2
    assert h.join("m3").member_epoch == 3
    assert h.hb("m1", 2).member_epoch == 3
    assert h.hb("m1", 1).error_code == ErrorCode.FENCED_MEMBER_EPOCH  # neither the epoch nor the previous one
    assert h.hb("m1", 0, ["t"]).member_epoch == 3  # rejoining with epoch 0 (after a fence) is taken


def test_group_max_size() -> None:
    h = Harness(group_share_max_size=2)
    assert h.join("a").error_code == 0 and h.join("b").error_code == 0
    r = h.join("c")
    assert r.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "maximum capacity of 2" in r.error_message
    assert h.hb("a", 1).member_epoch == 2  # members already in are fine


def test_another_group_types_id() -> None:
    h = Harness()
    h.cg_join("cg", "c1", ["t"])
    r = h.hb("m", 0, ["t"], group="cg")
    assert (r.error_code, r.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    assert h.join("m1").error_code == 0
    # the consumer group protocol and the classic one do not take the share group
    assert h.cg_join(G, "c1", ["t"]).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    j = done(h.join_group_request(G)) if hasattr(h, "join_group_request") else None
    if j is None:
        from kafka.protocol.consumer import JoinGroupRequest
        req = JoinGroupRequest(version=5, group_id=G, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                               member_id="", group_instance_id=None, protocol_type="consumer",
                               protocols=[("range", b"")])
        j = done(h.run(h.coord.join_group(wire(req, 5), 5, "c", "/h")))
    assert (j.error_code, j.member_id) == (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
    d = h.coord.describe_groups(wire(_describe_groups([G]), 5), 5).response
    assert d.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    cgd = h.cg_describe(G) if hasattr(h, "cg_describe") else None
    if cgd is not None:
        assert cgd.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


def _describe_groups(ids: list[str]) -> Any:
    from kafka.protocol.admin.groups import DescribeGroupsRequest
    return DescribeGroupsRequest(version=5, groups=ids, include_authorized_operations=False)


def test_list_describe_and_delete() -> None:
    from kafka.protocol.admin.groups import DeleteGroupsRequest, ListGroupsRequest
    h = Harness()
    h.join("m1")
    lg = h.coord.list_groups(wire(ListGroupsRequest(version=5, states_filter=[], types_filter=["share"]), 5), 5)
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in lg.response.groups] == \
        [(G, "share", "Stable", "share")]
    lg = h.coord.list_groups(wire(ListGroupsRequest(version=5, states_filter=[], types_filter=["consumer"]), 5), 5)
    assert lg.response.groups == []
    d = h.describe(G, "nope").groups
    assert (d[0].error_code, d[0].group_state, d[0].group_epoch, d[0].assignment_epoch, d[0].assignor_name) == \
        (0, "Stable", 1, 1, "simple")
    m = d[0].members[0]
    assert (m.member_id, m.member_epoch, m.client_id, m.client_host, m.subscribed_topic_names) == \
        ("m1", 1, "client-m1", "/127.0.0.1", ["t"])
    assert {(tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions} == {("t", 0), ("t", 1)}
    assert d[1].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    dg = h.run(h.coord.delete_groups(wire(DeleteGroupsRequest(version=2, groups_names=[G]), 2), 2))
    assert dg.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    assert h.hb("m1", -1).error_code == 0
    assert h.coord.group(G).state_name() == "Empty"
    dg = h.run(h.coord.delete_groups(wire(DeleteGroupsRequest(version=2, groups_names=[G]), 2), 2))
    assert dg.results[0].error_code == 0
    assert h.coord.group(G) is None
    assert h.describe(G).groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


# ---------------------------------------------------------------- leaving and expiry


def test_leave_bumps_the_epoch_and_tells_the_share_partitions() -> None:
    h = Harness()
    h.join("a")
    h.join("b")
    r = h.hb("a", -1)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "a", -1)
    assert h.left == [(G, "a")]
    assert h.coord.share.assignment(G, "a") is None
    g = h.coord.group(G)
    assert g.group_epoch == 3 and list(g.members) == ["b"]
    r = h.hb("b", 2)
    assert r.member_epoch == 3 and owned(r, h) == {("t", 0), ("t", 1)}


def test_session_expiry_fences_the_member() -> None:
    h = Harness(group_share_session_timeout_ms=45000)
    h.join("a")
    h.join("b")
    for _ in range(5):
        h.advance(20000)
        assert h.hb("b", h.coord.group(G).members["b"].member_epoch).error_code == 0
    assert h.left == [(G, "a")]
    assert list(h.coord.group(G).members) == ["b"]
    h.advance(45000)
    assert h.left == [(G, "a"), (G, "b")]
    assert h.coord.group(G).state_name() == "Empty"


def test_failed_append_is_undone() -> None:
    h = Harness()
    h.join("a")
    h.fail_next = ErrorCode.NOT_COORDINATOR
    r = h.join("b")
    assert r.error_code == ErrorCode.NOT_COORDINATOR
    g = h.coord.group(G)
    assert list(g.members) == ["a"] and g.group_epoch == 1 and g.assignment_epoch == 1
    assert set(g.target_assignment) == {"a"}
    h.fail_next = ErrorCode.NOT_COORDINATOR
    assert h.join("x", group="new").error_code == ErrorCode.NOT_COORDINATOR
    assert h.coord.group("new") is None


# ---------------------------------------------------------------- replay


def snapshot(coord: GroupCoordinator, gid: str) -> Any:
    g = coord.group(gid)
    if g is None:
        return None
    return (g.group_epoch, g.assignment_epoch, dict(g.members), dict(g.target_assignment), dict(g.initialized),
            g.state_name())


def test_replay_of_the_records_equals_the_live_state() -> None:
    h = Harness()
    epochs = {m: h.join(m).member_epoch for m in ("a", "b", "c")}
    converge(h, epochs)
    h.hb("b", epochs["b"], ["t", "u"])
    h.topics.create("u", 1)
    epochs.pop("b")
    h.hb("b", h.coord.group(G).members["b"].member_epoch)
    h.hb("c", -1)
    h.join("d", group="other")
    h.hb("d", -1, group="other")
    from kafka.protocol.admin.groups import DeleteGroupsRequest
    h.run(h.coord.delete_groups(wire(DeleteGroupsRequest(version=2, groups_names=["other"]), 2), 2))
    kinds = {type(r.key).__name__ for r in h.log}
    assert {"ShareGroupMetadataKey", "ShareGroupMemberMetadataKey", "ShareGroupTargetAssignmentMetadataKey",
            "ShareGroupTargetAssignmentMemberKey", "ShareGroupCurrentMemberAssignmentKey",
            "ShareGroupStatePartitionMetadataKey"} <= kinds

    fresh = GroupCoordinator(h.config, h.clock, 50)
    fresh.set_topics(h.topics)
    part = fresh.partition_of(G)
    fresh.begin_loading(part)
    fresh.begin_loading(fresh.partition_of("other"))
    for r in h.log:
        back = decode_record(encode_key(r.key), encode_value(r.value))
        assert back == r
        fresh.replay(back)
    fresh.end_loading(part)
    fresh.end_loading(fresh.partition_of("other"))
    assert snapshot(fresh, G) == snapshot(h.coord, G)
    assert fresh.group("other") is None
    assert fresh.share.assignment(G, "a") == h.coord.share.assignment(G, "a")


def test_settings_bounds() -> None:
    cfg = {name: default for name, (_, default) in SETTINGS.items()}
    assert group_config_fields(cfg)["group_share_max_size"] == 200
    for bad in ({"group.share.session.timeout.ms": 30000}, {"group.share.heartbeat.interval.ms": 20000},
                {"group.share.max.size": 5}):
        with pytest.raises(ValueError):
            group_config_fields({**cfg, **bad})


def test_compaction_keeps_the_share_group_state() -> None:
    """What the compaction sidecar keeps (the latest record of each key, tombstones dropped once
    old enough) replays to the same share groups as the whole log (sidecar/verify.py's check)."""
    from kcoord.sidecar.verify import replay_state

    h = Harness()
    epochs = {m: h.join(m).member_epoch for m in ("a", "b", "c")}
    converge(h, epochs)
    h.hb("a", -1)
    h.advance(60000)  # b and c expire
    h.join("d")
    full = [(encode_key(r.key), encode_value(r.value)) for r in h.log]
    latest: dict[bytes, bytes | None] = {}
    for k, v in full:
        latest.pop(k, None)
        latest[k] = v
    compacted = [(k, v) for k, v in latest.items() if v is not None]
    assert len(compacted) < len(full)
    p = h.coord.partition_of(G)
    mode, a = replay_state(full, p, 50, "coordinator")
    _, b = replay_state(compacted, p, 50, "coordinator")
    assert mode == "coordinator" and a == b and G in a


def test_offset_apis_on_a_share_group() -> None:
    """A share group commits no offsets: OffsetCommit and OffsetDelete answer GROUP_ID_NOT_FOUND
    (Kafka's ShareGroup.validateOffset*), OffsetFetch answers every partition without an offset
    (Kafka's fetchOffsets for a group it cannot fetch for), and nothing is written."""
    h = Harness()
    h.join("m1")
    n = len(h.log)
    c = done(h.commit(G, {("t", 0): 5}))
    assert [p.error_code for t in c.topics for p in t.partitions] == [ErrorCode.GROUP_ID_NOT_FOUND]
    for version in (7, 8, 9):
        f = done(h.fetch(G, {"t": [0]}, version=version))
        parts = f.groups[0].topics[0].partitions if version >= 8 else f.topics[0].partitions
        assert [(p.committed_offset, p.error_code) for p in parts] == [(-1, 0)]
    d = done(h.offset_delete(G, {"t": [0]}))
    assert d.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert len(h.log) == n and h.coord.group(G).TYPE == "share"


def test_control_api_rebalance_and_expire() -> None:
    from kcoord.server.group import control

    h = Harness()
    h.join("a")
    h.join("b")
    assert control.force_rebalance(h.coord, G, "test") is None
    h.flush()
    assert h.coord.group(G).group_epoch == 3
    r = h.hb("a", 1)
    assert r.error_code == 0 and r.member_epoch == 3
    assert control.expire_member(h.coord, G, "nobody", "test") == (ErrorCode.UNKNOWN_MEMBER_ID, None)
    assert control.expire_member(h.coord, G, "b", "test") == (None, "b")
    h.flush()
    assert list(h.coord.group(G).members) == ["a"] and h.left == [(G, "b")]
