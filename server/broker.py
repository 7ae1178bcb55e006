"""The broker's state shared by every handler: config, cluster identity, topics, logs and
the group coordinator. Owns start-up (recovery, loading) and orderly shutdown.

The data plane, the group coordinator (with its runtime) and the transaction coordinator are
built at their first use (Broker.__getattr__, _PARTS), not at start-up, unless the log
directory holds state for them to load: a new server listens and answers its
first requests without importing any of them (tests/unit/test_startup.py lists what it
imports)."""
from __future__ import annotations

import asyncio
import fcntl
import functools
import gc
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.protocol.topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC
from kcoord.server.clock import SystemClock
from kcoord.server.config import Config
from kcoord.server.config_layers import BrokerConfigs
from kcoord.server.group_configs import GroupConfigs
from kcoord.server.metrics import Metrics
from kcoord.server.quotas.manager import QuotaManager
from kcoord.server.security.state import SecurityState
from kcoord.server.topic_deletion import TopicDeleter
from kcoord.server.topics import Topic, TopicRegistry, load_or_create_meta
from kcoord.storage.log_manager import LogManager

if TYPE_CHECKING:
    from kcoord.protocol.coordinator_records import CoordinatorRecord
    from kcoord.server.connection import KafkaConnection
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.group.config import GroupConfig
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.share.manager import ShareManager
    from kcoord.server.txn.service import TxnService

log = logging.getLogger("kcoord.broker")


class LogDirLocked(RuntimeError):
    """Another server already uses the log directory."""


class Broker:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.log_dir = config.log_dir
        self.topics = TopicRegistry(self.log_dir)
        self.cluster_id = ""
        self.connections: set[KafkaConnection] = set()
        self.metrics = Metrics()
        self.security = SecurityState(config)  # SCRAM credentials, the ACL authorizer
        self.quotas = QuotaManager(config, self.log_dir)  # client quotas (server/quotas/)
        self._per_ip: dict[str, int] = {}
        # (group id, member id) -> None: told when a share group member leaves (server/group/share/ports.py)
        self.share_member_left: list[Callable[[str, str], None]] = []
        self.clock = SystemClock()
        self.logs: LogManager | None = None
        self.configs: BrokerConfigs  # dynamic broker configs, topic values (open_state)
        self.group_configs: GroupConfigs  # the GROUP config resource, in the same store (open_state)
        # built at their first use (_PARTS), or by open_state when there is state to load
        self.coordinator: GroupCoordinator
        self.runtime: CoordinatorRuntime[CoordinatorRecord]
        self.data_plane: DataPlane
        self.txn: TxnService
        self.share: ShareManager  # share partitions (server/share/)
        self._background: list[asyncio.Task[None]] = []
        self._loading: asyncio.Future[None] | None = None  # set once the background tasks run
        self._state_stored = False  # whether open_state found coordinator state to load
        self._lock_fd: int | None = None
        self.deleter = TopicDeleter(self)
        self.cluster: Any = None  # kcoord.server.cluster.node.ClusterNode when zookeeper.connect is set

    def __getattr__(self, name: str) -> Any:
        # called only for an attribute not set: a part not built yet
        build = _PARTS.get(name)
        if build is None or self.logs is None:  # no part before open_state
            raise AttributeError(name)
        build(self)
        return self.__dict__[name]

    def built(self, name: str) -> Any:
        """The part (data_plane, coordinator, runtime, txn) if it was built, else None;
        builds nothing."""
        return self.__dict__.get(name)

    async def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._lock_log_dir()
        self.security.load(self.log_dir)
        self.quotas.load()
        self.cluster_id = load_or_create_meta(self.log_dir, self.config.node_id, self.config["cluster.id"])
        self.open_state()
        log.info("Cluster %s, node %d, %d topics in %s", self.cluster_id, self.config.node_id,
                 len(self.topics.topics), self.log_dir)

    def open_state(self) -> None:
        """Topics, their logs and the dynamic configs, from what the log directory holds (at
        start-up; and after a reset emptied it, server/control/reset.py). The other parts are
        built anew at their first use, or now when the directory holds state of theirs to load."""
        for name in _PARTS:
            self.__dict__.pop(name, None)
        self.share_member_left = []  # the parts that listen are built anew too
        self._loading = None  # until start_background: a part built before starts nothing
        self.topics = TopicRegistry(self.log_dir)
        self.deleter = TopicDeleter(self)
        self.topics.load()
        self.configs = BrokerConfigs(self.config, self.log_dir)  # every log's segment settings need it
        self.configs.load()
        self.group_configs = GroupConfigs(self.configs)  # per-group overrides, in the same store
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
        self.deleter.recover_files()  # before the logs open: a deletion's renames a crash cut short
        cfg = self.config
        self.logs = LogManager(
            str(self.log_dir),
            segment_bytes=cfg["log.segment.bytes"],
            offsets_segment_bytes=cfg["offsets.topic.segment.bytes"],
            clock_ms=self.clock.now_ms,
        )
        for topic in self.topics.topics.values():
            self._create_logs(topic)
        self._state_stored = self.coordinator_state_stored()
        if self._state_stored:
            _build_txn(self)  # with the data plane and the group coordinator it needs

    def coordinator_state_stored(self) -> bool:
        """Whether a coordinator has records to load: a __consumer_offsets partition that has a
        log, or a __transaction_state topic."""
        assert self.logs is not None
        return self.topics.get(TXN_TOPIC) is not None or any(
            self.logs.existing(OFFSETS_TOPIC, p) is not None for p in range(self.offsets_partitions))

    def start_background(self, freeze: bool = True) -> None:
        """After the listeners are up: load __consumer_offsets (groups answer
        COORDINATOR_LOAD_IN_PROGRESS meanwhile) and start the retention tasks; a part built
        later starts its own when it is built."""
        runtime = self.built("runtime")
        # Only state found on disk is loaded. A runtime built since, at a request's first use
        # (a group request can arrive on the first listener while the next one starts), had
        # nothing to load, and loading it now would drop the groups those requests created:
        # their parked JoinGroups would be answered NOT_COORDINATOR.
        stored = runtime is not None and self._state_stored
        if not stored:  # every partition is loaded as it is, empty
            self.metrics.partition_load_seconds.update(dict.fromkeys(range(self.offsets_partitions), 0.0))
        loading = asyncio.ensure_future(runtime.load_all() if stored else _nothing())
        if freeze:
            # What start-up and loading built lives as long as the server: keep it out of every
            # later full garbage collection (they cost ~1.4% of the CPU under commit load).
            loading.add_done_callback(lambda _: gc.freeze())
        self._loading = loading
        self._background.append(loading)  # first: tests and tools await the load through it
        self._background.append(asyncio.ensure_future(self._adopt_swaps_after(loading)))
        self._background.append(asyncio.ensure_future(self._finish_deletions_after(loading)))
        self._background.append(asyncio.ensure_future(self._topic_retention()))
        self._background.append(asyncio.ensure_future(self._log_flush()))
        if runtime is not None:
            _start_runtime(self)
        if self.built("txn") is not None:
            _start_txn(self)

    async def _topic_retention(self) -> None:
        """Topics' retention.ms / retention.bytes, every log.retention.check.interval.ms
        (server/data_plane.py: its code loads at the first pass)."""
        await asyncio.sleep(self.config["log.retention.check.interval.ms"] / 1000.0)
        from kcoord.server.data_plane import topic_retention_loop

        await topic_retention_loop(self)

    async def _log_flush(self) -> None:
        """flush.ms: data partitions' time-based flushes (server/log_flush.py)."""
        from kcoord.server.log_flush import log_flush_loop

        await log_flush_loop(self)

    async def _adopt_swaps_after(self, loading: asyncio.Future[None]) -> None:
        """Once __consumer_offsets is loaded, keep putting in place the segments the
        compaction sidecar commits (storage/swap.py) for every topic whose cleanup.policy has
        `compact`, __transaction_state's once it is loaded too. Not while loading: the loaders
        read segments across awaits."""
        await loading
        interval = self.config["kcoord.compaction.handoff.check.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            assert self.logs is not None
            for topic in list(self.topics.topics.values()):
                partitions = self.logs.partitions(topic.name)  # those with a log
                if not partitions or (topic.name == TXN_TOPIC and not self.txn.loaded):
                    continue
                from kcoord.server.data_plane import cleanup_policy

                if "compact" not in cleanup_policy(self, topic):
                    continue
                for p in partitions:
                    plog = self.logs.existing(topic.name, p)
                    if plog is None:
                        continue
                    try:
                        plog.adopt_swaps()
                    except OSError as e:  # the old segments stay in place: nothing is lost
                        log.error("Could not swap in compacted segments of %s: %s", plog.path, e)

    async def _finish_deletions_after(self, loading: asyncio.Future[None]) -> None:
        """Topic deletions write offset tombstones from the loaded groups: finish the ones
        listed (a crash or a delete during loading left them) once loading is done."""
        await loading
        await self.deleter.finish_all()

    def _create_logs(self, topic: Topic) -> None:
        assert self.logs is not None
        values = self.configs.topic_values(topic)
        seg, roll_ms = values["segment.bytes"], (values["segment.ms"], values["segment.jitter.ms"])
        # __consumer_offsets (and __transaction_state) partitions get their directory at their
        # first write or read: a new server does not create (and fsync) 50 empty partitions
        # before it listens, nor the first transactional client 50 more
        make = self.logs.declare if topic.name in (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC) else self.logs.create
        for p in range(topic.partitions):
            make(topic.name, p, segment_bytes=seg, topic_id=topic.topic_id, roll_ms=roll_ms)
            plog = self.logs.existing(topic.name, p)
            if plog is not None:  # a log opened at start-up took the broker defaults
                plog.segment_bytes = seg
                plog.segment_ms, plog.segment_jitter_ms = roll_ms

    def admit(self, conn: KafkaConnection) -> str | None:
        """Count a new connection, or say why it is refused (max.connections,
        max.connections.per.ip, as Kafka's SocketServer does)."""
        if len(self.connections) >= self.config["max.connections"]:
            return f"the broker has the configured maximum of {self.config['max.connections']} connections"
        n = self._per_ip.get(conn.host, 0)
        if n >= self.config["max.connections.per.ip"]:
            return f"{conn.host} has the configured maximum of {self.config['max.connections.per.ip']} connections"
        self._per_ip[conn.host] = n + 1
        self.connections.add(conn)
        return None

    def release(self, conn: KafkaConnection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            n = self._per_ip.get(conn.host, 1) - 1
            if n > 0:
                self._per_ip[conn.host] = n
            else:
                self._per_ip.pop(conn.host, None)

    def _lock_log_dir(self) -> None:
        """Kafka's `.lock`: one server per log directory (the compactor checks it too)."""
        fd = os.open(self.log_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirLocked(
                f"Failed to acquire lock on file .lock in {self.log_dir}. A Kafka instance in "
                "another process or thread is using this directory."
            ) from None
        self._lock_fd = fd

    @property
    def offsets_partitions(self) -> int:
        """Kafka uses the existing __consumer_offsets partition count over the setting."""
        t = self.topics.get(OFFSETS_TOPIC)
        return t.partitions if t is not None else self.config["offsets.topic.num.partitions"]

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str], internal: bool = False,
        topic_id: Any = None,
    ) -> Topic:
        topic = self.topics.create(name, partitions, configs, internal, topic_id)
        if self.logs is not None:
            self._create_logs(topic)
        log.info("Created topic %s with %d partitions, id %s", name, partitions, topic.topic_id)
        return topic

    def add_partitions(self, topic: Topic, count: int) -> None:
        """CreatePartitions: the registry first (a start-up creates the logs it lists), then
        the new partitions' logs."""
        old = topic.partitions
        self.topics.set_partitions(topic, count)
        if self.logs is not None:
            self._create_logs(topic)
        log.info("Increased the partitions of topic %s from %d to %d", topic.name, old, count)

    async def delete_topic(self, topic: Topic) -> None:
        """Delete a topic (server/topic_deletion.py). Returns once nothing of it remains, or,
        while __consumer_offsets is still loading, once it is gone from the registry and its
        files renamed (the rest follows the load). Raises OSError if the registry cannot be
        written, in which case nothing changed."""
        pending = self.deleter.delete(topic)
        if self.deleter.loaded.is_set():
            await self.deleter.finish(pending)

    async def loaded(self) -> None:
        """Until __consumer_offsets is loaded (the first background task)."""
        if self._background:
            await asyncio.shield(self._background[0])

    def stop_background(self) -> None:
        for task in self._background:
            task.cancel()
        self._background.clear()

    async def stop(self) -> None:
        self.deleter.stop()
        self.stop_background()
        txn, runtime, share = self.built("txn"), self.built("runtime"), self.built("share")
        if txn is not None:
            await txn.stop()
        if share is not None:  # share-state writes in flight finish
            await share.runtime.stop()
        if runtime is not None:
            await runtime.stop()
        if self.logs is not None:
            self.logs.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None
        log.info("Broker stopped")


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


async def _nothing() -> None:
    """The load of a directory with no coordinator state: the coordinators are built empty at
    their first use."""


# ---- the parts built at their first use: name -> builder (sets the attribute, and the others
# it builds with it)


def _build_data_plane(b: Broker) -> None:
    from kcoord.server.data_plane import DataPlane

    b.data_plane = DataPlane(b)


def _build_coordinator(b: Broker) -> None:
    """The group coordinator and its runtime, which writes and loads its __consumer_offsets."""
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.group.coordinator import GroupCoordinator
    from kcoord.server.group.shard import OffsetsRecords

    cfg = b.config
    partitions = b.offsets_partitions
    b.runtime = CoordinatorRuntime(
        # writes no request asked for (a group emptied by a session timeout) and the work of
        # the end of a loop turn (one target assignment for its heartbeats) go to the runtime
        lambda runtime: GroupCoordinator(group_config(cfg, b.group_configs), b.clock, partitions,
                                         background_writer=runtime.write_background,
                                         end_of_turn=runtime.end_of_turn, topics=b.topics,
                                         share_member_left=b.share_member_left),
        OffsetsRecords(partitions),
        b.logs,  # type: ignore[arg-type]
        b.clock,
        cfg["offsets.commit.timeout.ms"],
        cfg["message.max.bytes"],
        cfg["offsets.load.buffer.size"],
        # commit records are fetchable: wake long polls on __consumer_offsets (kcat, lag tools)
        on_append=lambda p: b.data_plane.appended(OFFSETS_TOPIC, p),
        on_applied=b.metrics.records_applied,
        load_hooks=[lambda p, plog: _txn_offsets_loaded(b, p, plog)],
        load_seconds=b.metrics.partition_load_seconds,
    )
    b.coordinator = b.runtime.shard  # type: ignore[assignment]
    if b._loading is not None:  # built after start-up: nothing was on disk to load
        _start_runtime(b)


def _txn_offsets_loaded(b: Broker, partition: int, plog: Any) -> None:
    """A __consumer_offsets partition is replayed: the transaction coordinator (when there is
    one) adds the offsets of transactions still open in it."""
    txn = b.built("txn")
    if txn is not None:
        txn.group_log.on_partition_loaded(partition, plog)


def _start_runtime(b: Broker) -> None:
    from kcoord.server.group.shard import expire_offsets

    b.runtime.every(b.config["offsets.retention.check.interval.ms"],
                    functools.partial(expire_offsets, b.runtime, b.coordinator, b.metrics))


def _build_txn(b: Broker) -> None:
    """The transaction coordinator, beside the group's (which it hooks into: built first)."""
    from kcoord.server.txn.service import TxnService

    _ = b.coordinator, b.data_plane  # built first
    b.txn = TxnService(b)
    if b._loading is not None:
        _start_txn(b)


def _start_txn(b: Broker) -> None:
    assert b._loading is not None
    b._background.append(asyncio.ensure_future(b.txn.run(b._loading)))


_PARTS: dict[str, Callable[[Broker], None]] = {
    "data_plane": _build_data_plane,
    "coordinator": _build_coordinator,
    "runtime": _build_coordinator,
    "txn": _build_txn,
    "share": lambda b: _build_share(b),
}


def _build_share(b: Broker) -> None:
    """The share-partition manager (server/share/manager.py) and its __share_group_state."""
    from kcoord.server.data_plane import partition_log
    from kcoord.server.share.manager import SETTINGS, build_share_manager, committed_reader

    b.share = build_share_manager(
        logs=b.logs, topics=b.topics, clock=b.clock, settings={k: b.config[k] for k in SETTINGS},
        partition_log=lambda name, p: None if (t := b.topics.get(name)) is None else partition_log(b, t, p),
        committed_read=committed_reader(b.data_plane), purgatory=b.data_plane.fetch_purgatory,
        create_state_topic=lambda n, seg: b.create_topic(SHARE_STATE_TOPIC, n, {
            "cleanup.policy": "delete", "retention.ms": "-1", "compression.type": "producer",
            "segment.bytes": str(seg)}, internal=True),
        group_config=b.group_configs.get,  # the GROUP config resource
        group_members=b.coordinator.share.members,  # the share group coordinator's port
        max_message_bytes=b.config["message.max.bytes"])
    b.share_member_left.append(b.share.on_member_left)
