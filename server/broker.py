"""The broker's state shared by every handler: config, cluster identity, topics, logs and
the group coordinator. Owns start-up (recovery, loading) and orderly shutdown."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from server.config import Config
from server.topics import OFFSETS_TOPIC, Topic, TopicRegistry, load_or_create_meta

if TYPE_CHECKING:
    from server.connection import KafkaConnection

log = logging.getLogger("kcoord.broker")


class Broker:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.log_dir = config.log_dir
        self.topics = TopicRegistry(self.log_dir)
        self.cluster_id = ""
        self.connections: set[KafkaConnection] = set()

    async def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = load_or_create_meta(self.log_dir, self.config.node_id, self.config["cluster.id"])
        self.topics.load()
        if self.topics.get(OFFSETS_TOPIC) is None:
            self.create_topic(
                OFFSETS_TOPIC,
                self.config["offsets.topic.num.partitions"],
                {
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": str(self.config["offsets.topic.segment.bytes"]),
                },
                internal=True,
            )
        log.info("Cluster %s, node %d, %d topics in %s", self.cluster_id, self.config.node_id,
                 len(self.topics.topics), self.log_dir)

    @property
    def offsets_partitions(self) -> int:
        """Kafka uses the existing __consumer_offsets partition count over the setting."""
        t = self.topics.get(OFFSETS_TOPIC)
        return t.partitions if t is not None else self.config["offsets.topic.num.partitions"]

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str], internal: bool = False
    ) -> Topic:
        topic = self.topics.create(name, partitions, configs, internal)
        log.info("Created topic %s with %d partitions, id %s", name, partitions, topic.topic_id)
        return topic

    async def stop(self) -> None:
        log.info("Broker stopped")
