"""Replica assignment for new topics and partitions across the live brokers, as Kafka's
ZooKeeper-mode admin path assigns them: the first replica of successive partitions walks the
broker list from a random start, the followers are shifted by an amount that grows once per
round of the list, and with racks the list alternates racks and each partition's replicas go
to distinct racks first (docs/cluster.md). Pure functions: the tests give the random start."""
from __future__ import annotations

import random
from collections.abc import Mapping


class AssignmentError(ValueError):
    """The replication factor cannot be met (Kafka: INVALID_REPLICATION_FACTOR)."""


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """The brokers ordered rack by rack in turn (racks sorted, each rack's brokers sorted):
    {0:a,1:a,2:b,3:c} gives [0, 2, 3, 1]."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    order = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        members = by_rack[order[i % len(order)]]
        if members:
            out.append(members.pop(0))
        i += 1
    return out


def assign_replicas(brokers: Mapping[int, str | None], partitions: int, replication_factor: int,
                    start_partition: int = 0, start_index: int = -1, shift: int = -1,
                    rng: random.Random | None = None) -> dict[int, tuple[int, ...]]:
    """partition -> replicas (preferred leader first) for `partitions` new partitions numbered
    from `start_partition`. `brokers`: the live broker ids and their racks (None: no rack).
    Racks count only when every broker has one (Kafka's "safe" mode otherwise)."""
    if partitions <= 0:
        raise ValueError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(  # Kafka's ZooKeeper-mode wording
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random.Random()
    n = len(brokers)
    start = start_index if start_index >= 0 else rng.randrange(n)
    next_shift = shift if shift >= 0 else rng.randrange(n)
    with_racks = all(r is not None for r in brokers.values())
    ordered = rack_alternated({b: str(r) for b, r in brokers.items()}) if with_racks else sorted(brokers)
    n_racks = len(set(brokers.values())) if with_racks else 1
    out: dict[int, tuple[int, ...]] = {}
    for p in range(max(0, start_partition), max(0, start_partition) + partitions):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        replicas = [ordered[first]]
        if not with_racks:
            replicas += [ordered[_replica_index(first, next_shift, j, n)] for j in range(replication_factor - 1)]
        else:
            used_racks = {brokers[ordered[first]]}
            k = 0
            while len(replicas) < replication_factor:
                b = ordered[_replica_index(first, next_shift * n_racks, k, n)]
                k += 1
                if (brokers[b] not in used_racks or len(used_racks) == n_racks) and b not in replicas:
                    replicas.append(b)
                    used_racks.add(brokers[b])
        out[p] = tuple(replicas)
    return out


def check_manual(assignment: Mapping[int, tuple[int, ...]], live: set[int]) -> str | None:
    """Why an explicit assignment (CreateTopics' `assignments`) is refused, or None: each
    partition names distinct registered brokers, every partition as many."""
    sizes = {len(r) for r in assignment.values()}
    for p, replicas in sorted(assignment.items()):
        if not replicas:
            return f"Replica assignment for partition {p} is empty"
        if len(set(replicas)) != len(replicas):
            return f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, replicas))} for partition id {p}."
        unknown = [b for b in replicas if b not in live]
        if unknown:
            return f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}."
    if len(sizes) > 1:
        return "All partitions should have the same number of replicas"
    return None
