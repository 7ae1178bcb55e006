"""A cluster node's local replicas: each partition this node hosts gets a local log (its topic
created in the node's registry with the cluster's topic id and configs); a deleted topic's
logs are deleted, and so are the logs of partitions reassigned away from this node, and, once
the metadata is read at start-up, those of topics deleted (or deleted and created again) while
the node was down (stray_logs.py)."""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kcoord.protocol.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from kcoord.server.cluster import stray_logs
from kcoord.server.cluster.metadata_cache import MetadataCache
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.deferred import wait
from kcoord.storage.files import fsync_dir
from kcoord.storage.log_deletion import remove_delete_dirs, rename_for_delete

if TYPE_CHECKING:
    from kcoord.server.node import TopicLogs
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.cluster.replicas")


class LocalReplicas:
    """Built by the composition root (server/node.py) with the node's current topic registry,
    topic creation (TopicLogs), logs and topic deletion, each an accessor of its current parts."""

    def __init__(self, cache: MetadataCache, topics: Callable[[], TopicRegistry], topic_logs: Callable[[], TopicLogs],
                 logs: Callable[[], LogManager], delete_topic: Callable[[Any], Any],
                 data_plane: Callable[[], Any] | None = None, log_dir: str | None = None,
                 cluster_id: Callable[[], str] = lambda: "", configured_cluster_id: str = "") -> None:
        self.cache = cache
        self.topics = topics
        self.topic_logs = topic_logs  # create_topic, add_partitions, create_logs
        self.logs = logs
        self.delete_topic = delete_topic  # server/topic_deletion.py: a Deferred
        self.data_plane = data_plane  # producer and transaction state of a removed log, its long polls
        self.log_dir = log_dir  # meta.properties: whether the data is this cluster's (stray_logs.py)
        self.cluster_id = cluster_id  # /cluster/id, known before the first apply
        self.configured_cluster_id = configured_cluster_id
        self.ours: bool | None = None
        self.removed: set[tuple[str, int]] = set()  # logs deleted here after a reassignment moved them

    def _decide(self) -> bool:
        """Whether the log directory's data is this cluster's, decided once, before this node
        creates any topic of the cluster's."""
        if self.ours is None:
            self.ours = self.log_dir is not None and stray_logs.belongs(
                self.log_dir, self.cluster_id(), self.topics().topics, self.configured_cluster_id)
        return self.ours

    def apply(self, states: list[PartitionState], endpoints: Mapping[int, tuple[str, int]]) -> None:
        self._decide()
        for name in dict.fromkeys(s.topic for s in states):
            assignment = self.cache.topics.get(name)
            if assignment is None:
                continue
            local = self.topics().get(name)
            if local is not None and stray_logs.recreated(local, assignment) and self._decide():
                # deleted and created again while this node was away: the old topic's logs go
                log.info("Topic %s has id %s in the cluster, %s here: deleting the local one", name,
                         assignment.topic_id, local.topic_id)
                self._forget_recreated(local)
                local = None
            try:
                if local is None:
                    self.topic_logs().create_topic(name, assignment.partitions, self.cache.topic_configs.get(name, {}),
                                                   internal=name in (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC),
                                                   topic_id=assignment.topic_id)
                    continue
                if local.topic_id != assignment.topic_id:
                    self._adopt_id(local, assignment.topic_id)
                if local.partitions < assignment.partitions:
                    self.topic_logs().add_partitions(local, assignment.partitions)
                elif any((s.topic, s.partition) in self.removed for s in states if s.topic == name):
                    # hosted again after being reassigned away (its log was deleted then)
                    self.removed -= {(s.topic, s.partition) for s in states if s.topic == name}
                    self.topic_logs().create_logs(local)
            except Exception:  # noqa: BLE001 - the next change tries again
                log.exception("Could not create the local replicas of %s", name)

    def _adopt_id(self, topic: Any, topic_id: Any) -> None:
        """The topic exists here under another id (__consumer_offsets, which every node
        creates at start-up, or a topic made before the node joined): the cluster's id wins."""
        registry = self.topics()
        registry.by_id.pop(topic.topic_id, None)
        topic.topic_id = topic_id
        registry.by_id[topic_id] = topic
        registry.changes += 1
        registry.save()
        self.logs().topic_ids[topic.name] = topic_id

    def _forget_recreated(self, local: Any) -> None:
        """The old topic leaves the registry and its logs go (as a reassigned-away replica's),
        so the cluster's topic of that name is created here at once. Committed offsets are
        the group coordinators' business (they follow the cluster's topics), not this node's."""
        registry = self.topics()
        registry.begin_delete(local)  # a crash from here: the next start-up finishes the deletion
        self._remove_logs([(local.name, p) for p in range(local.partitions)])
        registry.end_delete(local.topic_id)

    def remove_strays(self) -> list[str]:
        """Once the cluster's metadata is read: local topics the cluster no longer has (deleted
        while this node was down) are deleted, and those it has under another id forgotten, if
        the data is this cluster's."""
        registry = self.topics()
        names = stray_logs.gone(registry.topics, self.cache.topics)
        replaced = [t for n, t in registry.topics.items()
                    if n in self.cache.topics and stray_logs.recreated(t, self.cache.topics[n])]
        if not (names or replaced) or not self._decide():
            return []
        for name in names:
            local = registry.get(name)
            if local is not None:
                log.info("Topic %s was deleted while this node was away: deleting its logs", name)
                asyncio.ensure_future(self._delete(local))
        for local in replaced:
            log.info("Topic %s was deleted and created again while this node was away: deleting the old one's logs",
                     local.name)
            self._forget_recreated(local)
        return names + [t.name for t in replaced]

    def stop_replicas(self, topic_partitions: Iterable[tuple[str, int]], delete: bool) -> None:
        if not delete:
            return  # no longer hosted for now (no state): the log stays
        topic_partitions = list(topic_partitions)
        for name in dict.fromkeys(t for t, _ in topic_partitions):
            local = self.topics().get(name)
            if local is not None and name not in self.cache.topics:
                asyncio.ensure_future(self._delete(local))
        moved = [(t, p) for t, p in topic_partitions if t in self.cache.topics]
        if moved:
            self._remove_logs(moved)

    def _remove_logs(self, topic_partitions: list[tuple[str, int]]) -> None:
        """Partitions reassigned away from this node (the topic lives on elsewhere): their logs
        are closed, renamed `-delete` (durable once the directory is fsynced) and removed in a
        worker thread; a crash in between leaves a `-delete` directory the next start-up
        removes. The topic stays in the node's registry (offsets committed to it are kept)."""
        logs = self.logs()
        dp = self.data_plane() if self.data_plane is not None else None
        names = []
        for topic, p in topic_partitions:
            self.removed.add((topic, p))
            if logs.remove(topic, p) is None and not os.path.isdir(os.path.join(logs.log_dir, f"{topic}-{p}")):
                continue
            if dp is not None:
                dp.producers.forget_partition(topic, p)
                dp.txns.forget_partition(topic, p)
                dp.appended(topic, p)  # parked long polls on it answer now
            try:
                name = rename_for_delete(logs.log_dir, topic, p)
            except OSError as e:
                log.error("Could not set aside the log of %s-%d: %s", topic, p, e)
                continue
            if name is not None:
                names.append(name)
                log.info("Deleting the log of %s-%d: its replica moved to other nodes", topic, p)
        if names:
            fsync_dir(logs.log_dir)
            logs.checkpoint_log_start_offsets()
            asyncio.ensure_future(asyncio.to_thread(remove_delete_dirs, logs.log_dir, names))

    async def _delete(self, topic: Any) -> None:
        try:
            await wait(self.delete_topic(topic))  # server/topic_deletion.py
            log.info("Deleted the local replicas of %s", topic.name)
        except Exception:  # noqa: BLE001 - a restart finishes it (server/topic_deletion.py)
            log.exception("Could not delete the local replicas of %s", topic.name)
