"""Where each config value comes from, and the effective topic configs built on them.

Broker configs have Kafka's four layers, highest first: DYNAMIC_BROKER_CONFIG (set with
AlterConfigs for this node id), DYNAMIC_DEFAULT_BROKER_CONFIG (set for the cluster, empty
resource name), STATIC_BROKER_CONFIG (server.properties / --override) and DEFAULT_CONFIG. A
topic config is the topic's own value (DYNAMIC_TOPIC_CONFIG) or else the broker config behind
it (server/config_catalogue.py: segment.bytes <- log.segment.bytes, retention.ms <-
log.retention.ms / .minutes / .hours, ...).

The dynamic layers are kept in `kcoord-broker-configs.json` beside the topic registry,
replaced atomically like it. Changing one pushes the new effective value into the server's
Config (so what reads config["max.connections"] sees it at once) and drops the cached topic
values built on it.
"""
from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcoord.server.config import SETTINGS, Config
from kcoord.server.config_catalogue import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigError,
    ConfigKey,
    ConfigSource,
    ConfigType,
    Dynamic,
    broker_synonyms,
    inferred_key,
    value_text,
)
from kcoord.server.security.settings import Password
from kcoord.server.topics import DYNAMIC_FILE, Topic, atomic_write

log = logging.getLogger("kcoord.configs")



@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class Entry:
    """One described config (DescribeConfigsResourceResult)."""
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool
    type: ConfigType
    doc: str | None
    synonyms: tuple[Synonym, ...]


def broker_config_key(name: str) -> ConfigKey | None:
    """The definition of a broker config: the catalogue's, else one inferred from kcoord's
    SETTINGS; None for a name kcoord does not know (a custom config)."""
    key = BROKER_CONFIGS.get(name)
    if key is not None:
        return key
    if name in SETTINGS:
        parser, default = SETTINGS[name]
        return inferred_key(name, default, parser is Password)
    return None


class BrokerConfigs:
    """The dynamic broker configs of this node and the cluster, and effective topic values."""

    def __init__(self, config: Config, log_dir: Path) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster: dict[str, str] = {}  # DYNAMIC_DEFAULT_BROKER_CONFIG
        self.node: dict[str, str] = {}  # DYNAMIC_BROKER_CONFIG of this node
        self._others: dict[str, dict[str, str]] = {}  # other node ids' entries, kept as found
        self.groups: dict[str, dict[str, str]] = {}  # group configs by group id (server/group_configs.py)
        self._path = log_dir / DYNAMIC_FILE
        self._generation = 0
        self._topic_cache: dict[uuid.UUID, tuple[int, dict[str, Any]]] = {}

    # ------------------------------------------------------------------ persistence

    def load(self) -> None:
        if not self._path.exists():
            return
        data = json.loads(self._path.read_text())
        self.cluster = self._valid(dict(data.get("cluster", {})), "cluster default")
        brokers = {str(k): dict(v) for k, v in data.get("brokers", {}).items()}
        self.node = self._valid(brokers.pop(str(self.node_id), {}), f"node {self.node_id}")
        self._others = brokers
        self.groups = {str(g): {str(k): str(v) for k, v in c.items()} for g, c in data.get("groups", {}).items() if c}
        for name in set(self.cluster) | set(self.node):
            self._push(name)
        self.changed()

    def _valid(self, values: dict[str, str], what: str) -> dict[str, str]:
        """Kafka's fromPersistentProps: entries that are no longer valid are dropped, logged."""
        out = {}
        for name, value in values.items():
            key = broker_config_key(name)
            try:
                if key is not None:
                    if key.dynamic == Dynamic.READ_ONLY:
                        raise ConfigError(name, value, "not dynamically updatable")
                    key.parse(value)
            except ConfigError as e:
                log.error("Ignoring the stored %s config %s: %s", what, name, e)
                continue
            out[name] = value
        return out

    def save(self) -> None:
        brokers = dict(self._others)
        if self.node:
            brokers[str(self.node_id)] = self.node
        data: dict[str, Any] = {"version": 1, "cluster": self.cluster, "brokers": brokers}
        if self.groups:
            data["groups"] = self.groups
        atomic_write(self._path, json.dumps(data, indent=1, sort_keys=True).encode())

    @property
    def generation(self) -> int:
        """Bumped whenever a broker value changes (what caches built on them check)."""
        return self._generation

    def replace_group(self, group_id: str, values: dict[str, str]) -> None:
        """Install a group's whole config map (already checked), durably; an empty map removes
        the group's entry. OSError: nothing changed."""
        old = self.groups.get(group_id)
        if values:
            self.groups[group_id] = dict(values)
        else:
            self.groups.pop(group_id, None)
        try:
            self.save()
        except OSError:
            if old is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = old
            raise

    # ------------------------------------------------------------------ broker values

    def layer(self, per_node: bool) -> dict[str, str]:
        return self.node if per_node else self.cluster

    def replace(self, per_node: bool, values: dict[str, str]) -> None:
        """Install a resource's whole dynamic map (already validated), durably."""
        old = self.layer(per_node)
        if per_node:
            self.node = dict(values)
        else:
            self.cluster = dict(values)
        self.save()
        for name in set(old) | set(values):
            self._push(name)
        self.changed()

    def _push(self, name: str) -> None:
        """Make Config's value of a setting kcoord reads the effective one."""
        if name in SETTINGS:
            raw = self.node.get(name, self.cluster.get(name))
            try:
                self.config.apply(name, raw)
            except ValueError as e:  # validated on the way in; a stored one may have rotted
                log.error("Could not apply the dynamic config %s=%s: %s", name, raw, e)

    def raw(self, name: str) -> str | None:
        """The effective text of a broker config over the four layers (None: not set)."""
        if name in self.node:
            return self.node[name]
        if name in self.cluster:
            return self.cluster[name]
        if name in self.config.given:
            return self.config.given[name]
        key = broker_config_key(name)
        return None if key is None else key.default_text

    def value(self, name: str) -> Any:
        """The effective typed value of a known broker config."""
        key = broker_config_key(name)
        raw = self.raw(name)
        if key is None or raw is None:
            return raw
        try:
            return key.parse(raw)
        except ConfigError:  # static values were checked at start-up; never serve garbage
            return key.default

    def synonyms(self, name: str, sensitive: bool) -> list[Synonym]:
        """ConfigHelper.configSynonyms: every layer holding a name of this setting, highest
        first, from the first entry named `name` on."""
        names = broker_synonyms(name)
        out: list[Synonym] = []
        for source, layer in ((ConfigSource.DYNAMIC_BROKER_CONFIG, self.node),
                              (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self.cluster),
                              (ConfigSource.STATIC_BROKER_CONFIG, self.config.given)):
            for n in names:
                if n in layer:
                    out.append(Synonym(n, None if sensitive else _text(n, layer[n]), source))
        for n in names:
            key = broker_config_key(n)
            if key is not None and key.default is not None:
                out.append(Synonym(n, None if sensitive else key.default_text, ConfigSource.DEFAULT_CONFIG))
        while out and out[0].name != name:
            out.pop(0)
        return out

    def broker_names(self) -> list[str]:
        return sorted(set(BROKER_CONFIGS) | set(SETTINGS) | set(self.config.given) | set(self.cluster)
                      | set(self.node))

    def broker_entry(self, name: str, per_node: bool, docs: bool) -> Entry:
        """ConfigHelper.createBrokerConfigEntry."""
        key = broker_config_key(name)
        sensitive = key is None or key.sensitive
        synonyms = self.synonyms(name, sensitive)
        if not per_node:
            synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        if per_node:
            raw = self.raw(name)
        else:
            raw = self.cluster.get(name)
        value = None if sensitive else (_text(name, raw) if raw is not None else None)
        return Entry(
            name=name, value=value,
            source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
            read_only=key is None or key.dynamic == Dynamic.READ_ONLY,
            sensitive=sensitive,
            type=ConfigType.UNKNOWN if key is None else key.type,
            doc=(key.doc or None) if docs and key is not None else None,
            synonyms=tuple(synonyms),
        )

    # ------------------------------------------------------------------ topic values

    def changed(self) -> None:
        """Something topic values depend on changed (a topic's own configs, a broker default)."""
        self._generation += 1
        self._topic_cache.clear()  # also forgets deleted topics

    def topic_defaults(self) -> dict[str, Any]:
        """Every topic config's typed value from the broker layers (KafkaConfig's
        extractLogConfigMap): the first synonym that is set, converted to the topic's unit."""
        out: dict[str, Any] = {}
        for name, key in TOPIC_CONFIGS.items():
            value = key.default
            for syn in key.synonyms:
                v = self.value(syn.name)
                if v is not None:
                    value = v * syn.factor if syn.factor != 1 else v
                    break
            if name == "retention.ms" and value < 0:
                value = -1  # KafkaConfig.logRetentionTimeMillis: any negative means unlimited
            out[name] = value
        return out

    def topic_values(self, topic: Topic) -> dict[str, Any]:
        """The effective typed value of every topic config of `topic` (cached)."""
        cached = self._topic_cache.get(topic.topic_id)
        if cached is not None and cached[0] == self._generation:
            return cached[1]
        values = self.topic_defaults()
        for name, raw in topic.configs.items():
            key = TOPIC_CONFIGS.get(name)
            if key is None:
                continue
            try:
                values[name] = key.parse(raw)
            except ConfigError as e:  # written before validation was this strict: keep serving
                log.warning("Topic %s has an invalid %s=%r (%s); using the default", topic.name, name, raw, e)
        self._topic_cache[topic.topic_id] = (self._generation, values)
        return values

    def topic_entry(self, topic: Topic, name: str, docs: bool) -> Entry:
        """ConfigHelper.createTopicConfigEntry."""
        key = TOPIC_CONFIGS[name]
        value = None if key.sensitive else value_text(key.type, self.topic_values(topic)[name])
        synonyms = self.synonyms(key.synonyms[0].name, key.sensitive) if key.synonyms else []
        if name in topic.configs:
            synonyms.insert(0, Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        return Entry(name, value, synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                     False, key.sensitive, key.type, key.doc if docs else None, tuple(synonyms))

    def created_topic_entry(self, configs: dict[str, str], name: str) -> Entry:
        """The KRaft controller's resolveEffectiveTopicConfig, as CreateTopics v5+ reports a new
        topic's configs: its own value, else the first synonym set per layer, else the default."""
        key = TOPIC_CONFIGS[name]

        def entry(value: str | None, source: ConfigSource) -> Entry:
            return Entry(name, value, source, False, key.sensitive, key.type, None, ())

        if name in configs:
            return entry(configs[name], ConfigSource.DYNAMIC_TOPIC_CONFIG)
        for source, layer in ((ConfigSource.DYNAMIC_BROKER_CONFIG, self.node),
                              (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self.cluster),
                              (ConfigSource.STATIC_BROKER_CONFIG, self.config.given)):
            for syn in key.synonyms:
                if syn.name in layer:
                    raw = str(layer[syn.name])
                    if syn.factor != 1:
                        try:
                            raw = str(int(raw.strip()) * syn.factor)
                        except ValueError:
                            pass
                    return entry(raw, source)
        return entry(key.default_text, ConfigSource.DEFAULT_CONFIG)


def _text(name: str, raw: Any) -> str:
    """A broker value as Kafka shows it: parsed and printed again for a known config."""
    key = broker_config_key(name)
    if key is None:
        return str(raw)
    try:
        return value_text(key.type, key.parse(raw)) or ""
    except ConfigError:
        return str(raw)
