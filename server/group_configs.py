"""Group configs (the GROUP config resource, type 32): per-group overrides of the group
coordinator's settings, as Kafka 4.3's GroupConfig declares them (KIP-848, KIP-932, KIP-1071,
KIP-1263): names, types, bounds, defaults and the checks with Kafka's messages.

A group config that is not set takes its value from the broker setting behind it
(consumer.session.timeout.ms <- group.consumer.session.timeout.ms, ...), or Kafka's default
where there is none (share.auto.offset.reset, share.isolation.level). Set values are kept in the
dynamic-config store (server/config_layers.py, `kcoord-broker-configs.json`, fsynced before an
alteration is answered) under the group id, whether or not a group of that id exists; deleting
a group leaves them, as Kafka 4.x does (they are ConfigRecords in its metadata log, not group
state).

Readers: `get(group_id)` (the values set, as text) and `value(group_id, name)` (typed, with
the default); the consumer group protocol takes its session timeout and heartbeat interval
from here, the share group helpers their offset reset, isolation level and locks.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kcoord.server.config_catalogue import (
    ConfigError,
    ConfigKey,
    ConfigSource,
    ConfigType,
    at_least,
    one_of,
    value_text,
)

if TYPE_CHECKING:
    from kcoord.server.config_layers import BrokerConfigs, Entry

log = logging.getLogger("kcoord.configs")

B, S, INT = ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT

_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", re.IGNORECASE)


def _auto_offset_reset(name: str, v: Any) -> None:
    """ShareGroupAutoOffsetResetStrategy.Validator: latest, earliest or by_duration:<ISO 8601
    duration, not negative>."""
    text = str(v)
    low = text.lower()
    if low in ("latest", "earliest"):
        return
    if low.startswith("by_duration:"):
        duration = text[len("by_duration:"):].strip()
        if duration.startswith("-"):
            raise ConfigError(name, v, "Negative duration is not allowed.")
        if _DURATION.fullmatch(duration) and duration.upper() not in ("P", "PT"):
            return
        raise ConfigError(name, v, "Unable to parse the given duration " + duration)
    raise ConfigError(name, v, "Invalid value `" + text + "` for configuration " + name
                      + ". The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.")


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    """One group config: its definition (type, Kafka's default, the ConfigDef validator), the
    broker setting its default comes from, and the broker settings bounding it."""
    key: ConfigKey
    broker: str | None = None  # the broker setting behind the default
    lo: tuple[str, int] | None = None  # (broker setting, Kafka's default) of the lower bound
    hi: tuple[str, int] | None = None  # ... of the upper bound

    @property
    def name(self) -> str:
        return self.key.name


def _g(name: str, ctype: ConfigType, default: Any, doc: str, validator: Any = None, broker: str | None = None,
       lo: tuple[str, int] | None = None, hi: tuple[str, int] | None = None) -> GroupConfigKey:
    return GroupConfigKey(ConfigKey(name, ctype, default, doc, validator), broker, lo, hi)


GROUP_CONFIGS: dict[str, GroupConfigKey] = {k.name: k for k in (
    # consumer groups (KIP-848)
    _g("consumer.session.timeout.ms", INT, 45000,
       "The timeout to detect client failures when using the consumer group protocol.", at_least(1),
       "group.consumer.session.timeout.ms", ("group.consumer.min.session.timeout.ms", 45000),
       ("group.consumer.max.session.timeout.ms", 60000)),
    _g("consumer.heartbeat.interval.ms", INT, 5000,
       "The heartbeat interval given to the members of a consumer group.", at_least(1),
       "group.consumer.heartbeat.interval.ms", ("group.consumer.min.heartbeat.interval.ms", 5000),
       ("group.consumer.max.heartbeat.interval.ms", 15000)),
    _g("consumer.assignment.interval.ms", INT, 1000,
       "The interval between assignment updates for a consumer group.", at_least(0),
       "group.consumer.assignment.interval.ms"),
    # share groups (KIP-932)
    _g("share.session.timeout.ms", INT, 45000,
       "The timeout to detect client failures when using the share group protocol.", at_least(1),
       "group.share.session.timeout.ms", ("group.share.min.session.timeout.ms", 45000),
       ("group.share.max.session.timeout.ms", 60000)),
    _g("share.heartbeat.interval.ms", INT, 5000,
       "The heartbeat interval given to the members of a share group.", at_least(1),
       "group.share.heartbeat.interval.ms", ("group.share.min.heartbeat.interval.ms", 5000),
       ("group.share.max.heartbeat.interval.ms", 15000)),
    _g("share.record.lock.duration.ms", INT, 30000,
       "The record acquisition lock duration in milliseconds for share groups.", at_least(1000),
       "group.share.record.lock.duration.ms", ("group.share.min.record.lock.duration.ms", 15000),
       ("group.share.max.record.lock.duration.ms", 60000)),
    _g("share.delivery.count.limit", INT, 5,
       "The maximum number of delivery attempts for a record delivered to a share group.", at_least(2),
       "group.share.delivery.count.limit", ("group.share.min.delivery.count.limit", 2),
       ("group.share.max.delivery.count.limit", 10)),
    _g("share.partition.max.record.locks", INT, 2000,
       "Share-group record lock limit per share-partition.", at_least(100),
       "group.share.partition.max.record.locks", ("group.share.min.partition.max.record.locks", 100),
       ("group.share.max.partition.max.record.locks", 10000)),
    _g("share.auto.offset.reset", S, "latest",
       "The strategy to initialize the share-partition start offset: earliest, latest or "
       "by_duration:<ISO 8601 duration>.", _auto_offset_reset),
    _g("share.isolation.level", S, "read_uncommitted",
       "Controls how to read records written transactionally: read_committed delivers only committed "
       "transactional records, read_uncommitted all of them.", one_of("read_committed", "read_uncommitted")),
    _g("share.renew.acknowledge.enable", B, True,
       "Whether the renew acknowledge type is enabled for the share group."),
    _g("share.assignment.interval.ms", INT, 1000,
       "The interval between assignment updates for a share group.", at_least(0),
       "group.share.assignment.interval.ms"),
    # streams groups (KIP-1071)
    _g("streams.session.timeout.ms", INT, 45000,
       "The timeout to detect client failures when using the streams group protocol.", at_least(1),
       "group.streams.session.timeout.ms", ("group.streams.min.session.timeout.ms", 45000),
       ("group.streams.max.session.timeout.ms", 60000)),
    _g("streams.heartbeat.interval.ms", INT, 5000,
       "The heartbeat interval given to the members of a streams group.", at_least(1),
       "group.streams.heartbeat.interval.ms", ("group.streams.min.heartbeat.interval.ms", 5000),
       ("group.streams.max.heartbeat.interval.ms", 15000)),
    _g("streams.num.standby.replicas", INT, 0,
       "The number of standby replicas for each task.", at_least(0),
       "group.streams.num.standby.replicas", None, ("group.streams.max.standby.replicas", 2)),
    _g("streams.initial.rebalance.delay.ms", INT, 3000,
       "The amount of time the group coordinator will wait for more streams clients to join a new group "
       "before performing the first rebalance.", at_least(0),
       "group.streams.initial.rebalance.delay.ms"),
    _g("streams.assignment.interval.ms", INT, 1000,
       "The interval between assignment updates for a streams group.", at_least(0),
       "group.streams.assignment.interval.ms"),
)}

# the bound checks, in Kafka's order: (config, which bound); then session > heartbeat per type
_BOUND_ORDER = ("consumer.heartbeat.interval.ms", "consumer.session.timeout.ms", "share.heartbeat.interval.ms",
                "share.session.timeout.ms", "share.record.lock.duration.ms", "share.delivery.count.limit",
                "share.partition.max.record.locks", "streams.heartbeat.interval.ms", "streams.session.timeout.ms",
                "streams.num.standby.replicas")
_SESSION_OVER_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                           ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
                           ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"))


class GroupConfigs:
    """The group configs of every group id: read, checked, changed durably, described.

    Its one dependency is the dynamic-config store (server/config_layers.py BrokerConfigs): its
    `groups` map and `replace_group`, and the effective values of the broker settings behind
    the defaults and bounds (over the broker Config it holds)."""

    def __init__(self, store: BrokerConfigs) -> None:
        self._store = store
        # (group id, name) -> the typed value in use, for the heartbeat path; dropped when a
        # group's configs or a broker value (bounds, defaults) change
        self._values: dict[tuple[str, str], Any] = {}
        self._generation = store.generation

    # ------------------------------------------------------------------ the read interface

    def get(self, group_id: str) -> Mapping[str, str]:
        """The configs set on the group (text), nothing else."""
        return self._store.groups.get(group_id, _EMPTY)

    def value(self, group_id: str, name: str) -> Any:
        """The typed value of a group config: the group's own, else the broker's default. A
        value set when the broker's bounds were wider is capped to the bounds now (Kafka 4.3,
        KIP-1240: the stored value is kept, the group uses the capped one)."""
        if self._generation != self._store.generation:
            self._values.clear()
            self._generation = self._store.generation
        cached = self._values.get((group_id, name), _MISSING)
        if cached is not _MISSING:
            return cached
        value = self._value(group_id, name)
        self._values[(group_id, name)] = value
        return value

    def _value(self, group_id: str, name: str) -> Any:
        key = GROUP_CONFIGS[name]
        raw = self._store.groups.get(group_id, _EMPTY).get(name)
        if raw is not None:
            try:
                value = key.key.parse(raw)
            except ConfigError:  # checked on the way in; a stored one may have rotted
                return self.default(name)
            if key.lo is not None and value < (lo := self._bound(key.lo)):
                log.debug("Group %s: %s=%s is below %s, using %d", group_id, name, value, key.lo[0], lo)
                return lo
            if key.hi is not None and value > (hi := self._bound(key.hi)):
                log.debug("Group %s: %s=%s is above %s, using %d", group_id, name, value, key.hi[0], hi)
                return hi
            return value
        return self.default(name)

    def default(self, name: str) -> Any:
        """The value a group gets when it has not set `name`: the broker setting behind it."""
        key = GROUP_CONFIGS[name]
        if key.broker is None:
            return key.key.default
        return self._broker(key.broker, key.key)

    def _broker(self, setting: str, key: ConfigKey) -> Any:
        value = self._store.value(setting)
        if value is None:
            return key.default
        if isinstance(value, str):  # a broker setting kcoord does not define: given as text
            try:
                return key.parse(value)
            except ConfigError:
                return key.default
        return value

    def _stored(self, raw: str, key: GroupConfigKey) -> Any:
        """A value as set (described as kept, not as capped)."""
        try:
            return key.key.parse(raw)
        except ConfigError:
            return raw

    def _bound(self, bound: tuple[str, int]) -> int:
        value = self._store.value(bound[0])
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        return bound[1]

    # ------------------------------------------------------------------ checks

    def check(self, configs: Mapping[str, str | None]) -> dict[str, str]:
        """GroupConfig.validate on a group's complete new config map: known names, values of
        their type and range, then the broker's bounds and session > heartbeat, merged with the
        broker's defaults. ConfigError (INVALID_CONFIG) with Kafka's message."""
        nulls = [n for n, v in configs.items() if v is None]
        if nulls:
            raise _Plain("Null value not supported for group configs: " + ",".join(nulls))
        for name in configs:
            if name not in GROUP_CONFIGS:
                raise _Plain("Unknown group config name: " + name)
        merged = {n: self.default(n) for n in GROUP_CONFIGS}
        for name, raw in configs.items():
            merged[name] = GROUP_CONFIGS[name].key.parse(raw)
        for name in _BOUND_ORDER:
            key = GROUP_CONFIGS[name]
            v = merged[name]
            if key.lo is not None and v < self._bound(key.lo):
                raise _Plain(f"{name} must be greater than or equal to {key.lo[0]}")
            if key.hi is not None and v > self._bound(key.hi):
                raise _Plain(f"{name} must be less than or equal to {key.hi[0]}")
        for session, heartbeat in _SESSION_OVER_HEARTBEAT:
            if merged[session] <= merged[heartbeat]:
                raise _Plain(f"{session} must be greater than {heartbeat}")
        return {n: str(v) for n, v in configs.items()}

    # ------------------------------------------------------------------ changes

    def replace(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Install the group's complete config map (checked), durably (OSError: unchanged)."""
        try:
            self._store.replace_group(group_id, dict(configs))
        finally:
            self._values.clear()

    # ------------------------------------------------------------------ describe

    def entries(self, group_id: str, keys: list[str] | None, docs: bool) -> list[Entry]:
        """ConfigHelper's GROUP resource: every group config with its value, DYNAMIC_GROUP_CONFIG
        for one set on the group, else DEFAULT_CONFIG (the broker's value behind it)."""
        from kcoord.server.config_layers import Entry, Synonym

        own = self.get(group_id)
        out = []
        for name in sorted(GROUP_CONFIGS):
            if keys and name not in keys:
                continue
            key = GROUP_CONFIGS[name]
            text = value_text(key.key.type, self._stored(own[name], key) if name in own else self.default(name))
            source = ConfigSource.GROUP_CONFIG if name in own else ConfigSource.DEFAULT_CONFIG
            synonyms = [Synonym(name, text, source)]
            if key.broker is not None:
                synonyms += self._store.synonyms(key.broker, False)
            out.append(Entry(name, text, source, False, False, key.key.type, key.key.doc if docs else None,
                             tuple(synonyms)))
        return out


class _Plain(ConfigError):
    """An InvalidConfigurationException whose message is exactly the text given."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)


_EMPTY: Mapping[str, str] = {}
_MISSING = object()
