"""The replica manager of a node without replication (until server/replication/ provides the
real one): each partition this node hosts gets a local log (its topic created in the node's
registry with the cluster's topic id and configs), and a deleted topic's logs are deleted.
Leaders serve their local log only."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kcoord.protocol.topics import OFFSETS_TOPIC, TXN_TOPIC
from kcoord.server.cluster.metadata_cache import MetadataCache
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.deferred import wait

if TYPE_CHECKING:
    from kcoord.server.node import TopicLogs
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.cluster.replicas")


class LocalReplicas:
    """Built by the composition root (server/node.py) with the node's current topic registry,
    topic creation (TopicLogs), logs and topic deletion, each an accessor of its current parts."""

    def __init__(self, cache: MetadataCache, topics: Callable[[], TopicRegistry], topic_logs: Callable[[], TopicLogs],
                 logs: Callable[[], LogManager], delete_topic: Callable[[Any], Any]) -> None:
        self.cache = cache
        self.topics = topics
        self.topic_logs = topic_logs  # create_topic, add_partitions
        self.logs = logs
        self.delete_topic = delete_topic  # server/topic_deletion.py: a Deferred

    def apply(self, states: list[PartitionState], endpoints: Mapping[int, tuple[str, int]]) -> None:
        for name in dict.fromkeys(s.topic for s in states):
            assignment = self.cache.topics.get(name)
            if assignment is None:
                continue
            local = self.topics().get(name)
            try:
                if local is None:
                    self.topic_logs().create_topic(name, assignment.partitions, self.cache.topic_configs.get(name, {}),
                                                   internal=name in (OFFSETS_TOPIC, TXN_TOPIC),
                                                   topic_id=assignment.topic_id)
                    continue
                if local.topic_id != assignment.topic_id:
                    self._adopt_id(local, assignment.topic_id)
                if local.partitions < assignment.partitions:
                    self.topic_logs().add_partitions(local, assignment.partitions)
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

    def stop_replicas(self, topic_partitions: Iterable[tuple[str, int]], delete: bool) -> None:
        if not delete:
            return  # without replication a log that is no longer hosted stays (reassignment moves nothing)
        for name in dict.fromkeys(t for t, _ in topic_partitions):
            local = self.topics().get(name)
            if local is not None and name not in self.cache.topics:
                asyncio.ensure_future(self._delete(local))

    async def _delete(self, topic: Any) -> None:
        try:
            await wait(self.delete_topic(topic))  # server/topic_deletion.py
            log.info("Deleted the local replicas of %s", topic.name)
        except Exception:  # noqa: BLE001 - a restart finishes it (server/topic_deletion.py)
            log.exception("Could not delete the local replicas of %s", topic.name)
