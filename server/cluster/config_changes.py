"""Topic and broker config changes across the cluster, as Kafka's ZooKeeper mode carries them
(AdminZkClient.changeConfigs and the brokers' ZkConfigManager):

| znode | holds |
|---|---|
| `/config/topics/<T>` | `{"version":1,"config":{..}}`: the topic's own configs (its whole map) |
| `/config/brokers/<id>` | the node's dynamic per-broker configs (DYNAMIC_BROKER_CONFIG) |
| `/config/brokers/<default>` | the cluster-wide dynamic defaults (DYNAMIC_DEFAULT_BROKER_CONFIG) |
| `/config/changes/config_change_<seq>` | persistent sequential: `{"version":2,"entity_path":"topics/T"}` (or `brokers/<id>`, `brokers/<default>`) |

The node that receives AlterConfigs / IncrementalAlterConfigs writes the entity's znode and
the change notification in one multi-op, then applies the change itself. Every node watches
/config/changes: for each notification newer than the last one it processed it reads the
entity's znode and applies it (a topic's configs to its registry and logs, and to the metadata
cache the controller reads; the default broker configs, and its own id's, to its config
layers). At start-up (and on a new session) a node first applies the current content of
every entity it cares about (the changes made while it was down), then takes notifications
from the newest one on. Notifications older than 15 minutes are deleted by whichever node
processes changes (Kafka's changeExpirationMs)."""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from kcoord.server.cluster import znodes
from kcoord.server.cluster.zk import NodeExistsError, NoNodeError, Zk

log = logging.getLogger("kcoord.cluster.configs")

CONFIG_BROKERS = "/config/brokers"
DEFAULT = "<default>"
PREFIX = "config_change_"
EXPIRATION_MS = 15 * 60 * 1000

# (kind, name, configs): kind "topics" or "brokers"; a broker name is an id or "<default>"
Apply = Callable[[str, str, dict[str, str]], None]


def entity_path(kind: str, name: str) -> str:
    return f"/config/{kind}/{name}"


def encode_change(kind: str, name: str) -> bytes:
    return json.dumps({"version": 2, "entity_path": f"{kind}/{name}"}, separators=(",", ":")).encode()


def decode_change(data: bytes) -> tuple[str, str] | None:
    """(kind, name) of a notification; version 1 ({"entity_type","entity_name"}) too."""
    try:
        obj = json.loads(data)
    except ValueError:
        return None
    if obj.get("version") == 2 and isinstance(obj.get("entity_path"), str):
        kind, _, name = obj["entity_path"].partition("/")
        return (kind, name) if name else None
    if obj.get("entity_type") and obj.get("entity_name"):
        return str(obj["entity_type"]), str(obj["entity_name"])
    return None


def sequence(child: str) -> int:
    return int(child[len(PREFIX):]) if child.startswith(PREFIX) and child[len(PREFIX):].isdigit() else -1


class ClusterConfigs:
    """This node's writer and listener of config changes."""

    def __init__(self, zk: Zk, broker_id: int, cache: Any, apply: Apply) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.cache = cache  # MetadataCache: its topic_configs follow the changes
        self._apply = apply
        self._last = -1  # the newest notification processed
        self._generation = 0
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()

    # ---- writing (the node that received the request)

    async def publish(self, kind: str, name: str, configs: dict[str, str]) -> None:
        """The entity's whole map and a change notification, in one multi-op; then applied here."""
        path = entity_path(kind, name)
        data = znodes.encode_topic_config(configs)
        await self.zk.ensure_path(znodes.CONFIG_CHANGES)
        await self.zk.ensure_path(f"/config/{kind}")
        exists = await self.zk.get_or_none(path) is not None

        def build(tx: Any) -> None:
            if exists:
                tx.set_data(path, data)
            else:
                tx.create(path, data)
            tx.create(f"{znodes.CONFIG_CHANGES}/{PREFIX}", encode_change(kind, name), sequence=True)

        try:
            await self.zk.transaction(build)
        except (NodeExistsError, NoNodeError):  # created or deleted meanwhile: once more
            exists = not exists
            await self.zk.transaction(build)
        log.info("Config change of %s/%s written", kind, name)
        self._applied(kind, name, configs)

    # ---- listening (every node)

    async def start(self) -> None:
        """The current configs first (what changed while this node was away), then the
        notifications from the newest one on. Called again on a new session."""
        self._generation += 1
        gen = self._generation
        children = await self.zk.children(znodes.CONFIG_CHANGES)
        self._last = max((sequence(c) for c in children), default=-1)
        for name in (DEFAULT, str(self.broker_id)):
            got = await self.zk.get_or_none(entity_path("brokers", name))
            if got is not None:
                self._applied("brokers", name, znodes.decode_topic_config(got[0]))
        for topic in list(self.cache.topics):
            got = await self.zk.get_or_none(entity_path("topics", topic))
            if got is not None:
                self._applied("topics", topic, znodes.decode_topic_config(got[0]))
        await self._watch(gen)

    def stop(self) -> None:
        self._generation += 1
        for t in list(self._tasks):
            t.cancel()

    async def _watch(self, gen: int) -> None:
        if gen != self._generation:
            return
        children = await self.zk.children(znodes.CONFIG_CHANGES, watch=lambda _e: self._spawn(self._watch(gen)))
        async with self._lock:
            await self._process(sorted(c for c in children if sequence(c) > self._last))
            await self._purge(children)

    async def _process(self, new: list[str]) -> None:
        for child in sorted(new, key=sequence):
            got = await self.zk.get_or_none(f"{znodes.CONFIG_CHANGES}/{child}")
            self._last = max(self._last, sequence(child))
            entity = decode_change(got[0]) if got is not None else None
            if entity is None:
                continue
            kind, name = entity
            if kind == "brokers" and name not in (DEFAULT, str(self.broker_id)):
                continue  # another node's own configs
            if kind not in ("brokers", "topics"):
                continue  # clients, users, ips: not kept by kcoord's cluster layer
            data = await self.zk.get_or_none(entity_path(kind, name))
            configs = znodes.decode_topic_config(data[0]) if data is not None else {}
            log.info("Config change notification %s: %s/%s", child, kind, name)
            self._applied(kind, name, configs)

    async def _purge(self, children: list[str]) -> None:
        """Kafka's purgeObsoleteNotifications: those older than 15 minutes go."""
        now_ms = time.time() * 1000
        for child in children:
            try:
                stat = await self.zk.stat(f"{znodes.CONFIG_CHANGES}/{child}")
            except NoNodeError:
                continue
            if stat is not None and now_ms - stat.ctime > EXPIRATION_MS:
                try:
                    await self.zk.delete(f"{znodes.CONFIG_CHANGES}/{child}")
                except NoNodeError:
                    pass

    def _applied(self, kind: str, name: str, configs: dict[str, str]) -> None:
        if kind == "topics":
            if name in self.cache.topics:
                self.cache.topic_configs[name] = dict(configs)
        try:
            self._apply(kind, name, configs)
        except Exception:  # noqa: BLE001 - one bad entity must not stop the listener
            log.exception("Applying the configs of %s/%s failed", kind, name)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)



def config_applier(state: Callable[[], Any]) -> Apply:
    """Applies a change to this node: a topic's configs to its registry and open logs (when it
    has the topic), broker configs to its dynamic layers; each only when it differs, through
    the same commit as a single node's AlterConfigs. `state()`: the node's current ConfigState
    (server/config_admin.py) over its own topic registry."""

    def apply(kind: str, name: str, configs: dict[str, str]) -> None:
        from kcoord.server.config_admin import Plan, commit
        from kcoord.server.config_catalogue import ResourceType

        st = state()
        if kind == "topics":
            topic = st.topics.get(name)
            if topic is not None and topic.configs != configs:
                commit(st, Plan(ResourceType.TOPIC, name, dict(configs)))
            elif topic is None:  # described from the metadata cache: its cached values are stale
                st.configs.changed()
        elif kind == "brokers":
            per_node = name != DEFAULT
            if st.configs.layer(per_node) != configs:
                commit(st, Plan(ResourceType.BROKER, name if per_node else "", dict(configs)))

    return apply
