"""Leader election rules of Kafka's ZooKeeper-mode partition state machine, one function per
reason, each a pure function of the assignment, the ISR and the live brokers:

| reason             | the new leader                                           | the new ISR                      |
|--------------------|----------------------------------------------------------|----------------------------------|
| new partition      | first live replica in assignment order                   | the live replicas                |
| offline (clean)    | first replica in assignment order that is live and in ISR| the ISR's live members           |
| offline (unclean)  | (no live ISR member, unclean.leader.election.enable)     | the new leader alone             |
|                    |  first live replica in assignment order                  |                                  |
| preferred replica  | the first replica, if live and in ISR                    | unchanged                        |
| controlled shutdown| first replica in assignment order live, in ISR and not   | the ISR without the brokers      |
|                    |  shutting down                                           |  shutting down                   |

None: no replica qualifies (the partition stays or goes offline, leader -1).
"""
from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple


class Election(NamedTuple):
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def new_partition(replicas: Sequence[int], live: Collection[int]) -> Election | None:
    alive = tuple(r for r in replicas if r in live)
    return Election(alive[0], alive) if alive else None


def offline(replicas: Sequence[int], isr: Sequence[int], live: Collection[int], unclean: bool) -> Election | None:
    for r in replicas:
        if r in live and r in isr:
            return Election(r, tuple(i for i in isr if i in live))
    if unclean:
        for r in replicas:
            if r in live:
                return Election(r, (r,), unclean=True)
    return None


def preferred(replicas: Sequence[int], isr: Sequence[int], live: Collection[int]) -> Election | None:
    if replicas and replicas[0] in live and replicas[0] in isr:
        return Election(replicas[0], tuple(isr))
    return None


def controlled_shutdown(replicas: Sequence[int], isr: Sequence[int], live: Collection[int],
                        shutting_down: Collection[int]) -> Election | None:
    for r in replicas:
        if r in live and r in isr and r not in shutting_down:
            return Election(r, tuple(i for i in isr if i not in shutting_down))
    return None


def without_replica(leader: int, isr: Sequence[int], gone: int) -> tuple[int, tuple[int, ...]]:
    """A replica's broker went away (the replica state machine's OfflineReplica): it leaves the
    ISR, except that the last member stays (so an unclean election can be told from a clean
    one later); a leader that went leaves the partition leaderless (-1)."""
    new_isr = tuple(isr) if len(isr) == 1 else tuple(i for i in isr if i != gone)
    return (-1 if leader == gone else leader), new_isr


def imbalanced(leaders: dict[tuple[str, int], int], preferred_of: dict[tuple[str, int], int],
               percentage: int) -> list[tuple[str, int]]:
    """auto.leader.rebalance.enable: the partitions to move back to their preferred replica,
    for each broker whose share of partitions led by another (of those it is preferred for)
    is above leader.imbalance.per.broker.percentage."""
    by_broker: dict[int, list[tuple[str, int]]] = {}
    for tp, pref in preferred_of.items():
        by_broker.setdefault(pref, []).append(tp)
    out = []
    for _broker, tps in sorted(by_broker.items()):
        off = [tp for tp in tps if leaders.get(tp) != preferred_of[tp]]
        if off and len(off) * 100 / len(tps) > percentage:
            out.extend(sorted(off))
    return out
