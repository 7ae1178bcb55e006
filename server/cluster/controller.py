"""The controller, while this node holds /controller: it makes ZooKeeper's partition states
follow the live brokers (docs/cluster.md has the tables).

Level-triggered: every change of the node's metadata cache (a broker came or went, a topic was
created or marked for deletion, a state changed) schedules one pass of `reconcile`, which
compares every partition's state with the live brokers and writes what the election rules
(server/cluster/election.py) decide. Each write is a ZooKeeper multi-op that also checks
/controller_epoch's version: a controller that lost its office (another one bumped the epoch)
cannot write anything, and a state that changed since it was read (a leader's ISR change) fails
its version check and is decided again from the newer state at the next pass."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kcoord.server.cluster import election, znodes
from kcoord.server.cluster.metadata_cache import MetadataCache
from kcoord.server.cluster.partition_state import NO_LEADER, PartitionState
from kcoord.server.cluster.reassignment import Reassignments, reassigning
from kcoord.server.cluster.zk import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, Zk

log = logging.getLogger("kcoord.cluster.controller")


class ControllerSettings:
    def __init__(self, unclean: Callable[[str], bool], auto_rebalance: bool, imbalance_check_s: float,
                 imbalance_percentage: int, internal_topics: dict[str, tuple[int, int, dict[str, str]]]) -> None:
        self.unclean = unclean  # topic -> unclean.leader.election.enable (its topic config over the broker's)
        self.auto_rebalance = auto_rebalance
        self.imbalance_check_s = imbalance_check_s
        self.imbalance_percentage = imbalance_percentage
        # the internal topics a node creates at the first FindCoordinator that needs one (Kafka's
        # ZooKeeper-mode brokers; ClusterNode.create_internal_topic_soon): name -> (partitions, rf, configs)
        self.internal_topics = internal_topics


class Controller:
    def __init__(self, zk: Zk, cache: MetadataCache, broker_id: int, epoch: int, epoch_zk_version: int,
                 settings: ControllerSettings, resign: Callable[[], None]) -> None:
        self.zk = zk
        self.cache = cache
        self.broker_id = broker_id
        self.epoch = epoch
        self.epoch_zk_version = epoch_zk_version
        self.settings = settings
        self._resign = resign
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._rebalance: asyncio.Task[None] | None = None
        self.active = True
        self.reassignments = Reassignments(self)
        self._others: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        self.cache.on_change(self.poke)
        self._task = asyncio.ensure_future(self._run())
        self.spawn(self.reassignments.watch_legacy())
        if self.settings.auto_rebalance:
            self._rebalance = asyncio.ensure_future(self._rebalance_loop())
        self.poke()

    def stop(self) -> None:
        self.active = False
        for t in (self._task, self._rebalance, *self._others):
            if t is not None:
                t.cancel()
        try:
            self.cache._on_change.remove(self.poke)
        except ValueError:
            pass

    def poke(self) -> None:
        self._dirty.set()

    def spawn(self, coro: Any) -> None:
        """A task of this controller's (cancelled when it stops)."""
        task = asyncio.ensure_future(coro)
        self._others.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._others.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("Controller task failed: %r", task.exception())

    async def _run(self) -> None:
        while self.active:
            await self._dirty.wait()
            self._dirty.clear()
            if not self.zk.connected:
                continue  # the next change of state (a reconnection) pokes again
            try:
                await self.reconcile()
            except BadVersionError:
                if await self._still_controller():
                    self.poke()  # a state changed under us: decide again from the newer one
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a pass that failed is retried at the next change
                log.exception("Controller pass failed")
                await asyncio.sleep(1.0)
                self.poke()

    async def _still_controller(self) -> bool:
        got = await self.zk.get_or_none(znodes.CONTROLLER_EPOCH)
        if got is None or got[1] != self.epoch_zk_version:
            log.info("Controller epoch %d is over (another controller was elected); resigning", self.epoch)
            self.active = False
            self._resign()
            return False
        return True

    # ---- one pass

    async def reconcile(self) -> None:
        cache = self.cache
        live = cache.live
        for name in sorted(cache.deleting):
            await self._delete_topic(name)
        for name, topic in sorted(cache.topics.items()):
            if name in cache.deleting:
                continue
            for p, replicas in topic.replicas.items():
                await self._partition(name, p, replicas, live)
        for name, p in reassigning(cache):  # resumed from the topic znodes after a failover too
            if name not in cache.deleting:
                await self.reassignments.maybe_complete(name, p)

    async def _partition(self, topic: str, p: int, replicas: tuple[int, ...], live: set[int]) -> None:
        st = self.cache.state(topic, p)
        if st is None:
            if not await self._state_absent(topic, p):
                return  # the cache has not read it yet: its watch brings it and pokes again
            e = election.new_partition(replicas, live)
            if e is None:
                return  # no replica is up: the partition waits (Kafka's NewPartition)
            await self._create_state(PartitionState(topic, p, e.leader, 0, e.isr, replicas, self.epoch, 0))
            return
        leader, isr = st.leader, st.isr
        if leader == NO_LEADER or leader not in live:
            e = election.offline(replicas, isr, live, self.settings.unclean(topic))
            if e is not None:
                if e.unclean:
                    log.warning("Unclean leader election for %s-%d: %d, outside the ISR %s", topic, p, e.leader, isr)
                await self._write(st, e.leader, e.isr)
                return
            # no live replica of the ISR: leaderless, the dead leader leaves; the last ISR member stays
            new_leader, new_isr = leader, isr
            for gone in [r for r in isr if r not in live]:
                new_leader, new_isr = election.without_replica(new_leader, new_isr, gone)
            if (new_leader, new_isr) != (leader, isr):
                await self._write(st, new_leader, new_isr)
            return
        dead = [r for r in isr if r not in live]
        if dead:
            new_leader, new_isr = leader, isr
            for gone in dead:
                new_leader, new_isr = election.without_replica(new_leader, new_isr, gone)
            await self._write(st, new_leader, new_isr)

    async def _state_absent(self, topic: str, p: int) -> bool:
        return await self.zk.get_or_none(znodes.state_path(topic, p)) is None

    def _fenced(self, tx: Any) -> None:
        tx.check(znodes.CONTROLLER_EPOCH, self.epoch_zk_version)

    async def _create_state(self, st: PartitionState) -> None:
        data = znodes.encode_state(st)
        await self.zk.ensure_path(znodes.partitions_path(st.topic) + f"/{st.partition}")
        try:
            await self.zk.transaction(lambda tx: (self._fenced(tx), tx.create(znodes.state_path(st.topic, st.partition),
                                                                            data)))
        except NodeExistsError:
            return
        log.info("Partition %s-%d online: leader %d, ISR %s", st.topic, st.partition, st.leader, list(st.isr))
        self.cache.put_state(st)

    async def _write(self, old: PartitionState, leader: int, isr: tuple[int, ...],
                     bump: bool = True) -> PartitionState:
        new = PartitionState(old.topic, old.partition, leader, old.leader_epoch + (1 if bump else 0), tuple(isr),
                             old.replicas, self.epoch, old.zk_version + 1)
        path = znodes.state_path(old.topic, old.partition)
        data = znodes.encode_state(new)
        await self.zk.transaction(lambda tx: (self._fenced(tx), tx.set_data(path, data, old.zk_version)))
        log.info("Partition %s-%d: leader %d -> %d, epoch %d, ISR %s", old.topic, old.partition, old.leader, leader,
                 new.leader_epoch, list(isr))
        self.cache.put_state(new)
        return new

    async def _delete_topic(self, name: str) -> None:
        """/admin/delete_topics/T: the topic's znodes go (the nodes hosting it see it gone and
        delete their replicas), then the request."""
        log.info("Deleting topic %s", name)
        try:
            await self.zk.delete(znodes.topic_path(name), recursive=True)
        except NoNodeError:
            pass
        for path in (f"{znodes.CONFIG_TOPICS}/{name}", f"{znodes.DELETE_TOPICS}/{name}"):
            try:
                await self.zk.delete(path)
            except (NoNodeError, NotEmptyError):
                pass

    # ---- preferred replicas

    async def _rebalance_loop(self) -> None:
        while self.active:
            await asyncio.sleep(self.settings.imbalance_check_s)
            if self.zk.connected:
                try:
                    await self.rebalance()
                except BadVersionError:
                    self.poke()
                except asyncio.CancelledError:
                    raise
                except Exception:  # noqa: BLE001 - tried again at the next interval
                    log.exception("Preferred replica election failed")

    async def rebalance(self, only: list[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
        """Move leadership back to the preferred replicas (of `only`, else of the partitions
        past leader.imbalance.per.broker.percentage). Returns the partitions moved."""
        moving = set(reassigning(self.cache))  # Kafka leaves partitions being reassigned alone
        states = {k: s for k, s in self.cache.states.items()
                  if s.replicas and k[0] not in self.cache.deleting and k not in moving}
        todo = only if only is not None else election.imbalanced(
            {k: s.leader for k, s in states.items()}, {k: s.preferred_leader for k, s in states.items()},
            self.settings.imbalance_percentage)
        moved = []
        live = self.cache.live
        for key in todo:
            st = states.get(key)
            if st is None or st.leader == st.preferred_leader:
                continue
            e = election.preferred(st.replicas, st.isr, live)
            if e is not None:
                await self._write(st, e.leader, e.isr)
                moved.append(key)
        return moved


    async def elect(self, topic: str, partition: int, unclean: bool) -> tuple[str, str | None]:
        """ElectLeaders for one partition: (error code name, message); NONE when elected."""
        st = self.cache.state(topic, partition)
        if st is None:
            return "UNKNOWN_TOPIC_OR_PARTITION", f"No such partition as {topic}-{partition}"
        live = self.cache.live
        if unclean:
            if st.leader != NO_LEADER and st.leader in live:
                return "ELECTION_NOT_NEEDED", "Leader election not needed for topic partition."
            e = election.offline(st.replicas, st.isr, live, True)
            strategy = "OfflinePartitionLeaderElectionStrategy(true)"
        else:
            if st.leader == st.preferred_leader:
                return "ELECTION_NOT_NEEDED", "Leader election not needed for topic partition."
            e = election.preferred(st.replicas, st.isr, live)
            strategy = "PreferredReplicaPartitionLeaderElectionStrategy"
        if e is None:
            code = "ELIGIBLE_LEADERS_NOT_AVAILABLE" if unclean else "PREFERRED_LEADER_NOT_AVAILABLE"
            return code, f"Failed to elect leader for partition {topic}-{partition} under strategy {strategy}"
        await self._write(st, e.leader, e.isr)
        return "NONE", None


async def create_topic_znodes(zk: Zk, name: str, replicas: dict[int, tuple[int, ...]], configs: dict[str, str],
                              topic_id: Any = None) -> znodes.TopicAssignment:
    """Kafka's admin path: /config/topics/T first, then /brokers/topics/T (which the controller
    watches); NodeExistsError when the topic exists."""
    import uuid

    assignment = znodes.TopicAssignment(name, topic_id or uuid.uuid4(), dict(sorted(replicas.items())))
    await zk.ensure_path(znodes.CONFIG_TOPICS)
    cfg_path = f"{znodes.CONFIG_TOPICS}/{name}"
    data = znodes.encode_topic(assignment)
    cfg = znodes.encode_topic_config(configs)

    def build(tx: Any) -> None:
        tx.create(cfg_path, cfg)
        tx.create(znodes.topic_path(name), data)

    try:
        await zk.transaction(build)
    except NodeExistsError:
        if await zk.get_or_none(znodes.topic_path(name)) is not None:
            raise
        await zk.set(cfg_path, cfg)  # a config left by an earlier topic of that name
        await zk.create(znodes.topic_path(name), data)
    return assignment
