"""Consumer groups (KIP-848) on a fake clock: ConsumerGroupHeartbeat's errors in each member
state, joining and reconciliation (revoke before reassign), leaving, static members, session
and rebalance timeouts, regex subscriptions, offsets with member epochs, the admin APIs for the
right group type, conversion of an Empty classic group, failed appends undone, and replaying
the log into a fresh coordinator giving the live state (after Kafka's GroupMetadataManagerTest)."""
from __future__ import annotations

from typing import Any

import pytest
from test_group_helpers import ConsumerHarness, E, FakeTopics, done, stable_group, sub

from kcoord.protocol.coordinator_codec import decode_record, encode_key, encode_value
from kcoord.server.clock import FakeClock
from kcoord.server.group.consumer.member import MemberState
from kcoord.server.group.coordinator import GroupCoordinator

G = "cg"


class Client:
    """A consumer-protocol member as librdkafka behaves: it owns what the last answer assigned
    (revoking at once what left it) and reports it in every heartbeat."""

    def __init__(self, h: ConsumerHarness, member_id: str, topics: list[str] | None = None, **kw: Any) -> None:
        self.h, self.member_id, self.kw = h, member_id, kw
        self.topics = topics
        self.epoch = 0
        self.owned: dict[str, set[int]] = {}
        self.last: Any = None

    def join(self) -> Any:
        r = done(self.h.cg_join(G, self.member_id, self.topics, **self.kw))
        return self._took(r)

    def beat(self) -> Any:
        r = done(self.h.cg_heartbeat(G, self.member_id, self.epoch, owned={t: set(p) for t, p in self.owned.items()},
                                     instance=self.kw.get("instance")))
        return self._took(r)

    def _took(self, r: Any) -> Any:
        self.last = r
        if r.error_code == 0:
            self.epoch = r.member_epoch
            got = self.h.owned(r)
            if got is not None:
                self.owned = {t: ps for t, ps in got.items() if ps}
        return r

    def partitions(self) -> set[tuple[str, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def converge(clients: list[Client], rounds: int = 10) -> None:
    for _ in range(rounds):
        for c in clients:
            assert c.beat().error_code == 0, c.last
    owned = [c.partitions() for c in clients]
    assert sum(len(o) for o in owned) == len(set().union(*owned)), owned


def group(h: ConsumerHarness) -> Any:
    return h.coord.group(G)


# ---------------------------------------------------------------- joining and reconciliation


def test_first_member_gets_everything_at_epoch_1() -> None:
    h = ConsumerHarness()
    c = Client(h, "m1")
    r = c.join()
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, "m1", 1, 5000)
    assert c.owned == {"t": set(range(6))}
    g = group(h)
    assert (g.group_epoch, g.assignment_epoch, g.state_name()) == (1, 1, "Stable")


def test_a_partition_is_revoked_before_it_is_given_to_another_member() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    r = b.join()
    assert r.member_epoch == 2 and b.owned == {}  # its partitions are still a's
    assert group(h).state_name() == "Reconciling"
    # a is told to give three up; it keeps its epoch until it no longer reports them
    ra = a.beat()
    assert ra.member_epoch == 1 and len(a.owned["t"]) == 3
    m = group(h).members["a"]
    assert m.state is MemberState.UNREVOKED_PARTITIONS and len(m.pending_revocation[h.topics.id("t")]) == 3
    ra = a.beat()  # now without them
    assert ra.member_epoch == 2
    rb = b.beat()
    assert rb.member_epoch == 2 and len(b.owned["t"]) == 3
    assert not a.partitions() & b.partitions()
    assert group(h).state_name() == "Stable"


def test_an_assignment_is_repeated_until_the_member_says_it_owns_it() -> None:
    """librdkafka gives up on a heartbeat's answer after one heartbeat interval, and a
    replicated write can take longer: a member that never read the answer telling it to revoke
    keeps heartbeating at its epoch without saying what it owns. Kafka sends the assignment
    only when it changed, so such a member would keep every partition until its rebalance
    timeout; kcoord repeats it until the member says it owns exactly it."""
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    a.beat()
    assert done(h.cg_heartbeat(G, "a", 1)).assignment is None  # settled: a keep-alive
    b.join()
    lost = done(h.cg_heartbeat(G, "a", 1))  # told to revoke three; the answer never arrives
    assert lost.assignment is not None
    assert group(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    again = done(h.cg_heartbeat(G, "a", 1))  # its next keep-alive gets the same assignment
    assert again.member_epoch == 1 and h.owned(again) == h.owned(lost) and len(h.owned(again)["t"]) == 3
    a.beat()  # it says it still owns all six: told its three again, it revokes the rest
    assert a.epoch == 1 and len(a.owned["t"]) == 3
    a.beat()  # it says it owns its three: bumped, and confirmed
    assert a.epoch == 2
    assert done(h.cg_heartbeat(G, "a", 2)).assignment is None
    b.beat()
    assert len(b.owned["t"]) == 3 and not a.partitions() & b.partitions()


def test_a_member_that_says_it_owns_something_else_is_told_its_assignment_again() -> None:
    """On a coordinator that loaded the group from the log (a failover), a member in the middle
    of a revocation sends a full heartbeat owning more than its assignment; the answer to it may
    be lost as well, so its next keep-alive gets the assignment again."""
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    a.beat()
    b.join()
    assert done(h.cg_heartbeat(G, "a", 1)).assignment is not None  # told to revoke three: lost
    moved = ConsumerHarness(h.topics)  # the group's partition led by another node now
    for r in h.log:
        moved.coord.replay(r)
    full = done(moved.cg_heartbeat(G, "a", 1, topics=["t"], owned={"t": set(range(6))}, rebalance=30000))
    assert full.error_code == 0 and len(moved.owned(full)["t"]) == 3
    again = done(moved.cg_heartbeat(G, "a", 1))
    assert again.assignment is not None and moved.owned(again) == moved.owned(full)


def test_previous_epoch_with_owned_subset_is_accepted() -> None:
    """The answer that bumped the epoch may have been lost: the previous epoch still works."""
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    a.beat()
    a.beat()  # bumped to 2
    r = done(h.cg_heartbeat(G, "a", 1, owned={"t": a.owned["t"]}))
    assert r.error_code == 0 and r.member_epoch == 2


def test_joins_of_one_turn_share_one_assignment() -> None:
    h = ConsumerHarness()
    results = []
    for i in range(5):
        results.append(h.coord.consumer_group_heartbeat(
            _join_req(f"m{i}"), 1, "client", "/127.0.0.1"))
    assert all(not r.response.done for r in results)  # wait for the end of the turn
    h.flush()
    answers = [r.response.result() for r in results]
    assert all(a.error_code == 0 and a.member_epoch == 5 for a in answers)
    g = group(h)
    assert g.assignment_epoch == 5 and sorted(len(a[h.topics.id("t")]) for a in g.target_assignment.values()) \
        == [1, 1, 1, 1, 2]


def _join_req(member_id: str) -> Any:
    from kcoord.protocol.messages import ConsumerGroupHeartbeatRequest as R

    return R(version=1, group_id=G, member_id=member_id, member_epoch=0, instance_id=None, rack_id=None,
             rebalance_timeout_ms=30000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
             server_assignor=None, topic_partitions=[])


def test_steady_heartbeat_writes_nothing_and_omits_the_assignment() -> None:
    h = ConsumerHarness()
    c = Client(h, "m")
    c.join()
    c.beat()  # it says it owns what it was assigned (a client's acknowledgement)
    n = len(h.log)
    r = done(h.cg_heartbeat(G, "m", 1))  # a keep-alive: nothing but the epoch
    assert r.error_code == 0 and r.assignment is None and len(h.log) == n
    # the server's fast path for it answers the same bytes
    from kcoord.protocol.fastpath import encode_consumer_group_heartbeat_answer
    from kcoord.protocol.messages import ConsumerGroupHeartbeatRequest as R

    req = R(version=1, group_id=G, member_id="m", member_epoch=1, instance_id=None, rack_id=None,
            rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=None)
    assert encode_consumer_group_heartbeat_answer(h.coord.consumer_group_keepalive(req, 1, "client", "/127.0.0.1"),
                                                  1) == r.encode()
    assert h.coord.consumer_group_keepalive(req, 1, "other-client", "/127.0.0.1") is None  # a change: the full path


def test_keepalive_answers_a_value_not_bytes() -> None:
    """Domain code answers a keep-alive with what it says (member id, epoch, interval); the
    ConsumerGroupHeartbeat route's encoder makes the bytes."""
    h = ConsumerHarness()
    c = Client(h, "m")
    c.join()
    c.beat()  # it says it owns what it was assigned
    from kcoord.protocol.messages import ConsumerGroupHeartbeatRequest as R

    req = R(version=1, group_id=G, member_id="m", member_epoch=1, instance_id=None, rack_id=None,
            rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=None)
    answer = h.coord.consumer_group_keepalive(req, 1, "client", "/127.0.0.1")
    assert (answer.member_id, answer.member_epoch, answer.heartbeat_interval_ms) == \
        ("m", 1, h.config.group_consumer_heartbeat_interval_ms)


def test_subscription_change_bumps_the_epoch_and_reassigns() -> None:
    h = ConsumerHarness(FakeTopics(t=2, u=2))
    c = Client(h, "m", ["t"])
    c.join()
    r = done(h.cg_heartbeat(G, "m", c.epoch, topics=["t", "u"], owned={"t": c.owned["t"]}, rebalance=30000))
    assert r.member_epoch == 2 and h.owned(r) == {"t": {0, 1}, "u": {0, 1}}


def test_new_partitions_bump_the_group_epoch() -> None:
    """As Kafka's metadata image update: the next heartbeat sees the new partition count, bumps
    the group epoch and hands the new partitions out; nothing is revoked (the member keeps what
    it had, so an incremental client sees only the additions)."""
    h = ConsumerHarness()
    c = Client(h, "m")
    c.join()
    h.topics.create("t", 8)
    r = c.beat()
    assert r.member_epoch == 2 and c.owned == {"t": set(range(8))}
    assert group(h).members["m"].state is MemberState.STABLE and group(h).group_epoch == 2


def test_a_deleted_topic_bumps_the_group_epoch_and_only_its_partitions_are_revoked() -> None:
    """A subscribed topic deleted: the next heartbeat bumps the group epoch; the member keeps
    its epoch while it gives up the deleted topic's partitions (the answer holds what it keeps),
    and gets the new epoch once its heartbeat no longer lists them (Kafka's reconciliation)."""
    h = ConsumerHarness(FakeTopics(t=2, u=3))
    c = Client(h, "m", ["t", "u"])
    c.join()
    assert c.owned == {"t": {0, 1}, "u": {0, 1, 2}}
    u_id = h.topics.id("u")
    h.topics.delete("u")
    r = done(h.cg_heartbeat(G, "m", c.epoch, owned=None))
    g = group(h)
    assert g.group_epoch == 2 and g.target_assignment["m"] == {h.topics.id("t"): frozenset({0, 1})}
    assert r.member_epoch == 1 and h.owned(r) == {"t": {0, 1}}
    m = g.members["m"]
    assert m.state is MemberState.UNREVOKED_PARTITIONS and m.pending_revocation == {u_id: frozenset({0, 1, 2})}
    c.owned = {"t": {0, 1}}  # the client revoked what the answer left out
    r = c.beat()
    assert r.member_epoch == 2 and g.members["m"].state is MemberState.STABLE and not g.partition_epochs.get(u_id)


# ---------------------------------------------------------------- errors


def _error(r: Any) -> int:
    return done(r).error_code


@pytest.mark.parametrize("kw, code", [
    (dict(group=""), E.INVALID_REQUEST),
    (dict(member=""), E.INVALID_REQUEST),  # v1: the client generates its member id (KIP-1082)
    (dict(rebalance=-1), E.INVALID_REQUEST),
    (dict(owned={"t": {0}}), E.INVALID_REQUEST),
    (dict(owned=None), E.INVALID_REQUEST),
    (dict(topics=None), E.INVALID_REQUEST),
    (dict(epoch=-3), E.INVALID_REQUEST),
    (dict(instance=""), E.INVALID_REQUEST),
    (dict(rack=""), E.INVALID_REQUEST),
    (dict(assignor="sticky"), E.UNSUPPORTED_ASSIGNOR),
    (dict(regex="(?<=x)t", topics=None), E.INVALID_REGULAR_EXPRESSION),
])
def test_invalid_requests(kw: dict, code: int) -> None:
    h = ConsumerHarness()
    args = dict(group=G, member="m", epoch=0, topics=["t"], owned={}, rebalance=30000)
    args.update(kw)
    r = h.cg_heartbeat(args.pop("group"), args.pop("member"), args.pop("epoch"), **args)
    assert _error(r) == code
    assert h.coord.group(G) is None  # nothing created


def test_v0_without_member_id_gets_one() -> None:
    h = ConsumerHarness()
    r = done(h.cg_heartbeat(G, "", 0, topics=["t"], owned={}, rebalance=30000, version=0))
    assert r.error_code == 0 and len(r.member_id) == 22  # Kafka's Uuid.toString(): 22 base64 characters


def test_unknown_member_and_unknown_group() -> None:
    h = ConsumerHarness()
    assert _error(h.cg_heartbeat(G, "ghost", 3)) == E.UNKNOWN_MEMBER_ID  # no such group
    Client(h, "m").join()
    assert _error(h.cg_heartbeat(G, "ghost", 3)) == E.UNKNOWN_MEMBER_ID
    assert _error(h.cg_heartbeat(G, "ghost", -1)) == E.UNKNOWN_MEMBER_ID


def test_fenced_member_epochs() -> None:
    h = ConsumerHarness()
    c = Client(h, "m")
    c.join()
    assert _error(h.cg_heartbeat(G, "m", 2)) == E.FENCED_MEMBER_EPOCH  # ahead of the coordinator
    Client(h, "x").join()
    c.beat()
    c.beat()  # m at epoch 2, previous 1
    assert group(h).members["m"].member_epoch == 2
    assert _error(h.cg_heartbeat(G, "m", 0 + 1, owned={"t": {0, 1, 2, 3, 4, 5}})) == E.FENCED_MEMBER_EPOCH
    assert _error(h.cg_heartbeat(G, "m", 1, owned=None)) == E.FENCED_MEMBER_EPOCH  # owned unknown


def test_group_max_size() -> None:
    h = ConsumerHarness(group_consumer_max_size=1)
    Client(h, "a").join()
    assert _error(h.cg_join(G, "b")) == E.GROUP_MAX_SIZE_REACHED
    assert done(h.cg_heartbeat(G, "a", 1)).error_code == 0  # a member already in is fine


def test_loading_answers_load_in_progress() -> None:
    h = ConsumerHarness()
    h.coord.begin_loading(h.coord.partition_of(G))
    assert _error(h.cg_join(G, "m")) == E.COORDINATOR_LOAD_IN_PROGRESS


def test_classic_group_with_members_is_not_a_consumer_group_without_online_upgrade() -> None:
    # (with it, the group is converted: test_consumer_group_migration.py)
    h = ConsumerHarness(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy="downgrade")
    stable_group(h, G, 1)
    assert _error(h.cg_join(G, "m")) == E.GROUP_ID_NOT_FOUND


# ---------------------------------------------------------------- leaving, static members


def test_leave_bumps_the_epoch_and_frees_the_partitions() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    converge([a, b])
    r = done(h.cg_heartbeat(G, "b", -1))
    assert (r.error_code, r.member_epoch) == (0, -1)
    assert "b" not in group(h).members
    converge([a])
    assert a.owned == {"t": set(range(6))}


def test_static_member_restart_keeps_its_assignment() -> None:
    h = ConsumerHarness()
    a = Client(h, "a1", instance="ia")
    b = Client(h, "b", instance="ib")
    a.join()
    b.join()
    converge([a, b])
    before = a.owned
    r = done(h.cg_heartbeat(G, "a1", -2, instance="ia"))
    assert r.member_epoch == -2 and group(h).members["a1"].member_epoch == -2
    epoch = group(h).group_epoch
    a2 = Client(h, "a2", instance="ia")
    r = a2.join()
    assert r.error_code == 0 and a2.owned == before and group(h).group_epoch == epoch  # no rebalance
    assert "a1" not in group(h).members


def test_static_member_not_released_and_fenced_instance() -> None:
    h = ConsumerHarness()
    Client(h, "a1", instance="ia").join()
    assert _error(h.cg_join(G, "a2", instance="ia")) == E.UNRELEASED_INSTANCE_ID
    assert _error(h.cg_heartbeat(G, "zz", 1, instance="ia")) == E.FENCED_INSTANCE_ID
    assert _error(h.cg_heartbeat(G, "zz", 1, instance="nobody")) == E.UNKNOWN_MEMBER_ID


# ---------------------------------------------------------------- timers


def test_session_expiry_fences_the_member() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a"), Client(h, "b")
    a.join()
    b.join()
    converge([a, b])
    for _ in range(10):  # a keeps heartbeating, b went silent
        h.advance(5000)
        a.beat()
    assert "b" not in group(h).members
    converge([a])
    assert a.owned == {"t": set(range(6))}


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    h = ConsumerHarness()
    a, b = Client(h, "a", rebalance=10000), Client(h, "b")
    a.join()
    b.join()
    r = done(h.cg_heartbeat(G, "a", 1, owned={"t": set(range(6))}))  # told to revoke, does not
    assert group(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.advance(5000)
    done(h.cg_heartbeat(G, "a", 1, owned={"t": set(range(6))}))
    b.beat()
    h.advance(6000)
    assert "a" not in group(h).members
    assert r.error_code == 0


# ---------------------------------------------------------------- regex subscriptions


def test_regex_picks_up_a_topic_created_later() -> None:
    h = ConsumerHarness(FakeTopics(orders_eu=2, other=3))
    c = Client(h, "m", None, regex="orders_.*")
    c.join()  # a new regex is resolved after the turn's assignment (Kafka: asynchronously)
    assert c.owned == {}
    c.beat()
    assert c.owned == {"orders_eu": {0, 1}}
    h.topics.create("orders_us", 2)
    h.topics.create("__orders_internal", 1)  # internal names never match
    c.beat()
    assert c.owned == {"orders_eu": {0, 1}, "orders_us": {0, 1}}
    assert set(group(h).regexes["orders_.*"].topics) == {"orders_eu", "orders_us"}


# ---------------------------------------------------------------- offsets


def test_offset_commit_and_fetch_with_member_epochs() -> None:
    h = ConsumerHarness()
    c = Client(h, "m")
    c.join()

    def commit(member: str, epoch: int, version: int = 9) -> int:
        r = done(h.commit(G, {("t", 0): 5}, member_id=member, generation=epoch, version=version))
        return r.topics[0].partitions[0].error_code

    assert commit("m", 1) == 0
    assert commit("m", 2) == E.STALE_MEMBER_EPOCH
    assert commit("ghost", 1) == E.UNKNOWN_MEMBER_ID
    assert commit("m", 1, version=8) == E.UNSUPPORTED_VERSION
    assert h.offsets(G) == {("t", 0): 5}


# ---------------------------------------------------------------- admin APIs


def test_list_describe_and_delete_by_type() -> None:
    h = ConsumerHarness(group_initial_rebalance_delay_ms=0)
    Client(h, "m").join()
    stable_group(h, "classic", 1, protocols=[("range", sub("t"))])
    rows = {g.group_id: (g.group_type, g.protocol_type, g.group_state) for g in done(h.list()).groups}
    assert rows[G] == ("consumer", "consumer", "Stable") and rows["classic"][0] == "classic"
    assert [g.group_id for g in done(h.list(types=["consumer"])).groups] == [G]
    assert [g.group_id for g in done(h.list(types=["Classic"])).groups] == ["classic"]
    assert done(h.describe(G)).groups[0].error_code == E.GROUP_ID_NOT_FOUND
    d = done(h.cg_describe(G, "classic", "nope")).groups
    assert [x.error_code for x in d] == [0, E.GROUP_ID_NOT_FOUND, E.GROUP_ID_NOT_FOUND]
    assert (d[0].group_state, d[0].group_epoch, d[0].assignor_name, d[0].members[0].member_type) == \
        ("Stable", 1, "uniform", 1)
    assert d[0].members[0].assignment.topic_partitions[0].topic_name == "t"
    assert done(h.delete(G)).results[0].error_code == E.NON_EMPTY_GROUP
    done(h.cg_heartbeat(G, "m", -1))
    assert done(h.delete(G)).results[0].error_code == 0
    assert h.coord.group(G) is None


def test_empty_classic_group_becomes_a_consumer_group_keeping_offsets() -> None:
    h = ConsumerHarness()
    done(h.commit(G, {("t", 0): 7}))  # a simple (classic, Empty) group holding offsets
    assert h.coord.group(G).TYPE == "classic"
    Client(h, "m").join()
    assert h.coord.group(G).TYPE == "consumer" and h.offsets(G) == {("t", 0): 7}
    assert replayed_state(h) == live_state(h.coord)


# ---------------------------------------------------------------- durability


def test_failed_append_undoes_the_join() -> None:
    h = ConsumerHarness()
    Client(h, "a").join()
    before = live_state(h.coord)
    h.fail_next = E.NOT_ENOUGH_REPLICAS
    r = done(h.cg_join(G, "b"))
    assert r.error_code == E.NOT_ENOUGH_REPLICAS
    assert live_state(h.coord) == before


def test_failed_append_undoes_the_creation_of_a_group() -> None:
    h = ConsumerHarness()
    h.fail_next = E.NOT_ENOUGH_REPLICAS
    assert done(h.cg_join(G, "a")).error_code == E.NOT_ENOUGH_REPLICAS
    assert h.coord.group(G) is None


def live_state(coord: GroupCoordinator) -> dict:
    out = {}
    for g in coord.groups():
        if g.TYPE != "consumer":
            continue
        out[g.group_id] = (
            g.group_epoch, g.assignment_epoch, g.state_name(), dict(g.target_assignment),
            dict(g.subscription_metadata), dict(g.regexes),
            {mid: (m.metadata_value(), m.assignment_value()) for mid, m in g.members.items()},
            sorted(coord.committed_offsets(g.group_id)),
        )
    return out


def replayed_state(h: ConsumerHarness) -> dict:
    """The log, through the codec, replayed into a fresh coordinator as start-up loading does."""
    fresh = GroupCoordinator(h.config, FakeClock(h.clock.now_ms()), h.coord.num_partitions)
    fresh.set_topics(h.topics)
    for p in range(fresh.num_partitions):
        fresh.begin_loading(p)
    latest: dict[bytes, bytes | None] = {}
    for r in h.log:
        k = encode_key(r.key)
        latest.pop(k, None)
        latest[k] = encode_value(r.value)
    for k, v in latest.items():
        rec = decode_record(k, v)
        if rec is not None:
            fresh.replay(rec)
    for p in range(fresh.num_partitions):
        fresh.end_loading(p)
    return live_state(fresh)


def test_replay_of_the_records_equals_the_live_state() -> None:
    h = ConsumerHarness(FakeTopics(t=6, u=3))
    clients = [Client(h, f"m{i}", ["t", "u"] if i % 2 else ["t"]) for i in range(4)]
    for c in clients:
        c.join()
    converge(clients)
    done(h.cg_heartbeat(G, "m3", -1))
    converge(clients[:3])
    done(h.commit(G, {("t", 0): 3}, member_id="m0", generation=clients[0].epoch, version=9))
    assert replayed_state(h) == live_state(h.coord)


def test_offset_fetch_v9_checks_the_member_epoch() -> None:
    from kafka.protocol.consumer import OffsetFetchRequest as F
    from test_group_helpers import wire

    h = ConsumerHarness()
    Client(h, "m").join()

    def fetch(member: str | None, epoch: int) -> int:
        req = F(version=9, require_stable=False, groups=[F.OffsetFetchRequestGroup(
            group_id=G, member_id=member, member_epoch=epoch, topics=None)])
        return done(h.run(h.coord.offset_fetch(wire(req, 9), 9))).groups[0].error_code

    assert fetch("m", 1) == 0
    assert fetch(None, -1) == 0  # an admin client
    assert fetch("m", 7) == E.STALE_MEMBER_EPOCH
    assert fetch("ghost", 1) == E.UNKNOWN_MEMBER_ID


def test_classic_members_convert_an_empty_consumer_group_back_keeping_offsets() -> None:
    h = ConsumerHarness(group_initial_rebalance_delay_ms=0)
    c = Client(h, "m")
    c.join()
    done(h.commit(G, {("t", 0): 9}, member_id="m", generation=1, version=9))
    done(h.cg_heartbeat(G, "m", -1))
    assert group(h).state_name() == "Empty"
    stable_group(h, G, 1, protocols=[("range", sub("t"))])
    assert h.coord.group(G).TYPE == "classic" and h.offsets(G) == {("t", 0): 9}
    assert replayed_state(h) == live_state(h.coord)  # no consumer group left in the log
