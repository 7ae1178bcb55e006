"""CreatePartitions v0-v3, as Kafka's controller answers it (ReplicationControlManager
.createPartitions), for the only broker there is; on a cluster node (zookeeper.connect) through
ZooKeeper, as Kafka's ZooKeeper-mode admin path.

- A topic named twice: INVALID_REQUEST "Duplicate topic name."; an unknown topic:
  UNKNOWN_TOPIC_OR_PARTITION; an internal topic (`__consumer_offsets`, whose partition count
  routes every group): INVALID_TOPIC_EXCEPTION.
- The same count: INVALID_PARTITIONS "Topic already has N partition(s)."; a smaller one:
  INVALID_PARTITIONS "The topic T currently has N partition(s); M would not be an increase."
- Assignments, when given: one per new partition, each naming this broker exactly once, else
  INVALID_REPLICA_ASSIGNMENT with Kafka's message.
- More than 10,000 new partitions in one request: POLICY_VIOLATION (Kafka's bound on the
  records of one controller operation).
- validate_only answers as the real request would and changes nothing.

The new count is written to the registry (atomically) before the new partitions' logs are
created; a start-up creates any log the registry lists and the disk lacks, so a crash between
the two loses nothing. Consumers see the new partitions in their next Metadata.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import CreatePartitionsResponse

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine
from kcoord.server.handlers.create_topics import MAX_RECORDS_PER_OPERATION
from kcoord.server.quotas.mutation import mutation_quota
from kcoord.server.topics import Topic

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.node import TopicLogs
    from kcoord.server.quotas.manager import QuotaManager
    from kcoord.server.topics import TopicRegistry

log = logging.getLogger("kcoord.topics")

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def _check_assignment(replicas: list[int], node: int) -> None:
    """Kafka's validateManualPartitionAssignment against a cluster of one broker."""
    if not replicas:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(replicas):
        if broker_id != node:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker {broker_id}, but no such broker "
                             "is registered.")
        if broker_id == previous:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {previous} more than once.")
        previous = broker_id
    if len(replicas) != 1:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                         "but this is not consistent with previous partitions, which have 1 replica(s).")


class CreatePartitionsApi:
    """The handlers of create_partitions.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, topics: TopicRegistry, config: Config, quotas: QuotaManager, topic_logs: TopicLogs,
                 cluster: Callable[[], Any]) -> None:
        self.topics = topics
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None (server/cluster/)
        self.config = config
        self.quotas = quotas
        self.topic_logs = topic_logs

    def _plan(self, ctx: RequestContext, t: Any) -> Topic:
        """Validate one topic's request; returns the topic or raises KafkaError."""
        topic = self.topics.get(t.name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if topic.internal:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Cannot change the number of partitions of internal topic {topic.name}")
        current = topic.partitions
        if t.count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
        if t.count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"The topic {t.name} currently has {current} partition(s); {t.count} would not be an "
                             "increase.")
        additional = t.count - current
        if t.assignments is not None:
            if len(t.assignments) != additional:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {additional} additional partition(s), but only "
                                 f"{len(t.assignments)} assignment(s) were specified.")
            for a in t.assignments:
                _check_assignment(list(a.broker_ids), self.config.node_id)
        return topic

    def handle_create_partitions(self, ctx: RequestContext, req: Any, version: int) -> Any:
        if self.cluster() is not None:
            return of_coroutine(self._cluster_create_partitions(ctx, req, version), "CreatePartitions")
        counts = Counter(t.name for t in req.topics)
        results = [Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
                   for name, n in counts.items() if n > 1]
        records = 0
        quota = mutation_quota(self.quotas, ctx, strict=version >= 3)  # controller_mutation_rate, None without one
        for t in req.topics:
            if counts[t.name] > 1:
                continue
            try:
                topic = self._plan(ctx, t)
                records += t.count - topic.partitions
                if records > MAX_RECORDS_PER_OPERATION:
                    raise KafkaError(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
                if quota is not None and not req.validate_only:
                    quota.record(t.count - topic.partitions)
                if not req.validate_only:
                    self.topic_logs.add_partitions(topic, t.count)
            except KafkaError as e:
                results.append(Result(name=t.name, error_code=e.code, error_message=e.message))
                continue
            except OSError as e:
                log.error("Could not add partitions to %s: %s", t.name, e)
                results.append(Result(name=t.name, error_code=ErrorCode.KAFKA_STORAGE_ERROR, error_message=str(e)))
                continue
            results.append(Result(name=t.name, error_code=ErrorCode.NONE, error_message=None))
        throttle = quota.finish(ctx) if quota is not None else 0
        return CreatePartitionsResponse(version=version, throttle_time_ms=throttle, results=results)

    async def _cluster_create_partitions(self, ctx: RequestContext, req: Any, version: int) -> Any:
        """On a cluster node: the new partitions go to ZooKeeper (server/cluster/node.py), the
        controller elects their leaders, each hosting node creates its replicas."""
        from kcoord.server.cluster.answers import is_internal
        from kcoord.server.cluster.node import ClusterError

        node = self.cluster()
        counts = Counter(t.name for t in req.topics)
        results = [Result(name=name, error_code=ErrorCode.INVALID_REQUEST, error_message="Duplicate topic name.")
                   for name, n in counts.items() if n > 1]
        for t in req.topics:
            if counts[t.name] > 1:
                continue
            try:
                topic = node.topic(t.name)
                if topic is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if is_internal(t.name):
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                     f"Cannot change the number of partitions of internal topic {t.name}")
                current = topic.partitions
                if t.count == current:
                    raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
                if t.count < current:
                    raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"The topic {t.name} currently has {current} "
                                     f"partition(s); {t.count} would not be an increase.")
                assignment = None
                if t.assignments is not None:
                    if len(t.assignments) != t.count - current:
                        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                         f"Attempted to add {t.count - current} additional partition(s), but only "
                                         f"{len(t.assignments)} assignment(s) were specified.")
                    assignment = [tuple(a.broker_ids) for a in t.assignments]
                try:
                    await node.add_partitions(t.name, t.count, assignment, req.validate_only)
                except ClusterError as e:
                    raise KafkaError(ErrorCode[e.code], e.message) from None
            except KafkaError as e:
                results.append(Result(name=t.name, error_code=e.code, error_message=e.message))
                continue
            results.append(Result(name=t.name, error_code=ErrorCode.NONE, error_message=None))
        return CreatePartitionsResponse(version=version, throttle_time_ms=0, results=results)
