"""A node's view of the cluster, kept from ZooKeeper watches: the live brokers, the
controller, every topic's assignment and every partition's state, and the topics waiting for
deletion. Every node keeps one (the controller decides from its own); `on_change` callbacks run
after each update, in the loop.

ZooKeeper watches fire once: each path is read with a watch, and the watch's firing reads it
again (and sets the next watch). A new session (after the old one expired) starts a new
generation: the previous generation's watches are ignored and everything is read again."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kcoord.server.cluster import znodes
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.cluster.zk import Zk
from kcoord.server.cluster.znodes import BrokerInfo, TopicAssignment

log = logging.getLogger("kcoord.cluster.cache")


class MetadataCache:
    def __init__(self, zk: Zk) -> None:
        self.zk = zk
        self.brokers: dict[int, BrokerInfo] = {}
        self.controller_id = -1
        self.topics: dict[str, TopicAssignment] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.deleting: set[str] = set()
        self._on_change: list[Callable[[], None]] = []
        self._generation = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._notify_pending = False

    def on_change(self, fn: Callable[[], None]) -> None:
        self._on_change.append(fn)

    # ---- what handlers and the controller read

    @property
    def live(self) -> set[int]:
        return set(self.brokers)

    def state(self, topic: str, partition: int) -> PartitionState | None:
        return self.states.get((topic, partition))

    def by_id(self, topic_id: Any) -> TopicAssignment | None:
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def mark_deleting(self, name: str) -> None:
        """A deletion this node asked for (/admin/delete_topics/T written): known before the
        watch brings it."""
        if name not in self.deleting:
            self.deleting = self.deleting | {name}
            self._changed()

    def put_state(self, state: PartitionState) -> None:
        """A state this node wrote (the controller, a leader's ISR change): known before the
        watch brings it; an older version never replaces a newer one."""
        topic = self.topics.get(state.topic)
        replicas = topic.replicas.get(state.partition) if topic is not None else None
        if replicas is not None and replicas != state.replicas:  # the assignment as this cache has it
            state = _with_replicas(state, replicas)
        old = self.states.get((state.topic, state.partition))
        if old is None or old.zk_version <= state.zk_version:
            self.states[(state.topic, state.partition)] = state
            self._changed()

    def put_topic(self, assignment: TopicAssignment) -> None:
        """An assignment this node wrote to /brokers/topics/T (a reassignment's step): known
        before the watch brings it; the partitions' states take its replicas."""
        if assignment.name not in self.topics:
            return  # not read yet (or deleted): the watch brings it
        self.topics[assignment.name] = assignment
        for p, replicas in assignment.replicas.items():
            st = self.states.get((assignment.name, p))
            if st is not None and st.replicas != replicas:
                self.states[(assignment.name, p)] = _with_replicas(st, replicas)
        self._changed()

    # ---- keeping it

    async def start(self) -> None:
        """Read everything (a new generation of watches); returns once the view is complete."""
        self._generation += 1
        gen = self._generation
        await asyncio.gather(self._load_brokers(gen), self._load_controller(gen), self._load_topics(gen, fresh=True),
                             self._load_deletions(gen))

    def stop(self) -> None:
        self._generation += 1
        for t in list(self._tasks):
            t.cancel()

    def _spawn(self, gen: int, coro: Any) -> None:
        if gen != self._generation:
            coro.close()
            return
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.warning("Reading ZooKeeper failed: %r", exc)

    def _watcher(self, gen: int, load: Callable[[int], Any]) -> Callable[[Any], None]:
        return lambda _event: self._spawn(gen, load(gen))

    def _changed(self) -> None:
        if self._notify_pending:
            return
        self._notify_pending = True
        asyncio.get_running_loop().call_soon(self._notify)

    def _notify(self) -> None:
        self._notify_pending = False
        for fn in list(self._on_change):
            try:
                fn()
            except Exception:  # noqa: BLE001 - one listener's bug must not stop the others
                log.exception("A cluster metadata listener failed")

    async def _load_brokers(self, gen: int) -> None:
        ids = await self.zk.children(znodes.BROKER_IDS, watch=self._watcher(gen, self._load_brokers))
        found: dict[int, BrokerInfo] = {}
        for name in ids:
            got = await self.zk.get_or_none(f"{znodes.BROKER_IDS}/{name}")
            if got is not None:
                found[int(name)] = znodes.decode_broker(int(name), got[0])
        if gen == self._generation and found != self.brokers:
            self.brokers = dict(sorted(found.items()))
            log.info("Live brokers: %s", sorted(found))
            self._changed()

    async def _load_controller(self, gen: int) -> None:
        got = await self.zk.get_or_none(znodes.CONTROLLER, watch=self._watcher(gen, self._load_controller))
        cid = znodes.decode_controller(got[0]) if got is not None else -1
        if gen == self._generation and cid != self.controller_id:
            self.controller_id = cid
            self._changed()

    async def _load_deletions(self, gen: int) -> None:
        names = set(await self.zk.children(znodes.DELETE_TOPICS, watch=self._watcher(gen, self._load_deletions)))
        if gen == self._generation and names != self.deleting:
            self.deleting = names
            self._changed()

    async def _load_topics(self, gen: int, fresh: bool = False) -> None:
        """The topic list; `fresh` (a new generation: the old one's watches are gone with its
        session) reads every topic and partition state again, else only the new topics."""
        names = set(await self.zk.children(znodes.TOPICS, watch=self._watcher(gen, self._load_topics)))
        if gen != self._generation:
            return
        for gone in set(self.topics) - names:
            self._forget(gone)
        new = names if fresh else names - set(self.topics)
        await asyncio.gather(*(self._load_topic(gen, name, fresh) for name in new))

    def _forget(self, name: str) -> None:
        self.topics.pop(name, None)
        self.topic_configs.pop(name, None)
        for key in [k for k in self.states if k[0] == name]:
            del self.states[key]
        self._changed()

    def _load_topic(self, gen: int, name: str, fresh: bool = False) -> Any:
        reload_states = fresh

        async def load(g: int) -> None:
            nonlocal reload_states
            got = await self.zk.get_or_none(znodes.topic_path(name), watch=self._watcher(g, load))
            if g != self._generation:
                return
            if got is None:
                self._forget(name)
                return
            assignment = znodes.decode_topic(name, got[0])
            if name not in self.topic_configs:
                cfg = await self.zk.get_or_none(f"{znodes.CONFIG_TOPICS}/{name}")
                self.topic_configs[name] = znodes.decode_topic_config(cfg[0]) if cfg else {}
            old = self.topics.get(name)
            self.topics[name] = assignment
            self._changed()
            known = set(old.replicas) if old is not None and old.topic_id == assignment.topic_id else set()
            if reload_states:  # the first read of this generation: every state, with a new watch
                known, reload_states = set(), False
            loads = []
            for p in assignment.replicas:
                if p not in known:
                    loads.append(self._load_state(name, p)(g))
                elif old is not None and old.replicas[p] != assignment.replicas[p]:
                    st = self.states.get((name, p))
                    if st is not None:
                        self.states[(name, p)] = _with_replicas(st, assignment.replicas[p])
            # awaited: a new session's first read (start) returns once every state is read, so a
            # node never answers from the states it knew under its lost session
            await asyncio.gather(*loads)

        return load(gen)

    def _load_state(self, name: str, partition: int) -> Callable[[int], Any]:
        async def load(g: int) -> None:
            if name not in self.topics:
                return  # the topic went: no more watches for it
            got = await self.zk.get_or_none(znodes.state_path(name, partition), watch=self._watcher(g, load))
            if g != self._generation:
                return
            topic = self.topics.get(name)
            if topic is None or partition not in topic.replicas:
                return
            if got is None:
                if self.states.pop((name, partition), None) is not None:
                    self._changed()
                return
            st = znodes.decode_state(name, partition, topic.replicas[partition], got[0], got[1])
            old = self.states.get((name, partition))
            if old is None or old.zk_version < st.zk_version or old != st:
                if old is None or st.zk_version >= old.zk_version:
                    self.states[(name, partition)] = st
                    self._changed()

        return load


def _with_replicas(st: PartitionState, replicas: tuple[int, ...]) -> PartitionState:
    return PartitionState(st.topic, st.partition, st.leader, st.leader_epoch, st.isr, replicas,
                          st.controller_epoch, st.zk_version)
