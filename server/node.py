"""The composition root: builds one node's parts from its log directory, in order, and hands
each the narrow dependencies it uses through its constructor (as Kafka's BrokerServer builds
ReplicaManager, GroupCoordinator and KafkaApis). Nothing else builds a part, and no part
reaches another through the node.

`build_parts` runs at start-up and again after a control-API reset (server/control/reset.py),
which drops the old Parts whole. A new server answers its first ApiVersions before the group
coordinator, the transaction coordinator or the data plane exist: those, and the handler
areas that use them, are `Lazy` (server/lazy.py), each a named factory below, built at its
first use, or at once when the log directory holds state of theirs to load.

Adding a part: one builder function here and one line in `build_parts` (its Lazy, or the
part itself); adding a handler area: one line in `_areas`.
"""
from __future__ import annotations

import asyncio
import functools
import importlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from kcoord.protocol.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from kcoord.server.config_layers import BrokerConfigs
from kcoord.server.connection import KafkaConnection
from kcoord.server.group_configs import GroupConfigs
from kcoord.server.lazy import Lazy
from kcoord.server.security.setup import build_listener
from kcoord.server.topic_deletion import TopicDeleter
from kcoord.server.topics import Topic, TopicRegistry
from kcoord.storage.log_manager import LogManager

if TYPE_CHECKING:
    from kcoord.protocol.coordinator_records import CoordinatorRecord
    from kcoord.server.broker import Broker
    from kcoord.server.clock import Clock
    from kcoord.server.config import Config
    from kcoord.server.control.plane import ControlPlane
    from kcoord.server.control.ports import NodeState
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.dispatch import Dispatcher
    from kcoord.server.group.config import GroupConfig
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.group.txn_offsets import PendingTxnOffsets
    from kcoord.server.listeners import Listener, ListenerSpec
    from kcoord.server.metrics import Metrics
    from kcoord.server.share.manager import ShareManager
    from kcoord.server.txn.service import TxnService
    from kcoord.server.virtual.cluster import VirtualCluster

log = logging.getLogger("kcoord.broker")


class TopicLogs:
    """Creating a topic or adding partitions: the registry first, then the partitions' logs
    with the topic's effective segment settings."""

    def __init__(self, topics: TopicRegistry, configs: BrokerConfigs) -> None:
        self.topics = topics
        self.configs = configs
        self.logs: LogManager | None = None  # None while the root builds the registry

    def create_topic(self, name: str, partitions: int, configs: dict[str, str], internal: bool = False,
                     topic_id: Any = None) -> Topic:
        topic = self.topics.create(name, partitions, configs, internal, topic_id)
        if self.logs is not None:
            self.create_logs(topic)
        log.info("Created topic %s with %d partitions, id %s", name, partitions, topic.topic_id)
        return topic

    def add_partitions(self, topic: Topic, count: int) -> None:
        """CreatePartitions: the registry first (a start-up creates the logs it lists), then
        the new partitions' logs."""
        old = topic.partitions
        self.topics.set_partitions(topic, count)
        if self.logs is not None:
            self.create_logs(topic)
        log.info("Increased the partitions of topic %s from %d to %d", topic.name, old, count)

    def create_logs(self, topic: Topic) -> None:
        logs = self.logs
        assert logs is not None
        values = self.configs.topic_values(topic)
        seg, roll_ms = values["segment.bytes"], (values["segment.ms"], values["segment.jitter.ms"])
        # __consumer_offsets (and __transaction_state, __share_group_state) partitions get their
        # directory at their first write or read: a new server does not create (and fsync) 50
        # empty partitions before it listens, nor the first transactional client 50 more
        make = logs.declare if topic.name in (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC) else logs.create
        for p in range(topic.partitions):
            make(topic.name, p, segment_bytes=seg, topic_id=topic.topic_id, roll_ms=roll_ms)
            plog = logs.existing(topic.name, p)
            if plog is not None:  # a log opened at start-up took the broker defaults
                plog.segment_bytes = seg
                plog.segment_ms, plog.segment_jitter_ms = roll_ms

    def offsets_partitions(self, default: int) -> int:
        """Kafka uses the existing __consumer_offsets partition count over the setting."""
        t = self.topics.get(OFFSETS_TOPIC)
        return t.partitions if t is not None else default


class Parts:
    """One node's parts for one state of its log directory (see the module docstring)."""

    def __init__(self, topics: TopicRegistry, configs: BrokerConfigs, group_configs: GroupConfigs,
                 topic_logs: TopicLogs, logs: LogManager, deleter: TopicDeleter, data_plane: Lazy[DataPlane],
                 runtime: Lazy[CoordinatorRuntime[CoordinatorRecord]], coordinator: Lazy[GroupCoordinator],
                 txn: Lazy[TxnService], share: Lazy[ShareManager], share_state: Callable[[], ShareManager | None],
                 started: Callable[[], asyncio.Future[None] | None]) -> None:
        self.topics = topics
        self.configs = configs
        self.group_configs = group_configs  # the GROUP config resource, in the dynamic configs' store
        self.topic_logs = topic_logs
        self.logs = logs
        self.deleter = deleter
        self.data_plane = data_plane
        self.runtime = runtime  # the group coordinator's runtime (writes and loads __consumer_offsets)
        self.coordinator = coordinator
        self.txn = txn
        self.share = share  # the share-partition manager and its __share_group_state (server/share/)
        self.share_state = share_state  # the share manager when share state exists, else None
        self.state_stored = False  # whether the directory held coordinator state to load
        self.areas: dict[str, Lazy[Any]] = {}  # handler areas by class name (_areas)
        # the node's own loops over these parts (_loops), each given __consumer_offsets' load
        self.loops: list[Callable[[asyncio.Future[None]], Coroutine[Any, Any, None]]] = []
        self._started = started

    @property
    def loading(self) -> asyncio.Future[None] | None:
        """__consumer_offsets' load once the background tasks run (None before)."""
        return self._started()


def build_parts(node: Broker) -> Parts:
    """The node's parts, in the order they depend on each other."""
    cfg, log_dir, clock, metrics = node.config, node.log_dir, node.clock, node.metrics
    # 1. the topic registry and the dynamic configs (every log's segment settings need them), the
    # group configs beside them
    topics = TopicRegistry(log_dir)
    topics.load()
    configs = BrokerConfigs(cfg, log_dir)
    configs.load()
    group_configs = GroupConfigs(configs)  # per-group overrides, in the same store
    topic_logs = TopicLogs(topics, configs)
    if topics.get(OFFSETS_TOPIC) is None:
        topic_logs.create_topic(OFFSETS_TOPIC, cfg["offsets.topic.num.partitions"], {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(cfg["offsets.topic.segment.bytes"]),
        }, internal=True)
    offsets_partitions = topic_logs.offsets_partitions(cfg["offsets.topic.num.partitions"])

    # 2. the parts built at their first use: named factories, each given what it takes
    data_plane: Lazy[DataPlane] = Lazy("data_plane", lambda: _data_plane(clock, log_dir, cfg))
    txn: Lazy[TxnService]
    txn_offsets: Lazy[PendingTxnOffsets] = Lazy("txn_offsets", _txn_offsets)
    # (group id, member id) -> None: told when a share group member leaves (the share manager listens)
    share_member_left: list[Callable[[str, str], None]] = []
    runtime: Lazy[CoordinatorRuntime[CoordinatorRecord]] = Lazy("runtime", lambda: _group_runtime(
        cfg, clock, metrics, logs, topics, offsets_partitions, data_plane, txn_offsets.get(),
        lambda p, plog: _txn_offsets_loaded(txn, p, plog), parts.loading, group_configs, share_member_left))
    coordinator: Lazy[GroupCoordinator] = Lazy("coordinator", lambda: runtime.get().shard)  # type: ignore[arg-type,return-value]
    txn = Lazy("txn", lambda: _txn_service(cfg, clock, metrics, logs, topics, topic_logs.create_topic,
                                           data_plane.get(), runtime.get(), coordinator.get(),
                                           txn_offsets.get(), parts.loading, node.add_background,
                                           lambda: node.cluster))
    share: Lazy[ShareManager] = Lazy("share", lambda: _share_manager(
        cfg, clock, logs, topics, topic_logs.create_topic, data_plane.get(), group_configs, coordinator.get(),
        share_member_left, lambda: node.cluster))

    def share_state() -> ShareManager | None:
        """The share manager if it is built or there is stored share state to load (then it is
        built now); None when no share state exists (deletions then have none to delete)."""
        manager = share.built()
        if manager is None and topics.get(SHARE_STATE_TOPIC) is not None:
            manager = share.get()
        return manager

    # 3. the topic deletions a crash cut short (before the logs open: their renames), then
    # the logs of every topic
    deleter = TopicDeleter(topics, log_dir, data_plane, coordinator, runtime, share_state)
    deleter.recover_files()
    logs = LogManager(str(log_dir), segment_bytes=cfg["log.segment.bytes"],
                      offsets_segment_bytes=cfg["offsets.topic.segment.bytes"], clock_ms=clock.now_ms)
    deleter.logs = topic_logs.logs = logs
    for topic in topics.topics.values():
        topic_logs.create_logs(topic)

    parts = Parts(topics, configs, group_configs, topic_logs, logs, deleter, data_plane, runtime, coordinator, txn,
                  share, share_state, node.loading_future)
    # 4. the handler areas, each with the parts its handlers use; the node's loops
    parts.areas = _areas(node, parts)
    parts.loops = _loops(cfg, clock, topics, configs, logs, data_plane, txn)
    # 5. a coordinator with records to load is built now (the transaction coordinator with
    # the group's and the data plane it needs)
    parts.state_stored = topics.get(TXN_TOPIC) is not None or any(
        logs.existing(OFFSETS_TOPIC, p) is not None for p in range(offsets_partitions))
    if parts.state_stored:
        txn.get()
    return parts


def _areas(node: Broker, parts: Parts) -> dict[str, Lazy[Any]]:
    """The handler areas (server/handlers/), each given the parts its handlers use; built at
    their API's first request. routes.py names a handler as "module.Area.method"."""

    def area(name: str, build: Callable[[], Any]) -> tuple[str, Lazy[Any]]:
        return name, Lazy(name, build)

    cfg, clock, security, quotas = node.config, node.clock, node.security, node.quotas
    topics, logs, configs, topic_logs = parts.topics, parts.logs, parts.configs, parts.topic_logs
    data_plane, coordinator, txn, share = parts.data_plane, parts.coordinator, parts.txn, parts.share
    group_configs = parts.group_configs

    # a cluster node's ClusterNode and replica manager: set by app.py's start_cluster (after the
    # parts, once the listeners are bound) and by the replication tests; None on a single node
    def cluster() -> Any:
        return node.cluster

    def replicas() -> Any:
        return node.replicas

    def read_replica(replica: Any, client_rack: str | None, fetch_offset: int) -> int | None:
        """KIP-392: the follower a consumer in `client_rack` should read from (None: here)."""
        from kcoord.server.replication.read_replica import preferred_read_replica

        c = node.cluster
        if c is None or not cfg["replica.selector.class"]:
            return None
        racks = {b: info.rack for b, info in c.cache.brokers.items()}
        return preferred_read_replica(cfg["replica.selector.class"], replica, client_rack, fetch_offset, racks,
                                      clock.now_ms())

    def module(name: str) -> Any:
        return importlib.import_module("kcoord.server.handlers." + name)

    def config_state() -> Any:
        from kcoord.server.config_admin import ConfigState, TopicsForConfigs

        return ConfigState(cfg, TopicsForConfigs(topics, cluster), configs, logs, group_configs)

    return dict((
        # the cluster
        area("ApiVersionsApi", lambda: module("api_versions").ApiVersionsApi(cfg["kcoord.transaction.version"])),
        area("MetadataApi", lambda: module("metadata").MetadataApi(cfg, node.cluster_id, topics,
                                                                     topic_logs.create_topic, cluster)),
        area("DescribeClusterApi", lambda: module("describe_cluster").DescribeClusterApi(cfg, node.cluster_id, cluster)),
        area("DescribeTopicPartitionsApi",
             lambda: module("describe_topic_partitions").DescribeTopicPartitionsApi(topics, cfg, cluster)),
        area("DescribeLogDirsApi", lambda: module("describe_log_dirs").DescribeLogDirsApi(logs, node.log_dir)),
        area("ElectLeadersApi", lambda: module("elect_leaders").ElectLeadersApi(topics, cluster)),
        area("ListPartitionReassignmentsApi",
             lambda: module("list_partition_reassignments").ListPartitionReassignmentsApi(cluster)),
        area("AlterPartitionReassignmentsApi",
             lambda: module("alter_partition_reassignments").AlterPartitionReassignmentsApi(topics, cfg, cluster)),
        # groups
        area("FindCoordinatorApi", lambda: module("find_coordinator").FindCoordinatorApi(cfg, txn, cluster, share)),
        area("GroupApis", lambda: module("groups").GroupApis(coordinator.get(), parts.runtime.get(), topics,
                                                             parts.share_state, cluster)),
        area("ShareGroupApis", lambda: module("share_groups").ShareGroupApis(coordinator.get(), parts.runtime.get())),
        # data
        area("ProduceApi", lambda: module("produce").ProduceApi(cfg, clock, topics, configs, logs,
                                                               data_plane.get(), txn, cluster, replicas)),
        area("FetchApi", lambda: module("fetch").FetchApi(topics, logs, data_plane.get(), cluster, replicas,
                                                          read_replica)),
        area("ListOffsetsApi", lambda: module("list_offsets").ListOffsetsApi(topics, logs, data_plane.get(), clock)),
        area("OffsetsForLeaderEpochApi",
             lambda: module("offsets_for_leader_epoch").OffsetsForLeaderEpochApi(topics, logs)),
        area("DeleteRecordsApi", lambda: module("delete_records").DeleteRecordsApi(data_plane, logs, configs, topics)),
        area("InitProducerIdApi", lambda: module("init_producer_id").InitProducerIdApi(txn, data_plane)),
        area("DescribeProducersApi",
             lambda: module("describe_producers").DescribeProducersApi(data_plane, logs, topics, clock)),
        # transactions
        area("AddPartitionsToTxnApi",
             lambda: module("add_partitions_to_txn").AddPartitionsToTxnApi(txn, logs, topics)),
        area("AddOffsetsToTxnApi", lambda: module("add_offsets_to_txn").AddOffsetsToTxnApi(txn, coordinator)),
        area("EndTxnApi", lambda: module("end_txn").EndTxnApi(txn)),
        area("WriteTxnMarkersApi", lambda: module("write_txn_markers").WriteTxnMarkersApi(txn)),
        area("TxnOffsetCommitApi", lambda: module("txn_offset_commit").TxnOffsetCommitApi(
            txn, coordinator, logs, topics, cfg, clock, cluster)),
        area("DescribeTransactionsApi", lambda: module("describe_transactions").DescribeTransactionsApi(txn)),
        area("ListTransactionsApi", lambda: module("list_transactions").ListTransactionsApi(txn)),
        # topics
        area("CreateTopicsApi", lambda: module("create_topics").CreateTopicsApi(topics, configs, cfg, quotas,
                                                                                topic_logs, cluster)),
        area("CreatePartitionsApi", lambda: module("create_partitions").CreatePartitionsApi(topics, cfg, quotas,
                                                                                            topic_logs, cluster)),
        area("DeleteTopicsApi", lambda: module("delete_topics").DeleteTopicsApi(topics, cfg, quotas, parts.deleter,
                                                                                cluster)),
        # configs
        area("DescribeConfigsApi", lambda: module("describe_configs").DescribeConfigsApi(config_state())),
        area("AlterConfigsApi", lambda: module("alter_configs").AlterConfigsApi(config_state(), cluster)),
        area("IncrementalAlterConfigsApi",
             lambda: module("incremental_alter_configs").IncrementalAlterConfigsApi(config_state(), cluster)),
        # security and quotas
        area("SaslApis", lambda: module("sasl").SaslApis()),
        area("ScramCredentialApis", lambda: module("scram_credentials").ScramCredentialApis(security)),
        area("AclApis", lambda: module("acls").AclApis(security)),
        area("ClientQuotaApis", lambda: module("client_quotas").ClientQuotaApis(quotas)),
        # share partitions
        area("ShareFetchApis", lambda: module("share_fetch").ShareFetchApis(cfg.node_id, share)),
        area("ShareOffsetsApis", lambda: module("share_offsets").ShareOffsetsApis(
            topics, share, lambda group: _group_refused(parts.runtime.get(), group))),
        # the share coordinator's inter-broker APIs (other nodes' share partitions' state)
        area("ShareStateApis", lambda: module("share_state").ShareStateApis(share)),
    ))


def _loops(cfg: Config, clock: Clock, topics: TopicRegistry, configs: BrokerConfigs, logs: LogManager,
           data_plane: Lazy[DataPlane], txn: Lazy[TxnService],
           ) -> list[Callable[[asyncio.Future[None]], Coroutine[Any, Any, None]]]:
    """The node's own background loops over these parts, started with its background tasks
    (Broker.start_background), each given __consumer_offsets' load. Their code loads when
    they first run, after start-up."""

    async def topic_retention(loading: asyncio.Future[None]) -> None:
        """retention.ms / retention.bytes, every log.retention.check.interval.ms."""
        interval = cfg["log.retention.check.interval.ms"]
        await asyncio.sleep(interval / 1000.0)
        from kcoord.server.topic_retention import TopicRetention

        await TopicRetention(topics, configs, logs, data_plane.get, clock).loop(interval)

    async def log_flush(loading: asyncio.Future[None]) -> None:
        """flush.ms: data partitions' time-based flushes."""
        from kcoord.server.log_flush import log_flush_loop

        await log_flush_loop(logs, topics, configs, clock.now_ms)

    async def adopt_swaps(loading: asyncio.Future[None]) -> None:
        """The compaction sidecar's committed segments, once __consumer_offsets is loaded."""
        from kcoord.server.swap_adoption import adopt_swaps_after

        def txn_loaded() -> bool:
            service = txn.built()
            return service is not None and service.loaded

        await adopt_swaps_after(loading, cfg["kcoord.compaction.handoff.check.ms"], topics, configs, logs,
                                txn_loaded)

    return [adopt_swaps, topic_retention, log_flush]


def run_topic_retention(node: Broker, now_ms: int | None = None) -> int:
    """One retention pass over the node's current parts, as the retention loop runs it
    (server/topic_retention.py); returns the segments deleted (tests and tools)."""
    from kcoord.server.topic_retention import TopicRetention

    parts = node.parts
    return TopicRetention(parts.topics, parts.configs, parts.logs, parts.data_plane.get, node.clock).run(now_ms)


# ---- the builders of the lazy parts


def _data_plane(clock: Clock, log_dir: Any, cfg: Config) -> DataPlane:
    from kcoord.server.data_plane import DataPlane

    return DataPlane(clock, log_dir, cfg)


def _txn_offsets() -> PendingTxnOffsets:
    from kcoord.server.group.txn_offsets import PendingTxnOffsets

    return PendingTxnOffsets()


def _group_runtime(cfg: Config, clock: Clock, metrics: Metrics, logs: LogManager, topics: TopicRegistry,
                   partitions: int, data_plane: Lazy[DataPlane], txn_offsets: PendingTxnOffsets,
                   txn_loaded: Callable[[int, Any], None], loading: asyncio.Future[None] | None,
                   group_configs: GroupConfigs, share_member_left: list[Callable[[str, str], None]],
                   ) -> CoordinatorRuntime[CoordinatorRecord]:
    """The group coordinator on its runtime, which writes and loads __consumer_offsets."""
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.group.shard import OffsetsRecords

    runtime: CoordinatorRuntime[CoordinatorRecord] = CoordinatorRuntime(
        # writes no request asked for (a group emptied by a session timeout) and the work of
        # the end of a loop turn (one target assignment for its heartbeats) go to the runtime
        lambda runtime: GroupCoordinator(group_config(cfg, group_configs), clock, partitions,
                                         background_writer=runtime.write_background,
                                         end_of_turn=runtime.end_of_turn, topics=topics,
                                         txn_offsets=txn_offsets, share_member_left=share_member_left),
        OffsetsRecords(partitions),
        logs,
        clock,
        cfg["offsets.commit.timeout.ms"],
        cfg["message.max.bytes"],
        cfg["offsets.load.buffer.size"],
        # commit records are fetchable: wake long polls on __consumer_offsets (kcat, lag tools)
        on_append=lambda p: data_plane.get().appended(OFFSETS_TOPIC, p),
        on_applied=metrics.records_applied,
        load_hooks=[txn_loaded],
        load_seconds=metrics.partition_load_seconds,
    )
    if loading is not None:  # built after start-up: nothing was on disk to load
        start_group_runtime(cfg, metrics, runtime)
    return runtime


def start_group_runtime(cfg: Config, metrics: Metrics, runtime: CoordinatorRuntime[CoordinatorRecord]) -> None:
    """The group runtime's periodic task: offsets retention."""
    from kcoord.server.group.shard import expire_offsets

    runtime.every(cfg["offsets.retention.check.interval.ms"],
                  functools.partial(expire_offsets, runtime, runtime.shard, metrics))


def _txn_offsets_loaded(txn: Lazy[TxnService], partition: int, plog: Any) -> None:
    """A __consumer_offsets partition is replayed: the transaction coordinator (when there is
    one) adds the offsets of transactions still open in it."""
    service = txn.built()
    if service is not None:
        service.group_log.on_partition_loaded(partition, plog)


def _txn_service(cfg: Config, clock: Clock, metrics: Metrics, logs: LogManager, topics: TopicRegistry,
                 create_topic: Callable[..., Topic], data_plane: DataPlane,
                 group_runtime: CoordinatorRuntime[CoordinatorRecord], coordinator: GroupCoordinator,
                 txn_offsets: PendingTxnOffsets, loading: asyncio.Future[None] | None,
                 background: Callable[[asyncio.Future[None]], None], cluster: Callable[[], Any]) -> TxnService:
    """The transaction coordinator, beside the group's (built first: it writes its offsets and
    markers to __consumer_offsets); on a cluster node (`cluster`: the node's ClusterNode, None
    on one node) its markers go to each partition's leader, and its appends wait for the
    in-sync replicas as the coordinator runtimes' own (server/txn/leader_append.py)."""
    from kcoord.server.txn.group_log import GroupTxnLog
    from kcoord.server.txn.service import TxnService

    group_log = GroupTxnLog(cfg, clock, metrics, logs, data_plane, group_runtime, coordinator, txn_offsets)
    service = TxnService(cfg, clock, logs, topics, create_topic, data_plane, group_log, cluster)
    if loading is not None:  # built after start-up: runs once __consumer_offsets is loaded
        background(asyncio.ensure_future(service.run(loading)))
    return service


def _share_manager(cfg: Config, clock: Clock, logs: LogManager, topics: TopicRegistry,
                   create_topic: Callable[..., Topic], data_plane: DataPlane, group_configs: GroupConfigs,
                   coordinator: GroupCoordinator, share_member_left: list[Callable[[str, str], None]],
                   cluster: Callable[[], Any]) -> ShareManager:
    """The share-partition manager (server/share/manager.py) and its __share_group_state; it
    listens for share group members leaving (the group coordinator tells share_member_left).
    On a cluster node (zookeeper.connect set; `cluster()` the ClusterNode once joined) the
    topic is the cluster's (created through ZooKeeper at the first use, server/share/cluster.py),
    share partitions live only where their data partition's leader is, and their state is read
    and written at the leader of its __share_group_state partition (server/share/persister.py)."""
    from kcoord.server.data_plane import log_of
    from kcoord.server.share.cluster import state_topic_configs
    from kcoord.server.share.manager import SETTINGS, build_share_manager, committed_reader

    clustered = bool(cfg["zookeeper.connect"])
    configs = state_topic_configs(cfg)
    manager = build_share_manager(
        logs=logs, topics=topics, clock=clock, settings={k: cfg[k] for k in SETTINGS},
        partition_log=lambda name, p: None if (t := topics.get(name)) is None else log_of(logs, t, p),
        committed_read=committed_reader(data_plane), purgatory=data_plane.fetch_purgatory,
        create_state_topic=None if clustered else lambda n, seg: create_topic(
            SHARE_STATE_TOPIC, n, dict(configs, **{"segment.bytes": str(seg)}), internal=True),
        group_config=group_configs.get,  # the GROUP config resource
        group_members=coordinator.share.members,  # the share group coordinator's ports
        state_partitions=coordinator.share.state_partitions,
        max_message_bytes=cfg["message.max.bytes"])
    if clustered:
        from kcoord.server.share.cluster import on_cluster

        on_cluster(manager, cfg, cluster)
    share_member_left.append(manager.on_member_left)
    return manager


def group_config(cfg: Config, overrides: GroupConfigs | None = None) -> GroupConfig:
    """The coordinator's settings, same names as Kafka's with dots as underscores; `overrides`:
    the per-group configs that take precedence (the GROUP config resource)."""
    from kcoord.server.group.config import GroupConfig
    from kcoord.server.group.share.settings import group_config_fields

    return GroupConfig(
        group_min_session_timeout_ms=cfg["group.min.session.timeout.ms"],
        group_max_session_timeout_ms=cfg["group.max.session.timeout.ms"],
        group_initial_rebalance_delay_ms=cfg["group.initial.rebalance.delay.ms"],
        group_max_size=cfg["group.max.size"],
        offset_metadata_max_bytes=cfg["offset.metadata.max.bytes"],
        offsets_retention_minutes=cfg["offsets.retention.minutes"],
        offsets_retention_check_interval_ms=cfg["offsets.retention.check.interval.ms"],
        offsets_commit_timeout_ms=cfg["offsets.commit.timeout.ms"],
        group_consumer_session_timeout_ms=_within(cfg, "group.consumer.session.timeout.ms"),
        group_consumer_min_session_timeout_ms=cfg["group.consumer.min.session.timeout.ms"],
        group_consumer_max_session_timeout_ms=cfg["group.consumer.max.session.timeout.ms"],
        group_consumer_heartbeat_interval_ms=_within(cfg, "group.consumer.heartbeat.interval.ms"),
        group_consumer_min_heartbeat_interval_ms=cfg["group.consumer.min.heartbeat.interval.ms"],
        group_consumer_max_heartbeat_interval_ms=cfg["group.consumer.max.heartbeat.interval.ms"],
        group_consumer_max_size=cfg["group.consumer.max.size"],
        group_consumer_assignors=cfg["group.consumer.assignors"],
        group_consumer_migration_policy=cfg["group.consumer.migration.policy"],
        **group_config_fields(cfg),
        overrides=overrides,
    )


def _within(cfg: Config, name: str) -> int:
    """group.consumer.X must lie within group.consumer.min.X and group.consumer.max.X, as
    Kafka requires at start-up."""
    value = cfg[name]
    stem = name.removeprefix("group.consumer.")
    lo, hi = cfg[f"group.consumer.min.{stem}"], cfg[f"group.consumer.max.{stem}"]
    if not lo <= value <= hi:
        raise ValueError(f"{name} must be between group.consumer.min.{stem} ({lo}) and "
                         f"group.consumer.max.{stem} ({hi}), not {value}")
    return value


# ---- the process's parts around the node: the dispatcher, the metrics page, listeners and
# their connections (server/app.py binds them)


def dispatcher_for(node: Broker) -> Dispatcher:
    """The dispatcher of the node's Kafka listeners (server/dispatch.py), told at every build
    of the parts (start-up, each reset) what it serves with: a route binder over the new
    handler areas, the request-latency metric of the node's metrics (a reset makes new ones)
    and, when an authorizer is configured, what its policies read."""
    from kcoord.server.dispatch import Dispatcher, Serving
    from kcoord.server.handlers.routes import bind

    cfg = node.config
    authorizing = bool(cfg["authorizer.class.name"])

    def serving(parts: Parts) -> Serving:
        areas, policy_parts = parts.areas, None
        if authorizing:
            from kcoord.server.security.guard import PolicyParts

            policy_parts = PolicyParts(cfg, parts.topics, parts.logs)
        return Serving(lambda route: bind(route, areas), node.metrics.observe_request, policy_parts)

    return Dispatcher(lambda told: node.watch_parts(lambda parts: told(serving(parts))),
                      node.security if authorizing else None, node.quotas)


def metrics_page(node: Broker) -> Callable[[], bytes]:
    """The Prometheus /metrics page (server/metrics.py), read from the node's current parts at
    each scrape: the parts built so far (a scrape builds none), the connections, the quotas."""
    def page() -> bytes:
        from kcoord.server.metrics import Scraped

        parts = node.parts
        return node.metrics.render(Scraped(
            coordinator=parts.coordinator.built(), logs=parts.logs, topics=parts.topics, connections=node.connections,
            txn=parts.txn.built(), quotas=node.quotas, share=parts.share.built(), data_plane=parts.data_plane.built()))
    return page


def configured_listener(spec: ListenerSpec, node: Broker) -> Listener:
    """A configured listener, with its TLS context and SASL settings (server/security/setup.py):
    a SASL listener is given the node's SCRAM credentials."""
    security = node.security
    return build_listener(spec, node.config, lambda: security.credentials)


def connection_factory(node: Broker, dispatcher: Dispatcher, listener: Listener,
                       hook: Any = None) -> Callable[[], KafkaConnection]:
    """One KafkaConnection per accepted socket of `listener`: admitted and released by the
    node's connections (their limits), answered by the dispatcher; `hook`: the control API's
    interceptor when it is on (server/control/intercept.py), which sees a connection's first
    request."""
    connections, cfg = node.connections, node.config
    max_bytes, max_queued = cfg["socket.request.max.bytes"], cfg["queued.max.requests"]

    def connection() -> KafkaConnection:
        return KafkaConnection(connections, dispatcher, max_bytes, max_queued, listener, hook)

    return connection


# ---- the test harness around the node: the control API (server/control/) and virtual
# brokers (server/virtual/), imported only when they are on


def node_state(node: Broker) -> NodeState:
    """The node's current parts, each read at its use (a reset builds them anew)."""
    from kcoord.server.control.ports import NodeState

    cfg = node.config
    return NodeState(topics=lambda: node.parts.topics, coordinator=lambda: node.parts.coordinator.get(),
                     runtime=lambda: node.parts.runtime.get(),
                     offsets_partitions=lambda: node.parts.topic_logs.offsets_partitions(
                         cfg["offsets.topic.num.partitions"]))


def control_plane(node: Broker, dispatcher: Dispatcher, bound: Callable[[], list[tuple[str, int]]]) -> ControlPlane:
    """The control API's state and operations; `bound`: every listener's bound address. On a
    cluster node (zookeeper.connect) its moves go through the controller
    (server/control/cluster_moves.py) and its reset is refused."""
    from kcoord.server.control.plane import ControlPlane

    cfg = node.config

    def identity() -> dict[str, Any]:
        return {"cluster_id": node.cluster_id, "node_id": cfg.node_id,
                "listeners": [f"{h}:{p}" for h, p in bound()]}

    moves = None
    if cfg["zookeeper.connect"]:  # a cluster node: leaders move through the controller; no reset
        from kcoord.server.control.cluster_moves import ClusterMoves

        moves = ClusterMoves(lambda: node.cluster, f"kcoord-control-{cfg.node_id}")
    return ControlPlane(dispatcher, node.connections, node_state(node), node.loaded, node.reset, identity, moves)


def virtual_cluster(node: Broker, count: int, state: NodeState, listeners: list[Listener], servers: list[Any],
                    bind: Callable[[Listener], Awaitable[list[Any]]]) -> VirtualCluster:
    """kcoord.virtual.brokers=count: the first node is this one on `listeners` (served by
    `servers`); `bind` serves another node's listener and returns its asyncio servers."""
    from kcoord.server.virtual.cluster import VirtualCluster

    return VirtualCluster(node.config.node_id, count, listeners, servers, bind, node.connections, state)


# ---- a cluster node (zookeeper.connect set; docs/cluster.md): nothing of server/cluster/,
# server/replication/ or kazoo is imported otherwise


async def start_cluster_node(node: Broker, listeners: list[Listener]) -> Any:
    """Join the cluster once the listeners are bound (their advertised endpoints register):
    the ClusterNode (server/cluster/builder.py) with this node's replicas (LocalReplicas, the
    replica manager) and its group runtime. From then on `node.cluster` answers for the
    cluster (the areas' `cluster()`), `node.replicas` is the replica manager the Produce and
    Fetch areas consult, and the node's cluster id is the cluster's."""
    from kcoord.server.cluster.builder import start_cluster
    from kcoord.server.cluster.config_changes import config_applier
    from kcoord.server.cluster.local_replicas import LocalReplicas
    from kcoord.server.cluster.replicas import replicated_replicas

    def replicas(cluster: Any) -> Any:
        def manager_for(alter_isr: Any) -> Any:
            manager = node.replicas = replica_manager_for(node, alter_isr)
            return manager

        local = LocalReplicas(cluster.cache, lambda: node.parts.topics, lambda: node.parts.topic_logs,
                              lambda: node.parts.logs, lambda topic: node.parts.deleter.delete_topic(topic),
                              lambda: node.parts.data_plane.get(), str(node.log_dir), lambda: cluster.cluster_id,
                              node.config["cluster.id"] or "")
        return replicated_replicas(cluster, local, manager_for)

    def answering(cluster: Any) -> None:
        node.cluster = cluster

    def min_isr(topic: str) -> int:
        t = node.parts.topics.get(topic)
        return 1 if t is None else node.parts.configs.topic_values(t)["min.insync.replicas"]

    def config_state() -> Any:  # the node's own registry: what a config change is applied to
        from kcoord.server.config_admin import ConfigState

        parts = node.parts
        return ConfigState(node.config, parts.topics, parts.configs, parts.logs, parts.group_configs)

    cluster = await start_cluster(node.config, listeners, replicas, lambda: node.parts.runtime.get(),
                                  lambda: node.parts.txn.get().managed_runtime(),
                                  lambda: node.parts.share.get().runtime,
                                  lambda: _share_leadership_changed(node),
                                  lambda take: node.parts.data_plane.get().producer_ids.use_blocks(take),
                                  min_isr, node.cluster_id, answering, config_applier(config_state))
    node.cluster_id = cluster.cluster_id
    return cluster


def _group_refused(runtime: CoordinatorRuntime[CoordinatorRecord], group: str) -> Any:
    """NOT_COORDINATOR when this node does not hold the group's __consumer_offsets partition
    (a cluster node that does not lead it), COORDINATOR_LOAD_IN_PROGRESS while it loads it."""
    from kcoord.protocol.errors import ErrorCode
    from kcoord.protocol.partitioner import partition_for

    state = runtime.state(partition_for(group, runtime.shard.num_partitions))[0]
    return {"unloaded": ErrorCode.NOT_COORDINATOR, "loading": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}.get(state)


def _share_leadership_changed(node: Broker) -> None:
    """Leadership moved: share partitions whose data partition this node no longer leads go."""
    manager = node.parts.share.built()
    if manager is not None:
        manager.drop_unled()


def replica_manager_for(node: Broker, alter_isr: Any, settings: Any = None) -> Any:
    """The node's replica manager (server/replication/wiring.py), proposing ISR changes
    through `alter_isr`; `settings`: ReplicationSettings, else the configuration's."""
    from kcoord.server.replication.replica_manager import ReplicationSettings
    from kcoord.server.replication.wiring import replica_manager

    return replica_manager(node.config.node_id, node.clock, alter_isr,
                           settings or ReplicationSettings.from_config(node.config),
                           lambda: node.parts.topics, lambda: node.parts.logs, lambda: node.parts.data_plane.get(),
                           str(node.log_dir))
