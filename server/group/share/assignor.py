"""The share groups' server-side assignor, `simple` (Kafka's SimpleAssignor for share groups):
unlike a consumer group's, several members may be given the same partition, since a share
partition hands each record to one consumer at a time anyway.

Placement, per topic, over the members subscribed to it (sorted by member id) and its
partitions (in order): each partition gets ceil(members / partitions) members, at least one,
dealt round-robin, so every subscribed member gets a partition and the partitions are spread
evenly: 1 member takes both partitions of a 2-partition topic, 2 members take one each, 3
members: both partitions are read by two members (one member reads both). Successive topics
continue the deal where the previous one stopped, so members share the load across topics.
The result depends on the members and partitions only, so it is the same on every computation
(a member keeps its partitions while the group does not change).
"""
from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from protocol.share_records import Assignment

NAME = "simple"


def assign(subscriptions: Mapping[str, tuple[str, ...]],
           topics: Mapping[str, tuple[UUID, int]]) -> dict[str, Assignment]:
    """member id -> {topic id: partitions}, for every member (an empty assignment for a member
    whose topics do not exist). `subscriptions`: member id -> subscribed topic names;
    `topics`: topic name -> (topic id, number of partitions) of the topics that exist."""
    out: dict[str, dict[UUID, set[int]]] = {m: {} for m in subscriptions}
    turn = 0
    for name in sorted(topics):
        topic_id, n = topics[name]
        members = sorted(m for m, names in subscriptions.items() if name in names)
        if not members or n <= 0:
            continue
        per_partition = max(1, -(-len(members) // n))
        for k in range(per_partition * n):
            member = members[(turn + k) % len(members)]
            out[member].setdefault(topic_id, set()).add(k % n)
        turn = (turn + per_partition * n) % len(members)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}
