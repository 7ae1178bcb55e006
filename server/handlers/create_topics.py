"""CreateTopics v0-v7 with Kafka's validation: name rules, TOPIC_ALREADY_EXISTS,
INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR above the broker count, INVALID_CONFIG for
unknown topic configs, validate_only, and the created topic's configs in v5+."""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import CreateTopicsResponse

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.config_catalogue import TOPIC_CONFIGS, ConfigError, check_topic_configs
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine
from kcoord.server.quotas.mutation import mutation_quota
from kcoord.server.topics import validate_topic_name

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.config_layers import BrokerConfigs
    from kcoord.server.node import TopicLogs
    from kcoord.server.quotas.manager import QuotaManager
    from kcoord.server.topics import TopicRegistry

Result = CreateTopicsResponse.CreatableTopicResult
ConfigEntry = Result.CreatableTopicConfigs
BROKER_COUNT = 1
# Kafka's controller refuses an operation of more than 10,000 metadata records (a topic
# record, one per partition, one per config) with POLICY_VIOLATION.
MAX_RECORDS_PER_OPERATION = 10_000


class CreateTopicsApi:
    """The handlers of create_topics.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, topics: TopicRegistry, configs: BrokerConfigs, config: Config, quotas: QuotaManager,
                 topic_logs: TopicLogs, cluster: Callable[[], Any]) -> None:
        self.topics = topics
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None (server/cluster/)
        self.configs = configs
        self.config = config
        self.quotas = quotas
        self.topic_logs = topic_logs

    def _plan(self, ctx: RequestContext, t: Any) -> tuple[int, dict[str, str]]:
        """Validate one creatable topic; returns (partitions, configs) or raises KafkaError."""
        validate_topic_name(t.name)
        if self.topics.get(t.name) is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        if self.topics.is_deleting(t.name):  # only while its deletion is being finished
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' is marked for deletion.")
        other = self.topics.colliding(t.name)
        if other is not None:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{t.name}' collides with existing topic: {other}",
            )
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            indexes = sorted(a.partition_index for a in t.assignments)
            if indexes != list(range(len(indexes))):
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "Partitions should be a consecutive 0-based integer sequence",
                )
            node = self.config.node_id
            for a in t.assignments:
                if not a.broker_ids or any(b != node for b in a.broker_ids) or len(set(a.broker_ids)) != len(a.broker_ids):
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Replica assignment {list(a.broker_ids)} for partition {a.partition_index} "
                        f"names brokers other than the only registered broker {node}",
                    )
            partitions = len(indexes)
        else:
            partitions = self.config["num.partitions"] if t.num_partitions == -1 else t.num_partitions
            if partitions <= 0:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            rf = self.config["default.replication.factor"] if t.replication_factor == -1 else t.replication_factor
            if rf <= 0:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
            if rf > BROKER_COUNT:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {rf} time(s): The target replication factor "
                    f"of {rf} cannot be reached because only {BROKER_COUNT} broker(s) are registered.",
                )
        # Kafka's controller: the last value of a name given twice wins; then LogConfig.validate
        # over the broker's defaults (server/config_catalogue.py), answered INVALID_CONFIG.
        configs: dict[str, str] = {c.name: c.value for c in t.configs}
        try:
            check_topic_configs(configs, self.configs.topic_defaults())
        except ConfigError as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        return partitions, configs

    def _config_entries(self, ctx: RequestContext, configs: dict[str, str]) -> list[Any]:
        """The new topic's effective configs as the controller resolves them (v5+)."""
        layers = self.configs
        out = []
        for name in sorted(TOPIC_CONFIGS):
            e = layers.created_topic_entry(configs, name)
            out.append(ConfigEntry(name=name, value=None if e.sensitive else e.value, read_only=False,
                                   config_source=int(e.source), is_sensitive=e.sensitive))
        return out

    def handle_create_topics(self, ctx: RequestContext, req: Any, version: int) -> Any:
        if self.cluster() is not None:
            return of_coroutine(self._cluster_create(ctx, req, version), "CreateTopics")
        counts = Counter(t.name for t in req.topics)
        results = []
        records = 0
        quota = mutation_quota(self.quotas, ctx, strict=version >= 6)  # controller_mutation_rate, None without one
        for t in req.topics:
            if counts[t.name] > 1:
                results.append(Result(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                      error_message="Duplicate topic name."))
                continue
            try:
                partitions, configs = self._plan(ctx, t)
                records += 1 + partitions + len(configs)
                if records > MAX_RECORDS_PER_OPERATION:
                    raise KafkaError(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
                if quota is not None and not (version >= 1 and req.validate_only):
                    quota.record(partitions)
            except KafkaError as e:
                results.append(Result(name=t.name, error_code=e.code, error_message=e.message,
                                      num_partitions=-1, replication_factor=-1, configs=None))
                continue
            topic_id = None
            if not (version >= 1 and req.validate_only):
                topic_id = self.topic_logs.create_topic(t.name, partitions, configs).topic_id
            results.append(
                Result(
                    name=t.name,
                    topic_id=topic_id,
                    error_code=ErrorCode.NONE,
                    error_message=None,
                    num_partitions=partitions,
                    replication_factor=BROKER_COUNT,
                    configs=self._config_entries(ctx, configs),
                )
            )
        throttle = quota.finish(ctx) if quota is not None else 0
        return CreateTopicsResponse(version=version, throttle_time_ms=throttle, topics=results)

    async def _cluster_create(self, ctx: RequestContext, req: Any, version: int) -> Any:
        """On a cluster node: the replicas are assigned across the live brokers (or as given),
        written to ZooKeeper, and the controller elects the leaders (server/cluster/)."""
        from kcoord.server.cluster.node import ClusterError

        node = self.cluster()
        counts = Counter(t.name for t in req.topics)
        validate_only = version >= 1 and req.validate_only
        results = []
        for t in req.topics:
            if counts[t.name] > 1:
                results.append(Result(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                      error_message="Duplicate topic name."))
                continue
            try:
                validate_topic_name(t.name)
                if t.assignments and (t.num_partitions != -1 or t.replication_factor != -1):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                                     "replicasAssignments were set. Both cannot be used at the same time.")
                assignment = {a.partition_index: tuple(a.broker_ids) for a in t.assignments} if t.assignments else None
                if assignment is not None and sorted(assignment) != list(range(len(assignment))):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Partitions should be a consecutive 0-based integer sequence")
                cfg = self.config
                partitions = cfg["num.partitions"] if t.num_partitions == -1 else t.num_partitions
                if assignment is None and partitions <= 0:
                    raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
                rf = cfg["default.replication.factor"] if t.replication_factor == -1 else t.replication_factor
                configs: dict[str, str] = {c.name: c.value for c in t.configs}
                try:
                    check_topic_configs(configs, self.configs.topic_defaults())
                except ConfigError as e:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
                try:
                    created = await node.create_topic(t.name, partitions, rf, assignment, configs, validate_only)
                except ClusterError as e:
                    raise KafkaError(ErrorCode[e.code], e.message) from None
            except KafkaError as e:
                results.append(Result(name=t.name, error_code=e.code, error_message=e.message,
                                      num_partitions=-1, replication_factor=-1, configs=None))
                continue
            assert created is not None
            results.append(Result(name=t.name, topic_id=None if validate_only else created.topic_id,
                                  error_code=ErrorCode.NONE, error_message=None, num_partitions=created.partitions,
                                  replication_factor=len(created.replicas[0]), configs=self._config_entries(ctx, configs)))
        return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=results)
