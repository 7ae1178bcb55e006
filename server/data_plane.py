"""State and helpers the data-plane handlers (Produce, Fetch, ListOffsets, InitProducerId)
share: the fetch purgatory, producer state, effective topic configs and leader-epoch checks.

kcoord is a single broker: it leads every partition at leader epoch 0 and the high watermark is
the log end offset; the last stable offset is the first offset of the oldest open transaction
(server/partition_txns.py), the log end offset when none is open.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.config_catalogue import LONG_MAX
from kcoord.server.fetch_sessions import FetchSessionCache
from kcoord.server.partition_txns import PartitionTxnStates
from kcoord.server.producers import ProducerIdManager, ProducerStates
from kcoord.server.purgatory import Purgatory
from kcoord.server.topics import Topic

if TYPE_CHECKING:
    from pathlib import Path

    from kcoord.server.clock import Clock
    from kcoord.server.config import Config
    from kcoord.server.config_layers import BrokerConfigs
    from kcoord.storage.log import PartitionLog
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.data")

LEADER_EPOCH = 0
NO_EPOCH = -1


class DataPlane:
    """Per-node state of the data plane (built by the composition root, server/node.py)."""

    def __init__(self, clock: Clock, log_dir: Path, config: Config) -> None:
        self.fetch_purgatory = Purgatory(clock, "fetch")
        self.producer_ids = ProducerIdManager(log_dir)
        self.producers = ProducerStates(self.producer_ids)
        self.txns = PartitionTxnStates()  # open and aborted transactions per partition
        self.parked: set = set()  # DelayedFetch operations waiting in the purgatory
        # incremental fetch sessions (KIP-227, server/fetch_sessions.py)
        self.fetch_sessions = FetchSessionCache(clock.now_ms, config["max.incremental.fetch.session.cache.slots"],
                                                config["kcoord.min.incremental.fetch.session.eviction.ms"])

    def complete_parked(self) -> int:
        """Answer every parked long poll now (with what is there), e.g. before shutdown so
        connections are not held for their max_wait_ms. Returns how many were answered."""
        ops = list(self.parked)
        return sum(1 for op in ops if op.force_complete())

    def appended(self, topic: str, partition: int) -> None:
        """A log grew (or its start moved): retry the long polls watching it."""
        self.fetch_purgatory.check_and_complete((topic, partition))
        self.fetch_sessions.touched(topic, partition)


# ---------------------------------------------------------------------------- configs


def cleanup_policy_of(configs: BrokerConfigs, topic: Topic) -> set[str]:
    return {p.lower() for p in configs.topic_values(topic)["cleanup.policy"]}


def timestamp_bounds_of(v: dict[str, Any]) -> tuple[int, int]:
    """(before, after): how far a CreateTime timestamp may lie behind / ahead of the broker's
    clock, from a topic's effective values (BrokerConfigs.topic_values). LogConfig: the
    deprecated difference.max.ms applies while a bound is at its default."""
    diff = v["message.timestamp.difference.max.ms"]
    before, after = v["message.timestamp.before.max.ms"], v["message.timestamp.after.max.ms"]
    return (before if before != LONG_MAX else diff), (after if after != LONG_MAX else diff)


def apply_configs_to_logs(configs: BrokerConfigs, logs: LogManager, topic: Topic) -> None:
    """A topic's effective configs changed: what the open logs hold takes the new values
    (segment.bytes, segment.ms and segment.jitter.ms apply from the next append); the rest is
    read per request."""
    values = configs.topic_values(topic)
    size, roll_ms = values["segment.bytes"], (values["segment.ms"], values["segment.jitter.ms"])
    for p in range(topic.partitions):
        plog = logs.existing(topic.name, p)
        if plog is not None:
            plog.segment_bytes = size
            plog.segment_ms, plog.segment_jitter_ms = roll_ms
        elif topic.name == OFFSETS_TOPIC:  # declared, created at first use: with the new size
            logs.declare(topic.name, p, segment_bytes=size, topic_id=topic.topic_id, roll_ms=roll_ms)


def leader_epoch_error(current_leader_epoch: int, ours: int = LEADER_EPOCH) -> ErrorCode | None:
    """Kafka's check of a client's current leader epoch (-1: not given) against ours (0 on a
    single node, the partition's replica's otherwise)."""
    if current_leader_epoch == NO_EPOCH or current_leader_epoch == ours:
        return None
    if current_leader_epoch > ours:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH


def not_leader(cluster: Any, topic: str, partition: int) -> bool:
    """On a cluster node: the partition exists in the cluster and another node leads it (or
    this one is fenced); the data path answers NOT_LEADER_OR_FOLLOWER (server/cluster/node.py)."""
    t = cluster.topic(topic)
    return t is not None and partition in t.replicas and not cluster.leads(topic, partition)


def log_of(logs: LogManager, topic: Topic, partition: int) -> PartitionLog | None:
    """The partition's log, or None for a partition the topic does not have."""
    if partition < 0 or partition >= topic.partitions:
        return None
    return logs.get(topic.name, partition)
