"""Logs a node keeps of topics the cluster no longer has: deleted while the node was down, or
deleted and created again under the same name (another topic id). A node learns it once it has
read the cluster's metadata, and deletes them, as Kafka deletes a log whose topic (id) the
metadata no longer has.

Only data that belongs to this cluster is ever deleted: a node whose meta.properties names
another cluster id than /cluster/id (a single node's log directory joining a cluster with its
own topics) keeps everything (its topics are adopted, as before). A node with no topics of its
own yet takes the cluster's id into meta.properties the first time it joins, as a ZooKeeper-mode
Kafka broker writes it, so from then on its logs are this cluster's."""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kcoord.protocol.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from kcoord.server.topics import atomic_write

log = logging.getLogger("kcoord.cluster.strays")

INTERNAL = (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC)


def meta_cluster_id(log_dir: Path) -> str:
    path = Path(log_dir) / "meta.properties"
    if not path.exists():
        return ""
    for line in path.read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.split("=", 1)[1].strip()
    return ""


def belongs(log_dir: Path, cluster_id: str, own_topics: Iterable[str], configured_id: str = "") -> bool:
    """Whether this log directory's data is the cluster's. A directory of another cluster id
    with no topics of its own (not internal ones) is made the cluster's: meta.properties takes
    /cluster/id (unless `cluster.id` is configured)."""
    local = meta_cluster_id(log_dir)
    if local == cluster_id:
        return True
    if any(t not in INTERNAL for t in own_topics):
        log.warning("Log directory %s belongs to cluster %s, not %s: its topics are kept as they are", log_dir,
                    local, cluster_id)
        return False
    if configured_id:
        return False
    path = Path(log_dir) / "meta.properties"
    lines = path.read_text().splitlines() if path.exists() else ["version=1"]
    lines = [ln for ln in lines if not ln.startswith("cluster.id=")] + [f"cluster.id={cluster_id}"]
    atomic_write(path, ("\n".join(lines) + "\n").encode())
    log.info("Log directory %s now belongs to cluster %s", log_dir, cluster_id)
    return True


def gone(local: Mapping[str, Any], cluster: Mapping[str, Any]) -> list[str]:
    """Local topics (not internal ones) the cluster does not have."""
    return sorted(n for n in local if n not in INTERNAL and n not in cluster)


def recreated(local: Any, assignment: Any) -> bool:
    """A local topic of the same name as the cluster's but another id (not an internal one,
    which every node creates itself before it learns the cluster's id)."""
    return local.name not in INTERNAL and local.topic_id != assignment.topic_id
