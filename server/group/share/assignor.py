"""The share groups' server-side assignor, `simple`, placing partitions as Kafka 4.x's
SimpleAssignor for share groups does (KIP-932). Unlike a consumer group's, several members may
be given the same partition: a share partition hands each record to one consumer at a time.

Homogeneous group (every member subscribes to the same topics), over the subscribed partitions
P and members M, with `desired` = ceil(|P| / |M|):

1. each member is hashed onto one partition: P[|javaHash(member id) % |P||] (so with more
   members than partitions, partitions are shared);
2. members keep partitions of their current assignment that step 1 left to nobody, up to
   `desired` partitions each (stickiness);
3. partitions still without a member are dealt round-robin over the members, a member taking
   one while it holds at most `desired` (one over, to absorb hash collisions).

Heterogeneous group: each member is hashed onto one partition of its own topics; partitions
that neither the hash nor the current assignment covers are dealt round-robin, per topic, over
that topic's subscribers; members keep the rest of their current assignment on topics they
still subscribe to.

Where Kafka iterates a Java hash set (the subscribed topics, the member ids), the order here is
by topic name and member id, so the same group always gets the same placement.
"""
from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from kcoord.protocol.share_records import Assignment

NAME = "simple"

TP = tuple[UUID, int]


def java_hash(s: str) -> int:
    """Java's String.hashCode (a 32-bit int over UTF-16 code units)."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(s: str) -> list[int]:
    b = s.encode("utf-16-be", "surrogatepass")
    return [(b[i] << 8) | b[i + 1] for i in range(0, len(b), 2)]


def _hashed(member_id: str, partitions: list[TP]) -> TP:
    # Java's remainder keeps the dividend's sign; Math.abs then makes the index positive
    h = java_hash(member_id)
    r = abs(h) % len(partitions)
    return partitions[r]


def assign(subscriptions: Mapping[str, tuple[str, ...]], topics: Mapping[str, tuple[UUID, int]],
           current: Mapping[str, Assignment] | None = None) -> dict[str, Assignment]:
    """member id -> {topic id: partitions}, for every member (an empty assignment when its topics
    do not exist). `subscriptions`: member id -> subscribed topic names; `topics`: topic name ->
    (topic id, number of partitions) of the topics that exist; `current`: each member's current
    target assignment."""
    current = current or {}
    members = sorted(subscriptions)
    if not members:
        return {}
    names = {frozenset(n for n in subscriptions[m] if n in topics) for m in members}
    if len(names) == 1:
        final = _homogeneous(members, sorted(next(iter(names))), topics, current)
    else:
        final = _heterogeneous(members, subscriptions, topics, current)
    out: dict[str, Assignment] = {}
    for m in members:
        a: dict[UUID, set[int]] = {}
        for t, p in final.get(m, ()):
            a.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(ps) for t, ps in a.items()}
    return out


def _partitions(names: list[str], topics: Mapping[str, tuple[UUID, int]]) -> list[TP]:
    return [(topics[n][0], p) for n in names for p in range(topics[n][1])]


def _current_by_partition(members: list[str], current: Mapping[str, Assignment]) -> dict[TP, list[str]]:
    out: dict[TP, list[str]] = {}
    for m in members:
        for t, ps in current.get(m, {}).items():
            for p in sorted(ps):
                out.setdefault((t, p), []).append(m)
    return out


def _homogeneous(members: list[str], names: list[str], topics: Mapping[str, tuple[UUID, int]],
                 current: Mapping[str, Assignment]) -> dict[str, set[TP]]:
    targets = _partitions(names, topics)
    if not targets:
        return {}
    desired = -(-len(targets) // len(members))
    hashed: dict[TP, list[str]] = {}
    for m in members:
        hashed.setdefault(_hashed(m, targets), []).append(m)
    final: dict[str, set[TP]] = {m: set() for m in members}
    covered: set[TP] = set()
    for tp, ms in hashed.items():
        for m in ms:
            final[m].add(tp)
        covered.add(tp)
    subscribed = {topics[n][0] for n in names}
    for tp, ms in sorted(_current_by_partition(members, current).items(), key=lambda kv: _order(kv[0], targets)):
        if tp[0] not in subscribed or tp in hashed:
            continue
        for m in ms:
            if len(final[m]) < desired:
                final[m].add(tp)
                covered.add(tp)
    _deal_with_count(members, [tp for tp in targets if tp not in covered], final, desired)
    return final


def _order(tp: TP, targets: list[TP]) -> tuple[int, str, int]:
    try:
        return (targets.index(tp), "", 0)
    except ValueError:
        return (len(targets), str(tp[0]), tp[1])


def _deal_with_count(members: list[str], partitions: list[TP], final: dict[str, set[TP]], desired: int) -> None:
    """Round-robin: a member takes a partition while it holds at most `desired`; one that holds
    more leaves the deal."""
    dealing = list(members)
    i = 0
    pending = list(partitions)
    while pending and dealing:
        if i >= len(dealing):
            i = 0
        m = dealing[i]
        if len(final[m]) <= desired:
            final[m].add(pending.pop(0))
            i += 1
        else:
            dealing.pop(i)


def _heterogeneous(members: list[str], subscriptions: Mapping[str, tuple[str, ...]],
                   topics: Mapping[str, tuple[UUID, int]], current: Mapping[str, Assignment]) -> dict[str, set[TP]]:
    own = {m: _partitions(sorted(n for n in set(subscriptions[m]) if n in topics), topics) for m in members}
    subscribers: dict[UUID, list[str]] = {}
    for m in members:
        for t in dict.fromkeys(t for t, _ in own[m]):
            subscribers.setdefault(t, []).append(m)
    new: dict[TP, list[str]] = {}
    for m in members:
        if own[m]:
            new.setdefault(_hashed(m, own[m]), []).append(m)
    hashed = set(new)
    # what members hold now counts only where they still subscribe (a partition held by a member
    # that left its topic is to be placed again)
    now = {tp: kept for tp, ms in _current_by_partition(members, current).items()
           if (kept := [m for m in ms if m in subscribers.get(tp[0], ())])}
    targets = list(dict.fromkeys(tp for m in members for tp in own[m]))
    unassigned: dict[UUID, list[TP]] = {}
    for tp in targets:
        if tp not in hashed and tp not in now:
            unassigned.setdefault(tp[0], []).append(tp)
    for t, tps in unassigned.items():
        subs = subscribers[t]
        for k, tp in enumerate(tps):
            new.setdefault(tp, []).append(subs[k % len(subs)])
    final: dict[str, set[TP]] = {m: set() for m in members}
    for tp, ms in new.items():
        for m in ms:
            final[m].add(tp)
    for tp, ms in now.items():
        if tp in new:
            continue
        for m in ms:
            final[m].add(tp)
    return final
