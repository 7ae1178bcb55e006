"""This node in a ZooKeeper-mode cluster: its registration (ephemeral /brokers/ids/<id>), its
bid for the controller, its metadata cache, what it tells its replica manager, the leader-side
ISR change, and its controlled shutdown.

Fencing: while the ZooKeeper connection is suspended or the session lost, `leads` answers
False for every partition (produce and fetch answer NOT_LEADER_OR_FOLLOWER): the controller
may already have given the partitions to others. A new session re-registers and reads
everything again before the node leads anything."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from kazoo.protocol.states import KazooState

from kcoord.server.cluster import znodes
from kcoord.server.cluster.assignment import assign_replicas, check_manual
from kcoord.server.cluster.controller import Controller, ControllerSettings, create_topic_znodes
from kcoord.server.cluster.metadata_cache import MetadataCache
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.cluster.ports import ReplicaManagerPort
from kcoord.server.cluster.zk import BadVersionError, NodeExistsError, NoNodeError, Zk
from kcoord.server.cluster.znodes import BrokerInfo, TopicAssignment

log = logging.getLogger("kcoord.cluster")


class ClusterError(Exception):
    """A cluster operation refused with a Kafka error code (its name)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ClusterNode:
    def __init__(self, zk: Zk, broker_id: int, info: BrokerInfo, inter_broker_listener: str | None,
                 settings: ControllerSettings, session_timeout_ms: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.info = info
        self.inter_broker_listener = inter_broker_listener
        self.settings = settings
        self.session_timeout_ms = session_timeout_ms
        self.cache = MetadataCache(zk)
        self.replicas: ReplicaManagerPort | None = None
        self.controller: Controller | None = None
        self.configs: Any = None  # config_changes.ClusterConfigs, set by the builder
        self.cluster_id = ""
        self._session: int | None = None  # the session our registration belongs to
        self._fenced = True
        self._stopping = False
        self._electing = False
        self._hosted: dict[tuple[str, int], PartitionState] = {}
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._creating_internal: set[str] = set()  # internal topics whose creation is under way
        self.cache.on_change(self._on_cache_change)
        zk.on_state(self._on_session_state)

    # ---- what the node's handlers ask

    @property
    def controller_id(self) -> int:
        return self.cache.controller_id

    @property
    def brokers(self) -> list[BrokerInfo]:
        return list(self.cache.brokers.values())

    def leads(self, topic: str, partition: int) -> bool:
        """Whether this node may answer as the partition's leader now."""
        if self._fenced:
            return False
        st = self.cache.state(topic, partition)
        return st is not None and st.leader == self.broker_id

    def leads_anything(self) -> bool:
        """Whether this node may answer as a leader at all now (not fenced)."""
        return not self._fenced

    def topic(self, name: str) -> TopicAssignment | None:
        return None if name in self.cache.deleting else self.cache.topics.get(name)

    def topics(self) -> list[TopicAssignment]:
        return [t for n, t in sorted(self.cache.topics.items()) if n not in self.cache.deleting]

    # ---- start and stop

    async def start(self, local_cluster_id: str) -> str:
        """Connect, register, read the cluster; returns the cluster id (/cluster/id, created
        from this node's when the cluster is new)."""
        await self.zk.start()
        for path in znodes.PERSISTENT:
            await self.zk.ensure_path(path)
        try:
            await self.zk.create(znodes.CLUSTER_ID, znodes.encode_cluster_id(local_cluster_id), makepath=True)
        except NodeExistsError:
            pass
        data, _ = await self.zk.get(znodes.CLUSTER_ID)
        self.cluster_id = znodes.decode_cluster_id(data)
        await self._register()
        await self.cache.start()
        self._fenced = False
        self._spawn(self._elect())
        return self.cluster_id

    async def _register(self) -> None:
        """The ephemeral /brokers/ids/<id>. One left by this id's previous process (killed)
        lives until its session expires: wait for that, as long as a session timeout and a
        margin, then fail as Kafka fails (another broker has the id)."""
        path = znodes.broker_path(self.broker_id)
        deadline = time.monotonic() + 2 * self.session_timeout_ms / 1000 + 5
        while True:
            try:
                await self.zk.create(path, znodes.encode_broker(self.info), ephemeral=True)
                break
            except NodeExistsError:
                if time.monotonic() > deadline:
                    raise ValueError(f"Error while creating ephemeral at {path}, node already exists: "
                                       f"another broker is registered with id {self.broker_id}") from None
                await asyncio.sleep(0.5)
        self._session = self.zk.session_id
        log.info("Registered broker %d at path %s with addresses: %s, rack %s", self.broker_id, path,
                 self.info.endpoints, self.info.rack)

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """Kafka's controlled shutdown, through ZooKeeper: the node withdraws its registration
        (the controller treats it as gone: another ISR member leads each partition it led, it
        leaves every ISR) and keeps serving until no partition it leads has another live ISR
        member to move to, or the timeout; then it resigns as controller."""
        self._stopping = True
        if self.zk.connected:
            try:
                await self.zk.delete(znodes.broker_path(self.broker_id))
            except NoNodeError:
                pass
            deadline = time.monotonic() + timeout_s
            while self._movable() and time.monotonic() < deadline:
                self._changed.clear()
                try:
                    await asyncio.wait_for(self._changed.wait(), max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    break
            left = self._movable()
            log.info("Controlled shutdown of broker %d %s", self.broker_id,
                     "succeeded" if not left else f"timed out with {len(left)} partitions still led here")
        self._resign_controller()

    def _movable(self) -> list[tuple[str, int]]:
        live = self.cache.live - {self.broker_id}
        return [k for k, s in self.cache.states.items()
                if s.leader == self.broker_id and any(r in live for r in s.isr if r != self.broker_id)]

    async def stop(self) -> None:
        self._stopping = True
        self._fenced = True
        self._resign_controller()
        self.cache.stop()
        if self.configs is not None:
            self.configs.stop()
        for t in list(self._tasks):
            t.cancel()
        await self.zk.stop()

    # ---- the controller

    def _resign_controller(self) -> None:
        c, self.controller = self.controller, None
        if c is None:
            return
        c.stop()
        if self.zk.connected:
            self._spawn(self._delete_controller_znode(c.epoch))

    async def _delete_controller_znode(self, epoch: int) -> None:
        got = await self.zk.get_or_none(znodes.CONTROLLER)
        if got is not None and znodes.decode_controller(got[0]) == self.broker_id:
            try:
                await self.zk.delete(znodes.CONTROLLER, version=got[1])
            except (NoNodeError, BadVersionError):
                pass
            log.info("Resigned as controller (epoch %d)", epoch)

    async def _elect(self) -> None:
        """A bid for /controller (ephemeral) that bumps /controller_epoch in the same multi-op."""
        if self._electing or self.controller is not None or self._stopping or self._fenced:
            return
        self._electing = True
        try:
            got = await self.zk.get_or_none(znodes.CONTROLLER_EPOCH)
            if got is None:
                try:
                    await self.zk.create(znodes.CONTROLLER_EPOCH, znodes.encode_epoch(0))
                except NodeExistsError:
                    pass
                got = await self.zk.get(znodes.CONTROLLER_EPOCH)
            epoch, version = znodes.decode_epoch(got[0]), got[1]
            data = znodes.encode_controller(self.broker_id)

            def bid(tx: Any) -> None:
                tx.create(znodes.CONTROLLER, data, ephemeral=True)
                tx.set_data(znodes.CONTROLLER_EPOCH, znodes.encode_epoch(epoch + 1), version)

            try:
                await self.zk.transaction(bid)
            except (NodeExistsError, BadVersionError):
                return  # another broker won
            log.info("Broker %d is the controller, epoch %d", self.broker_id, epoch + 1)
            self.controller = Controller(self.zk, self.cache, self.broker_id, epoch + 1, version + 1, self.settings,
                                         self._resign_controller)
            self.cache.controller_id = self.broker_id
            self.controller.start()
        finally:
            self._electing = False

    # ---- changes

    def _on_cache_change(self) -> None:
        self._changed.set()
        cache = self.cache
        if cache.controller_id == -1 and not self._stopping:
            self._spawn(self._elect())
        elif self.controller is not None and cache.controller_id not in (-1, self.broker_id):
            log.info("Broker %d is the controller now; resigning", cache.controller_id)
            c, self.controller = self.controller, None
            c.stop()
        self._tell_replicas()

    def _tell_replicas(self) -> None:
        if self.replicas is None:
            return
        me = self.broker_id
        hosted = {k: s for k, s in self.cache.states.items() if me in s.replicas}
        if hosted == self._hosted:
            return
        gone = [k for k in self._hosted if k not in hosted]
        self._hosted = hosted
        if gone:
            topics = self.cache.topics
            deleted = [k for k in gone if k[0] not in topics]
            # reassigned away (the assignment no longer lists this node): Kafka's StopReplica
            # with delete, the log goes; a partition merely without a state stops only
            removed = [k for k in gone if k[0] in topics and me not in topics[k[0]].replicas.get(k[1], (me,))]
            moved = [k for k in gone if k not in deleted and k not in removed]
            if deleted or removed:
                self.replicas.stop_replicas(deleted + removed, delete=True)
            if moved:
                self.replicas.stop_replicas(moved, delete=False)
        self.replicas.apply(sorted(hosted.values(), key=lambda s: (s.topic, s.partition)), self.endpoints())

    def endpoints(self) -> dict[int, tuple[str, int]]:
        """Every live broker's endpoint on the inter-broker listener."""
        out = {}
        for b in self.cache.brokers.values():
            ep = b.endpoint(self.inter_broker_listener) or b.endpoint(None)
            if ep is not None:
                out[b.broker_id] = ep
        return out

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.SUSPENDED or state == KazooState.LOST:
            if not self._fenced:
                log.warning("ZooKeeper connection %s: no longer answering as leader of any partition",
                            "lost" if state == KazooState.LOST else "suspended")
            self._fenced = True
            if state == KazooState.LOST and self.controller is not None:
                c, self.controller = self.controller, None
                c.stop()
        elif state == KazooState.CONNECTED and not self._stopping and self._session is not None:
            if self.zk.session_id != self._session:
                self._spawn(self._new_session())
            else:
                self._fenced = False
                if self.controller is not None:
                    self.controller.poke()
                else:
                    self._spawn(self._elect())

    async def _new_session(self) -> None:
        log.info("New ZooKeeper session: registering again")
        self._hosted = {}  # the replica manager is told every state again (it may have been fenced)
        await self._register()
        await self.cache.start()
        if self.configs is not None:  # the changes made while the session was lost
            await self.configs.start()
        self._fenced = False
        await self._elect()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("Cluster task failed: %r", task.exception())

    # ---- admin (any node, as Kafka's ZooKeeper-mode brokers do)

    async def create_topic(self, name: str, partitions: int, replication_factor: int,
                           assignment: dict[int, tuple[int, ...]] | None, configs: dict[str, str],
                           validate_only: bool = False) -> TopicAssignment | None:
        """Writes /config/topics/T and /brokers/topics/T; the controller elects the leaders.
        ClusterError TOPIC_ALREADY_EXISTS / INVALID_REPLICATION_FACTOR / INVALID_REPLICA_ASSIGNMENT."""
        from kcoord.server.cluster.assignment import AssignmentError

        if name in self.cache.topics:
            raise ClusterError("TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists.")
        if name in self.cache.deleting:
            raise ClusterError("TOPIC_ALREADY_EXISTS", f"Topic '{name}' is marked for deletion.")
        live = {b.broker_id: b.rack for b in self.cache.brokers.values()}
        if assignment:
            problem = check_manual(assignment, set(live))
            if problem:
                raise ClusterError("INVALID_REPLICA_ASSIGNMENT", problem)
            replicas = assignment
        else:
            try:
                replicas = assign_replicas(live, partitions, replication_factor)
            except AssignmentError as e:
                raise ClusterError("INVALID_REPLICATION_FACTOR", str(e)) from None
        if validate_only:
            return TopicAssignment(name, znodes.topic_id_from_text("AAAAAAAAAAAAAAAAAAAAAA"), replicas)
        try:
            return await create_topic_znodes(self.zk, name, replicas, configs)
        except NodeExistsError:
            raise ClusterError("TOPIC_ALREADY_EXISTS", f"Topic '{name}' already exists.") from None

    async def add_partitions(self, name: str, count: int, assignment: list[tuple[int, ...]] | None,
                             validate_only: bool = False) -> None:
        """CreatePartitions: the new partitions' replicas (given, or assigned as Kafka's admin
        path continues an existing topic's walk) written to /brokers/topics/T at the version
        read; the controller elects their leaders. ClusterError INVALID_REPLICA_ASSIGNMENT /
        INVALID_REPLICATION_FACTOR / UNKNOWN_TOPIC_OR_PARTITION."""
        from kcoord.server.cluster.assignment import AssignmentError

        got = await self.zk.get_or_none(znodes.topic_path(name))
        if got is None or name in self.cache.deleting:
            raise ClusterError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic {name} does not exist.")
        topic = znodes.decode_topic(name, got[0])
        if topic.adding or topic.removing:  # Kafka refuses while any partition of it is moving
            raise ClusterError("REASSIGNMENT_IN_PROGRESS", f"A partition reassignment is in progress for the topic '{name}'.")
        rf = len(topic.replicas[0])
        live = {b.broker_id: b.rack for b in self.cache.brokers.values()}
        first = topic.partitions
        if assignment is not None:
            new = {first + i: tuple(r) for i, r in enumerate(assignment)}
            problem = check_manual({**{0: topic.replicas[0]}, **new}, set(live) | set(topic.replicas[0]))
            if problem is None and any(len(r) != rf for r in new.values()):
                problem = f"Inconsistent replication factor between partitions, partition 0 has {rf}"
            if problem is not None:
                raise ClusterError("INVALID_REPLICA_ASSIGNMENT", problem)
        else:
            ids = sorted(live)
            start = max(0, next((i for i, b in enumerate(ids) if b >= topic.replicas[0][0]), 0))
            try:
                new = assign_replicas(live, count - first, rf, start_partition=first, start_index=start, shift=start)
            except AssignmentError as e:
                raise ClusterError("INVALID_REPLICATION_FACTOR", str(e)) from None
        if validate_only:
            return
        grown = TopicAssignment(name, topic.topic_id, {**topic.replicas, **new})
        try:
            await self.zk.set(znodes.topic_path(name), znodes.encode_topic(grown), version=got[1])
        except (BadVersionError, NoNodeError):
            raise ClusterError("REASSIGNMENT_IN_PROGRESS", f"Topic {name} changed meanwhile; try again.") from None

    def create_topic_soon(self, name: str, partitions: int, replication_factor: int) -> None:
        """Metadata's auto-creation: in the background (a race with another creation of the
        same name is no error)."""

        async def create() -> None:
            try:
                await self.create_topic(name, partitions, replication_factor, None, {})
            except ClusterError as e:
                log.info("Auto-creation of %s: %s", name, e.message)

        self._spawn(create())

    def create_internal_topic_soon(self, name: str) -> None:
        """Kafka's ZooKeeper-mode FindCoordinator (and Metadata) for an internal topic that does
        not exist yet: this node writes it to ZooKeeper in the background, with the partitions,
        replication factor and configs of `settings.internal_topics` (offsets.topic.num.partitions
        and offsets.topic.replication.factor for __consumer_offsets; transaction.state.log.* for
        __transaction_state); the controller elects its leaders. While fewer brokers are
        registered than its replication factor nothing is written (INVALID_REPLICATION_FACTOR,
        logged): the caller answers COORDINATOR_NOT_AVAILABLE and the next lookup tries again."""
        if name in self.cache.topics or name in self._creating_internal or name not in self.settings.internal_topics:
            return
        partitions, rf, configs = self.settings.internal_topics[name]
        self._creating_internal.add(name)

        async def create() -> None:
            try:
                await self.create_topic(name, partitions, rf, None, dict(configs))
                log.info("Created internal topic %s: %d partitions, replication factor %d", name, partitions, rf)
            except ClusterError as e:
                log.info("Not creating internal topic %s yet: %s", name, e.message)
            finally:
                self._creating_internal.discard(name)

        self._spawn(create())

    async def delete_topic(self, name: str) -> None:
        """/admin/delete_topics/T: the controller deletes the topic."""
        try:
            await self.zk.create(f"{znodes.DELETE_TOPICS}/{name}")
        except NodeExistsError:
            pass
        self.cache.mark_deleting(name)

    async def wait_deleted(self, name: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while name in self.cache.topics and time.monotonic() < deadline:
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
        return name not in self.cache.topics

    # ---- the replica manager's ISR changes

    async def alter_isr(self, state: PartitionState, new_isr: tuple[int, ...]) -> PartitionState | None:
        """The leader's ISR change, written to the state znode only if it is still the version
        the leader knows (a controller's election or another ISR change since fences it)."""
        if state.leader != self.broker_id or self._fenced:
            return None
        new = PartitionState(state.topic, state.partition, state.leader, state.leader_epoch, tuple(new_isr),
                             state.replicas, state.controller_epoch, state.zk_version + 1)
        try:
            version = await self.zk.set(znodes.state_path(state.topic, state.partition), znodes.encode_state(new),
                                        version=state.zk_version)
        except (BadVersionError, NoNodeError):
            return None
        new = PartitionState(new.topic, new.partition, new.leader, new.leader_epoch, new.isr, new.replicas,
                             new.controller_epoch, version)
        self.cache.put_state(new)
        return new

    async def elect_preferred(self, partitions: list[tuple[str, int]] | None) -> list[tuple[str, int]]:
        """On the controller: preferred replica election now (ElectLeaders)."""
        if self.controller is None:
            raise ClusterError("NOT_CONTROLLER", "This node is not the controller.")
        return await self.controller.rebalance(partitions)
