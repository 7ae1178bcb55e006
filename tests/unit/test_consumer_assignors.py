"""The server-side assignors: uniform balanced and sticky (homogeneous and heterogeneous
subscriptions), range balanced per topic, co-partitioned and stable for static members."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.server.group.consumer.assignors import (
    GroupSpec,
    MemberSpec,
    PartitionAssignorError,
    assignor_names,
    range_,
    uniform,
)

T = [uuid.uuid5(uuid.NAMESPACE_OID, f"t{i}") for i in range(4)]


def counts(result: dict) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


def owners(result: dict) -> dict[tuple, str]:
    out: dict[tuple, str] = {}
    for m, a in result.items():
        for t, ps in a.items():
            for p in ps:
                assert (t, p) not in out, f"{t}-{p} given to {out[(t, p)]} and {m}"
                out[(t, p)] = m
    return out


def spec(members: dict[str, set], partitions: dict, current: dict | None = None) -> GroupSpec:
    topic_sets = {frozenset(ts) for ts in members.values()}
    return GroupSpec({m: MemberSpec(frozenset(ts), None, (current or {}).get(m, {})) for m, ts in members.items()},
                     partitions, homogeneous=len(topic_sets) <= 1)


@settings(max_examples=150, deadline=None)
@given(n_members=st.integers(1, 12), parts=st.lists(st.integers(0, 9), min_size=1, max_size=3),
       leave=st.integers(0, 3), join=st.integers(0, 3))
def test_uniform_homogeneous_is_balanced_complete_and_sticky(n_members, parts, leave, join):
    partitions = {T[i]: n for i, n in enumerate(parts)}
    members = {f"m{i}": set(partitions) for i in range(n_members)}
    first = uniform(spec(members, partitions))
    total = sum(parts)
    assert len(owners(first)) == total
    c = counts(first)
    assert max(c.values()) - min(c.values()) <= 1
    # members leave and join: survivors keep what fits their new quota
    survivors = list(members)[leave:] or ["m0"]
    after_members = {m: set(partitions) for m in survivors} | {f"n{i}": set(partitions) for i in range(join)}
    second = uniform(spec(after_members, partitions, {m: first[m] for m in survivors if m in first}))
    assert len(owners(second)) == total
    c2 = counts(second)
    assert max(c2.values()) - min(c2.values()) <= 1
    quota = total // len(after_members)
    for m in survivors:
        kept = sum(len(first.get(m, {}).get(t, set()) & second[m].get(t, set())) for t in partitions)
        assert kept >= min(c[m] if m in c else 0, quota), (m, kept, quota)


@settings(max_examples=100, deadline=None)
@given(subs=st.lists(st.sets(st.integers(0, 3), min_size=1), min_size=1, max_size=8),
       parts=st.lists(st.integers(1, 7), min_size=4, max_size=4))
def test_uniform_heterogeneous_is_complete_and_balanced_among_co_subscribers(subs, parts):
    partitions = {T[i]: parts[i] for i in range(4)}
    members = {f"m{i}": {T[t] for t in s} for i, s in enumerate(subs)}
    result = uniform(spec(members, partitions))
    own = owners(result)
    subscribed = set().union(*members.values())
    assert set(own) == {(t, p) for t in subscribed for p in range(partitions[t])}
    c = counts(result)
    for (t, _p), m in own.items():
        assert t in members[m]
        for other, topics in members.items():  # no co-subscriber could take it to even out
            if t in topics:
                assert c[m] - c[other] <= 1, (m, other, c)
    again = uniform(spec(members, partitions, result))
    assert again == result  # nothing moves when nothing changed


def test_range_is_co_partitioned_and_balanced():
    partitions = {T[0]: 7, T[1]: 7}
    members = {m: {T[0], T[1]} for m in ("b", "a", "c")}
    result = range_(spec(members, partitions))
    assert result["a"][T[0]] == result["a"][T[1]] == frozenset({0, 1, 2})
    assert result["b"][T[0]] == frozenset({3, 4}) and result["c"][T[1]] == frozenset({5, 6})


def test_range_static_members_keep_their_ranges():
    partitions = {T[0]: 6}
    s1 = GroupSpec({"x1": MemberSpec(frozenset({T[0]}), "i-a"), "y": MemberSpec(frozenset({T[0]}), "i-b")},
                   partitions)
    s2 = GroupSpec({"x2": MemberSpec(frozenset({T[0]}), "i-a"), "y": MemberSpec(frozenset({T[0]}), "i-b")},
                   partitions)
    assert range_(s1)["x1"] == range_(s2)["x2"] == {T[0]: frozenset({0, 1, 2})}


def test_missing_topic_is_an_assignor_error():
    with pytest.raises(PartitionAssignorError):
        uniform(spec({"m": {T[0]}}, {}))


def test_assignor_names_take_kafkas_class_names():
    assert assignor_names(["org.apache.kafka.coordinator.group.assignor.RangeAssignor", "uniform"]) == \
        ["range", "uniform"]
    with pytest.raises(ValueError):
        assignor_names(["sticky"])
