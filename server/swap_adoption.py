"""Putting in place the segments the compaction sidecar commits (storage/swap.py): every
kcoord.compaction.handoff.check.ms, for every topic whose cleanup.policy has `compact`, once
__consumer_offsets is loaded (the loaders read segments across awaits), and
__transaction_state's once the transaction coordinator has loaded it too.

Built by the composition root (server/node.py) with the parts it reads; the node starts it with
its background tasks."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcoord.protocol.topics import TXN_TOPIC

if TYPE_CHECKING:
    from kcoord.server.config_layers import BrokerConfigs
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.broker")


async def adopt_swaps_after(loading: asyncio.Future[None], interval_ms: int, topics: TopicRegistry,
                            configs: BrokerConfigs, logs: LogManager, txn_loaded: Callable[[], bool]) -> None:
    """`txn_loaded`: whether the transaction coordinator exists and has loaded its state."""
    await loading
    interval = interval_ms / 1000
    while True:
        await asyncio.sleep(interval)
        for topic in list(topics.topics.values()):
            partitions = logs.partitions(topic.name)  # those with a log
            if not partitions or (topic.name == TXN_TOPIC and not txn_loaded()):
                continue
            if "compact" not in {p.lower() for p in configs.topic_values(topic)["cleanup.policy"]}:
                continue
            for p in partitions:
                plog = logs.existing(topic.name, p)
                if plog is None:
                    continue
                try:
                    plog.adopt_swaps()
                except OSError as e:  # the old segments stay in place: nothing is lost
                    log.error("Could not swap in compacted segments of %s: %s", plog.path, e)
