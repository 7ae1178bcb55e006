"""The node: what outlives a reset of the log directory's state (configuration, cluster
identity, connections, security and quota state, metrics, the clock), start-up (lock the
directory, open its state, start the background tasks) and orderly shutdown.

The parts built from the log directory (topics, logs, the data plane, the coordinators, the
handler areas) come from the composition root, server/node.py (`Broker.parts`); the ones a
new server does not need before its first requests are built there at their first use
(tests/unit/test_startup.py lists what a new server imports)."""
from __future__ import annotations

import asyncio
import fcntl
import gc
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from kcoord.server.clock import SystemClock
from kcoord.server.config import Config
from kcoord.server.config_layers import BrokerConfigs
from kcoord.server.connections import Connections
from kcoord.server.group_configs import GroupConfigs
from kcoord.server.metrics import Metrics
from kcoord.server.node import Parts, build_parts, start_group_runtime
from kcoord.server.quotas.manager import QuotaManager
from kcoord.server.security.state import SecurityState
from kcoord.server.topic_deletion import TopicDeleter
from kcoord.server.topics import Topic, TopicRegistry, load_or_create_meta
from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.broker")


class LogDirLocked(RuntimeError):
    """Another server already uses the log directory."""


class Broker:
    """The process's node: what outlives a reset (configuration, identity, connections,
    security and quota state, metrics, the clock), start-up and shutdown, and the parts built
    from the log directory by the composition root (`self.parts`, server/node.py)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.log_dir = config.log_dir
        self.cluster_id = ""
        self.connections = Connections(config)  # admitted and released by each connection (server/connections.py)
        self.metrics = Metrics()
        self.security = SecurityState(config)  # SCRAM credentials, the ACL authorizer
        self.quotas = QuotaManager(config, self.log_dir)  # client quotas (server/quotas/)
        self.clock = SystemClock()
        # the parts of the log directory's state (open_state); the three below are its
        # eager parts, kept here for the tools and tests that read them
        self.parts: Parts
        self.topics = TopicRegistry(self.log_dir)
        self.logs: LogManager | None = None
        self.configs: BrokerConfigs  # dynamic broker configs, topic values (open_state)
        self.group_configs: GroupConfigs  # the GROUP config resource, in the same store (open_state)
        self._parts_watchers: list[Callable[[Parts], None]] = []  # told of every new Parts (watch_parts)
        self._background: list[asyncio.Future[None]] = []
        self._loading: asyncio.Future[None] | None = None  # set once the background tasks run
        self.deleter: TopicDeleter
        self._lock_fd: int | None = None
        self.cluster: Any = None  # kcoord.server.cluster.node.ClusterNode when zookeeper.connect is set (start_cluster)
        self.replicas: Any = None  # its replica manager when replicated (server/replication/; set by the tests for now)

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
        """The parts, built anew from what the log directory holds (at start-up; and after a
        reset emptied it, server/control/reset.py) by the composition root, server/node.py."""
        self._loading = None  # until start_background: a part built before starts nothing
        parts = self.parts = build_parts(self)
        self.topics, self.configs, self.logs, self.deleter = parts.topics, parts.configs, parts.logs, parts.deleter
        self.group_configs = parts.group_configs
        for told in self._parts_watchers:
            told(parts)

    def watch_parts(self, told: Callable[[Parts], None]) -> None:
        """told(parts) now if the parts are built, and whenever they are built anew (a reset):
        for the composition root (server/node.py), which hands its parts on."""
        self._parts_watchers.append(told)
        parts: Parts | None = getattr(self, "parts", None)  # set by open_state
        if parts is not None:
            told(parts)

    def reset(self) -> dict[str, int]:
        """Back to a new server without a restart (the control API's reset,
        server/control/reset.py): every connection closed, the parts' work stopped, the
        directory emptied, the parts built anew. Returns what was dropped. Runs on the event
        loop, between requests, so no request sees half of it."""
        from kcoord.server.control.reset import empty_log_dir

        if self.cluster is not None or self.config["zookeeper.connect"]:
            # the cluster layer (coordinators following leadership, producer-id blocks, replicas)
            # is wired to these parts at start-up; the control API refuses this first (plane.py)
            raise RuntimeError("a cluster node has no reset")
        started = time.perf_counter()
        # the parts a new server builds at their first use may not exist
        parts = self.parts
        coordinator, runtime, txn = parts.coordinator.built(), parts.runtime.built(), parts.txn.built()
        dropped = {"topics": sum(1 for t in parts.topics.topics.values() if not t.internal),
                   "groups": sum(1 for g in coordinator.groups() if not g.is_dead()) if coordinator is not None else 0,
                   "connections": len(self.connections)}
        for conn in list(self.connections):
            conn.close()
        self.stop_background()
        parts.deleter.stop()
        if runtime is not None:
            runtime.stop_tasks()
        # every timer of the old state (sessions, joins, long polls, commit timeouts) becomes a no-op
        self.clock.close()
        self.clock = SystemClock()
        for name in set(parts.configs.cluster) | set(parts.configs.node):
            self.config.apply(name, None)  # dynamic broker configs (AlterConfigs) go with the state
        # the transaction coordinator's marker writes and periodic tasks stop before they can
        # touch the new state; the rest of its stop (waiting for its writes) runs on its own
        if txn is not None:
            for task in list(txn.markers.in_flight):
                task.cancel()
            asyncio.ensure_future(txn.stop())
        # writes staged this loop turn go to the old logs now (their answers go nowhere: the
        # connections are closed); fsync rounds in flight use their own file descriptors
        if runtime is not None:
            runtime.writer.flush()
        if txn is not None:
            txn.runtime.writer.flush()
        parts.logs.discard()
        empty_log_dir(self.log_dir)
        self.quotas.reset()  # client quotas go with the state (their file is removed above)
        self.metrics = Metrics()
        self.open_state()
        # a server that is reset many times must not keep every earlier state frozen out of the
        # garbage collector (start-up freezes what it loaded)
        gc.unfreeze()
        self.start_background(freeze=False)  # its load finishes, then removes the -delete directories
        log.info("Reset: dropped %d topics, %d groups, %d connections in %.1f ms", dropped["topics"],
                 dropped["groups"], dropped["connections"], (time.perf_counter() - started) * 1000)
        return dropped

    def loading_future(self) -> asyncio.Future[None] | None:
        """__consumer_offsets' load, once start_background ran (None before)."""
        return self._loading

    def add_background(self, task: asyncio.Future[None]) -> None:
        """A part's background task, cancelled by stop_background."""
        self._background.append(task)

    def start_background(self, freeze: bool = True) -> None:
        """After the listeners are up: load __consumer_offsets (groups answer
        COORDINATOR_LOAD_IN_PROGRESS meanwhile) and start the retention tasks; a part built
        later starts its own when it is built."""
        parts = self.parts
        runtime = parts.runtime.built()
        # Only state found on disk is loaded. A runtime built since, at a request's first use
        # (a group request can arrive on the first listener while the next one starts), had
        # nothing to load, and loading it now would drop the groups those requests created:
        # their parked JoinGroups would be answered NOT_COORDINATOR.
        stored = runtime is not None and parts.state_stored
        if not stored:  # every partition is loaded as it is, empty
            self.metrics.partition_load_seconds.update(dict.fromkeys(range(self.offsets_partitions), 0.0))
        loading = asyncio.ensure_future(runtime.load_all() if stored else _nothing())  # type: ignore[union-attr]
        if freeze:
            # What start-up and loading built lives as long as the server: keep it out of every
            # later full garbage collection (they cost ~1.4% of the CPU under commit load).
            loading.add_done_callback(lambda _: gc.freeze())
        self._loading = loading
        self._background.append(loading)  # first: tests and tools await the load through it
        self._background.append(asyncio.ensure_future(parts.deleter.finish_all_after(loading)))
        for loop in parts.loops:  # retention, flush.ms, compaction hand-off (server/node.py)
            self._background.append(asyncio.ensure_future(loop(loading)))
        if runtime is not None:
            start_group_runtime(self.config, self.metrics, runtime)
        txn = parts.txn.built()
        if txn is not None:
            self._background.append(asyncio.ensure_future(txn.run(loading)))

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
        return self.parts.topic_logs.offsets_partitions(self.config["offsets.topic.num.partitions"])

    def create_topic(self, name: str, partitions: int, configs: dict[str, str], internal: bool = False,
                     topic_id: Any = None) -> Topic:
        return self.parts.topic_logs.create_topic(name, partitions, configs, internal, topic_id)

    def add_partitions(self, topic: Topic, count: int) -> None:
        self.parts.topic_logs.add_partitions(topic, count)

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
        txn, runtime, share = self.parts.txn.built(), self.parts.runtime.built(), self.parts.share.built()
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


async def _nothing() -> None:
    """The load of a directory with no coordinator state: the coordinators are built empty at
    their first use."""
