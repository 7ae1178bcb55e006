"""Topic retention: Kafka's log cleaner of `cleanup.policy=delete` topics. Every
log.retention.check.interval.ms a pass deletes the segments retention.ms (time) and
retention.bytes (size) allow, topic configs over the broker defaults, and expires idle
producer state. __consumer_offsets is not touched (the group coordinator manages it).

Built by the composition root (server/node.py) with the parts it reads; the node starts its
loop with its background tasks."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.producers import PRODUCER_ID_EXPIRATION_MS

if TYPE_CHECKING:
    from kcoord.server.clock import Clock
    from kcoord.server.config_layers import BrokerConfigs
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.data")


class TopicRetention:
    def __init__(self, topics: TopicRegistry, configs: BrokerConfigs, logs: LogManager,
                 data_plane: Callable[[], DataPlane], clock: Clock) -> None:
        self.topics = topics
        self.configs = configs
        self.logs = logs
        self.data_plane = data_plane  # producer and transaction state, long polls (built at its first use)
        self.clock = clock

    def run(self, now_ms: int | None = None) -> int:
        """One pass over every topic with cleanup.policy delete; returns the segments deleted."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        dp = self.data_plane()
        deleted = 0
        for topic in list(self.topics.topics.values()):
            values = self.configs.topic_values(topic)
            if topic.name == OFFSETS_TOPIC or "delete" not in {p.lower() for p in values["cleanup.policy"]}:
                continue
            r_ms, r_bytes = values["retention.ms"], values["retention.bytes"]
            if r_ms < 0 and r_bytes < 0:
                continue
            for p in range(topic.partitions):
                plog = self.logs.get(topic.name, p)
                if plog is None:
                    continue
                n = plog.apply_retention(now, r_ms, r_bytes)
                if n:
                    deleted += n
                    # producers keep their sequences until they expire (below), as in Kafka
                    txns = dp.txns.loaded(topic.name, p)
                    if txns is not None:
                        txns.evict_before(plog.log_start_offset)
                    dp.appended(topic.name, p)  # long polls below the new log start must answer
        for _, state in dp.producers.items():
            state.expire(now, PRODUCER_ID_EXPIRATION_MS)
        return deleted

    async def loop(self, interval_ms: int) -> None:
        """A pass now, then one every interval (the root starts it one interval after start-up,
        server/node.py)."""
        while True:
            try:
                self.run()
            except Exception:  # noqa: BLE001 - retried at the next interval
                log.exception("Topic retention pass failed")
            await asyncio.sleep(interval_ms / 1000.0)
