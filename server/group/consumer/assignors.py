"""The server-side assignors of group.consumer.assignors (Kafka's ConsumerGroupPartitionAssignor):
`uniform` (the default) and `range`.

Both take the group as a GroupSpec: each member's subscribed topic ids, its instance id and
its current target assignment, and the subscribed topics' partition counts; both return each
member's new target assignment.

uniform: every member ends with floor or ceil of its share of the partitions it can take,
keeping as many of its current partitions as that allows (sticky). With heterogeneous
subscriptions a partition goes to the subscribed member holding fewest, and partitions move
only while that lowers the spread between two members who could both hold them.

range: per topic, consecutive partition ranges handed to the subscribed members in order
(static members by instance id first, then member ids), so members get the same partition
numbers of co-partitioned topics, and a static member keeps its range across restarts.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import UUID

from kcoord.protocol.coordinator_records import Assignment


class PartitionAssignorError(Exception):
    pass


@dataclass(slots=True)
class MemberSpec:
    topics: frozenset[UUID]
    instance_id: str | None = None
    current: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class GroupSpec:
    members: dict[str, MemberSpec]
    partitions: dict[UUID, int]  # subscribed topic id -> partition count
    homogeneous: bool = True


Assignor = Callable[[GroupSpec], dict[str, Assignment]]


def _freeze(a: dict[UUID, set[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in a.items() if ps}


def uniform(spec: GroupSpec) -> dict[str, Assignment]:
    if not spec.members:
        return {}
    if spec.homogeneous:
        return _uniform_homogeneous(spec)
    return _uniform_heterogeneous(spec)


def _uniform_homogeneous(spec: GroupSpec) -> dict[str, Assignment]:
    topics = next(iter(spec.members.values())).topics
    if not topics:
        return {m: {} for m in spec.members}
    total = 0
    for t in topics:
        n = spec.partitions.get(t, -1)
        if n < 0:
            raise PartitionAssignorError(f"members are subscribed to topic {t}, which does not exist")
        total += n
    n_members = len(spec.members)
    quota, extra = divmod(total, n_members)
    # members that hold more than the minimum keep the extra slots first (less movement)
    order = sorted(spec.members, key=lambda m: -sum(len(ps) for t, ps in spec.members[m].current.items()
                                                     if t in topics))
    kept: dict[str, dict[UUID, set[int]]] = {}
    owned: set[tuple[UUID, int]] = set()
    room: list[tuple[str, int]] = []
    for mid in order:
        cap = quota + (1 if extra > 0 else 0)
        if extra > 0:
            extra -= 1
        mine: dict[UUID, set[int]] = {}
        for t, ps in spec.members[mid].current.items():
            if t not in topics:
                continue
            n = spec.partitions[t]
            for p in sorted(ps):
                if cap == 0:
                    break
                if p < n and (t, p) not in owned:
                    mine.setdefault(t, set()).add(p)
                    owned.add((t, p))
                    cap -= 1
        kept[mid] = mine
        if cap:
            room.append((mid, cap))
    free = [(t, p) for t in sorted(topics) for p in range(spec.partitions[t]) if (t, p) not in owned]
    i = 0
    for mid, cap in room:
        mine = kept[mid]
        for t, p in free[i:i + cap]:
            mine.setdefault(t, set()).add(p)
        i += cap
    if i < len(free):
        raise PartitionAssignorError("partitions were left unassigned")
    return {m: _freeze(a) for m, a in kept.items()}


def _uniform_heterogeneous(spec: GroupSpec) -> dict[str, Assignment]:
    for mid, m in spec.members.items():
        for t in m.topics:
            if spec.partitions.get(t, -1) < 0:
                raise PartitionAssignorError(f"member {mid} is subscribed to topic {t}, which does not exist")
    subscribers: dict[UUID, list[str]] = {}
    for mid in sorted(spec.members):
        for t in spec.members[mid].topics:
            subscribers.setdefault(t, []).append(mid)
    owner: dict[tuple[UUID, int], str] = {}
    held: dict[str, dict[UUID, set[int]]] = {m: {} for m in spec.members}
    counts = dict.fromkeys(spec.members, 0)
    # 1. keep current partitions still subscribed and existing
    for mid in sorted(spec.members):
        m = spec.members[mid]
        for t, ps in m.current.items():
            if t not in m.topics:
                continue
            for p in ps:
                if p < spec.partitions[t] and (t, p) not in owner:
                    owner[(t, p)] = mid
                    held[mid].setdefault(t, set()).add(p)
                    counts[mid] += 1
    # 2. free partitions to the subscriber holding fewest; topics with fewest subscribers first
    for t in sorted(subscribers, key=lambda t: (len(subscribers[t]), str(t))):
        heap = [(counts[m], m) for m in subscribers[t]]
        heapq.heapify(heap)
        for p in range(spec.partitions[t]):
            if (t, p) in owner:
                continue
            while True:  # skip stale heap entries
                c, m = heapq.heappop(heap)
                if c == counts[m]:
                    break
            owner[(t, p)] = m
            held[m].setdefault(t, set()).add(p)
            counts[m] += 1
            heapq.heappush(heap, (counts[m], m))
    # 3. balance: move a partition from a member to a co-subscriber holding two or more fewer
    moved = True
    while moved:
        moved = False
        for t, members in subscribers.items():
            if len(members) < 2:
                continue
            for p in range(spec.partitions[t]):
                src = owner[(t, p)]
                dst = min(members, key=lambda x: (counts[x], x))
                if counts[src] - counts[dst] >= 2:
                    held[src][t].discard(p)
                    held[dst].setdefault(t, set()).add(p)
                    owner[(t, p)] = dst
                    counts[src] -= 1
                    counts[dst] += 1
                    moved = True
    return {m: _freeze(a) for m, a in held.items()}


def _range_order(spec: GroupSpec) -> list[str]:
    def key(mid: str) -> tuple[int, str]:
        inst = spec.members[mid].instance_id
        return (0, inst) if inst is not None else (1, mid)

    return sorted(spec.members, key=key)


def range_(spec: GroupSpec) -> dict[str, Assignment]:
    if not spec.members:
        return {}
    order = _range_order(spec)
    subscribers: dict[UUID, list[str]] = {}
    for mid in order:
        for t in spec.members[mid].topics:
            if spec.partitions.get(t, -1) < 0:
                raise PartitionAssignorError(f"member {mid} is subscribed to topic {t}, which does not exist")
            subscribers.setdefault(t, []).append(mid)
    out: dict[str, dict[UUID, set[int]]] = {m: {} for m in order}
    for t, members in subscribers.items():
        n = spec.partitions[t]
        quota, extra = divmod(n, len(members))
        start = 0
        for i, mid in enumerate(members):
            end = start + quota + (1 if i < extra else 0)
            if end > start:
                out[mid][t] = set(range(start, end))
            start = end
    return {m: _freeze(a) for m, a in out.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}

# Kafka's class names for them (group.consumer.assignors takes either form)
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def assignor_names(configured: list[str]) -> list[str]:
    """group.consumer.assignors -> the assignor names it holds, in order (first = default)."""
    out = []
    for name in configured:
        short = CLASS_NAMES.get(name.strip(), name.strip())
        if short not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {name!r} (known: uniform, range)")
        out.append(short)
    return out
