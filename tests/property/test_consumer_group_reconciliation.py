"""Property (KIP-848): whatever joins, leaves, subscription changes, topic creations and lost
heartbeats (session expiries) happen, no partition is ever owned by two members at once, as
the members themselves see it (each owns what its last answer assigned); once everyone keeps
heartbeating the group converges (every member at the target epoch with its target); and
replaying the records written into a fresh coordinator gives the live state."""
from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "unit"))

from test_consumer_group import Client, G, live_state, replayed_state  # noqa: E402
from test_group_helpers import ConsumerHarness, FakeTopics  # noqa: E402

NAMES = [f"m{i}" for i in range(5)]
TOPIC_SETS = [["t"], ["u"], ["t", "u"]]

op = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(NAMES), st.sampled_from(TOPIC_SETS)),
    st.tuples(st.just("beat"), st.sampled_from(NAMES)),
    st.tuples(st.just("leave"), st.sampled_from(NAMES)),
    st.tuples(st.just("subscribe"), st.sampled_from(NAMES), st.sampled_from(TOPIC_SETS)),
    st.tuples(st.just("grow"), st.sampled_from(["t", "u", "v"]), st.integers(1, 4)),
    st.tuples(st.just("lose"), st.sampled_from(NAMES)),  # goes silent until its session expires
    st.tuples(st.just("tick"),),
)


def check_disjoint(h: ConsumerHarness, clients: dict[str, Client]) -> None:
    g = h.coord.group(G)
    live = {} if g is None else g.members
    seen: dict[tuple[str, int], str] = {}
    for name, c in clients.items():
        if name not in live:
            continue  # fenced: the coordinator no longer counts it
        for tp in c.partitions():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {name}"
            seen[tp] = name


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=40))
def test_reconciliation_never_shares_a_partition(ops):
    h = ConsumerHarness(FakeTopics(t=4, u=3))
    clients: dict[str, Client] = {}
    silent: set[str] = set()
    for action in ops:
        kind = action[0]
        if kind == "join":
            _, name, topics = action
            if name not in clients:
                c = Client(h, name, list(topics))
                if c.join().error_code == 0:
                    clients[name] = c
        elif kind == "beat":
            c = clients.get(action[1])
            if c is not None and action[1] not in silent:
                if c.beat().error_code != 0:  # fenced or unknown: it rejoins from scratch
                    del clients[action[1]]
        elif kind == "leave":
            c = clients.pop(action[1], None)
            if c is not None:
                h.cg_heartbeat(G, c.member_id, -1)
        elif kind == "subscribe":
            c = clients.get(action[1])
            if c is not None and action[1] not in silent:
                r = h.cg_heartbeat(G, c.member_id, c.epoch, topics=list(action[2]), owned=c.owned, rebalance=30000)
                from test_group_helpers import done
                if c._took(done(r)).error_code != 0:
                    del clients[action[1]]
        elif kind == "grow":
            _, topic, more = action
            old = h.topics.metadata(topic)
            h.topics.create(topic, (old.num_partitions if old else 0) + more)
        elif kind == "lose":
            silent.add(action[1])
        elif kind == "tick":
            h.advance(20_000)
            for name, c in list(clients.items()):
                if name not in silent and c.beat().error_code != 0:
                    del clients[name]
        check_disjoint(h, clients)
    # the silent ones expire; everyone else heartbeats until the group is stable
    for _ in range(3):
        h.advance(30_000)
        for name, c in list(clients.items()):
            if name not in silent and c.beat().error_code != 0:
                del clients[name]
    active = {n: c for n, c in clients.items() if n not in silent}
    for _ in range(6):
        for c in active.values():
            assert c.beat().error_code == 0
            check_disjoint(h, clients)
    g = h.coord.group(G)
    if active:
        assert g.state_name() == "Stable", g
        for name, c in active.items():
            target = {h.topics.name_of(t): set(ps) for t, ps in g.target_assignment.get(name, {}).items() if ps}
            assert c.owned == target
    assert replayed_state(h) == live_state(h.coord)
