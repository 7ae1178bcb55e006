"""KIP-392, fetch from the closest replica: which replica a consumer's Fetch (v11+, with its
rack_id) should read from, decided by the partition's leader when `replica.selector.class` is
set. Kafka's ReplicaManager.findPreferredReadReplica with its RackAwareReplicaSelector:

- candidates: the leader, and every follower in the ISR whose log end offset has reached the
  fetch offset (a lagging follower is never chosen) and that is a live broker;
- no client rack, or the leader in the client's rack: the leader (no preferred replica
  answered); else among the candidates in the client's rack the most caught up one (highest
  log end offset, then the most recently caught up, then the highest broker id); none in the
  rack: the leader.

The answer is a broker id other than the leader's, or None (read here). The fetch handler
(server/handlers/fetch.py) answers a chosen replica with preferred_read_replica and no records;
the follower then serves the consumer's fetches up to the high watermark it has learnt from the
leader's fetch responses."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
SELECTORS = ("", RACK_AWARE)  # "" (Kafka's null): consumers read from the leader only


def preferred_read_replica(selector: str, replica: Any, client_rack: str | None, fetch_offset: int,
                           racks: Mapping[int, str | None], now_ms: int) -> int | None:
    """The follower the leader's `replica` (server/replication/partition.py) tells a consumer
    in `client_rack` to read from, or None; `racks`: each live broker's broker.rack."""
    if selector != RACK_AWARE or not client_rack or not replica.is_leader:
        return None
    if racks.get(replica.broker_id) == client_rack:
        return None
    best: tuple[int, int, int] | None = None
    for rid, f in replica.followers.items():
        if rid not in replica.isr or rid not in racks or racks[rid] != client_rack:
            continue
        if f.log_end_offset < fetch_offset:
            continue
        key = (f.log_end_offset, -(now_ms - f.last_caught_up_ms), rid)
        if best is None or key > best:
            best = key
    return None if best is None else best[2]


__all__ = ["RACK_AWARE", "SELECTORS", "preferred_read_replica"]
