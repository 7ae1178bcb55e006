"""Kafka's config definitions, as one table: every topic config (Kafka 3.9's LogConfig) and the
broker configs kcoord knows (its own settings and the broker defaults of topic configs), each
with Kafka's name, type, default, validator, dynamic-update mode and a short description.

Pure data and pure functions (no server state): parsing and validating a value the way Kafka's
ConfigDef does, with Kafka's error messages, so CreateTopics, AlterConfigs,
IncrementalAlterConfigs and the server's own start-up share one set of rules. Which layer a
value comes from (topic, dynamic broker, static, default) is server/config_layers.py.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


class ConfigType(IntEnum):
    """DescribeConfigsResponse ConfigType (Kafka's ConfigDef.Type)."""
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigsResponse ConfigSource."""
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8  # the Java Admin's DYNAMIC_GROUP_CONFIG


class ResourceType(IntEnum):
    """ConfigResource.Type ids on the wire."""
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class Dynamic(Enum):
    """How a broker config may change at run time (Kafka's DynamicBrokerConfig)."""
    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class ConfigError(ValueError):
    """A value Kafka's ConfigDef refuses; str() is Kafka's message (ConfigException)."""

    def __init__(self, name: str, value: Any, why: str | None = None) -> None:
        shown = _java_text(value)
        super().__init__(f"Invalid value {shown} for configuration {name}" + (f": {why}" if why else ""))


def _java_text(value: Any) -> str:
    if isinstance(value, list):  # a Java List's toString
        return "[" + ", ".join(value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ---------------------------------------------------------------------------- validators
# Each is (name, parsed value) -> None, raising ConfigError with Kafka's wording.

Validator = Callable[[str, Any], None]


def at_least(lo: int) -> Validator:
    def check(name: str, v: Any) -> None:
        if v < lo:
            raise ConfigError(name, _number_text(v), f"Value must be at least {lo}")
    return check


def between(lo: int, hi: int) -> Validator:
    def check(name: str, v: Any) -> None:
        if v < lo:
            raise ConfigError(name, _number_text(v), f"Value must be at least {lo}")
        if v > hi:
            raise ConfigError(name, _number_text(v), f"Value must be no more than {hi}")
    return check


def one_of(*allowed: str) -> Validator:
    def check(name: str, v: Any) -> None:
        if v not in allowed:
            raise ConfigError(name, v, "String must be one of: " + ", ".join(allowed))
    return check


def each_one_of(*allowed: str) -> Validator:
    """ValidList: every element of a LIST config is one of `allowed`."""
    single = one_of(*allowed)

    def check(name: str, v: Any) -> None:
        for item in v:
            single(name, item)
    return check


def _gzip_level(name: str, v: Any) -> None:
    if v > 9 or (v < 1 and v != -1):
        raise ConfigError(name, v, "Value must be between 1 and 9 or equal to -1")


def _throttled_replicas(name: str, v: Any) -> None:
    items = [s.strip() for s in v]
    if not (all(re.fullmatch(r"([0-9]+:[0-9]+)?", s) for s in items) or "".join(items) == "*"):
        raise ConfigError(name, v, f"{name} must be the literal '*' or a list of replicas in the following "
                                   "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


# Kafka's MetadataVersion strings (3.9): what message.format.version / log.message.format.version
# accept. Ignored for record writing since 3.0 (every batch is v2), as in Kafka.
_IBP = (["0.8.0", "0.8.1", "0.8.2", "0.9.0"]
        + [f"0.10.0-IV{i}" for i in range(2)] + [f"0.10.1-IV{i}" for i in range(3)] + ["0.10.2-IV0"]
        + [f"0.11.0-IV{i}" for i in range(3)] + ["1.0-IV0", "1.1-IV0", "2.0-IV0", "2.0-IV1"]
        + [f"2.1-IV{i}" for i in range(3)] + ["2.2-IV0", "2.2-IV1", "2.3-IV0", "2.3-IV1", "2.4-IV0",
                                               "2.4-IV1", "2.5-IV0", "2.6-IV0"]
        + [f"2.7-IV{i}" for i in range(3)] + ["2.8-IV0", "2.8-IV1", "3.0-IV0", "3.0-IV1", "3.1-IV0",
                                               "3.2-IV0"]
        + [f"3.3-IV{i}" for i in range(4)] + ["3.4-IV0"] + [f"3.5-IV{i}" for i in range(3)]
        + [f"3.6-IV{i}" for i in range(3)] + [f"3.7-IV{i}" for i in range(5)]
        + ["3.8-IV0", "3.9-IV0", "4.0-IV0", "4.0-IV1"])
_RELEASES = {v.split("-")[0] for v in _IBP if not v.startswith("4.0")}  # production releases only
_METADATA_VERSIONS = set(_IBP) | _RELEASES


def _metadata_version(name: str, v: Any) -> None:
    segments = v.split(".")
    n = 3 if v.startswith("0.") else 2
    key = v if n >= len(segments) else ".".join(segments[:n])
    if key not in _METADATA_VERSIONS:
        raise ConfigError(name, v, f"Version {v} is not a valid version")


# ---------------------------------------------------------------------------- parsing

_INTEGER = re.compile(r"[+-]?[0-9]+")
_BOUNDS = {ConfigType.INT: 2**31, ConfigType.SHORT: 2**15, ConfigType.LONG: 2**63}


def parse_value(name: str, ctype: ConfigType, raw: Any) -> Any:
    """ConfigDef.parseType: text (or a TOML value) -> the typed value; ConfigError otherwise."""
    if raw is None:
        return None
    text = raw.strip() if isinstance(raw, str) else raw
    if ctype == ConfigType.BOOLEAN:
        if isinstance(text, bool):
            return text
        if isinstance(text, str) and text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(name, raw, "Expected value to be either true or false")
    if ctype in _BOUNDS:
        if isinstance(text, int) and not isinstance(text, bool):
            value = text
        elif isinstance(text, str) and _INTEGER.fullmatch(text):
            value = int(text)
        else:
            raise ConfigError(name, raw, f"Not a number of type {ctype.name}")
        bound = _BOUNDS[ctype]
        if not -bound <= value < bound:
            raise ConfigError(name, raw, f"Not a number of type {ctype.name}")
        return value
    if ctype == ConfigType.DOUBLE:
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise ConfigError(name, raw, "Not a number of type DOUBLE") from None
        return value
    if ctype == ConfigType.LIST:
        if isinstance(text, list):
            return [str(x) for x in text]
        return [] if text == "" else re.split(r"\s*,\s*", str(text))
    return str(text)


def value_text(ctype: ConfigType, value: Any) -> str | None:
    """ConfigDef.convertToString: the typed value as Kafka prints it."""
    if value is None:
        return None
    if ctype == ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype == ConfigType.DOUBLE:
        return java_double(float(value))
    if ctype == ConfigType.LIST:
        return ",".join(value)
    return str(value)


def java_double(x: float) -> str:
    """Java's Double.toString: shortest digits, scientific outside [1e-3, 1e7)."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        s = repr(x)
        return s if "." in s else s + ".0"
    from decimal import Decimal  # rare: only very small or large doubles

    sign, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(text) - 1 + exp
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def _number_text(v: Any) -> str:
    return java_double(v) if isinstance(v, float) else str(v)


# ---------------------------------------------------------------------------- definitions


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config a topic config falls back to; `factor` converts its unit to the topic
    config's (hours -> ms: 3,600,000)."""
    name: str
    factor: int = 1


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: Any  # typed, None for "no default" (described as null)
    doc: str
    validator: Validator | None = None
    synonyms: tuple[Synonym, ...] = ()  # topic configs: the broker configs behind them, in order
    dynamic: Dynamic = Dynamic.READ_ONLY  # broker configs

    @property
    def sensitive(self) -> bool:
        return self.type == ConfigType.PASSWORD

    @property
    def default_text(self) -> str | None:
        return value_text(self.type, self.default)

    def parse(self, raw: Any) -> Any:
        """A value given as text: typed and validated (ConfigError with Kafka's message)."""
        value = parse_value(self.name, self.type, raw)
        if self.validator is not None and value is not None:
            self.validator(self.name, value)
        return value


B, S, INT, L, D, LI = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                       ConfigType.DOUBLE, ConfigType.LIST)
H = 3_600_000  # ms in an hour
M = 60_000  # ms in a minute
_RECORD_OVERHEAD_V0 = 14
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def _t(name: str, ctype: ConfigType, default: Any, doc: str, validator: Validator | None = None,
       *synonyms: Synonym) -> ConfigKey:
    return ConfigKey(name, ctype, default, doc, validator, synonyms)


# Kafka 3.9's topic configs, in LogConfig's definition order (validation reports the first bad
# value in this order, as ConfigDef.parse does).
TOPIC_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in (
    _t("segment.bytes", INT, 1073741824, "Size of a log segment file; a new segment is rolled when the "
       "active one would grow past it (retention deletes whole segments).", at_least(_RECORD_OVERHEAD_V0),
       Synonym("log.segment.bytes")),
    _t("segment.ms", L, 604800000, "Roll a new segment after this time even if the active one is not full.",
       at_least(1), Synonym("log.roll.ms"), Synonym("log.roll.hours", H)),
    _t("segment.jitter.ms", L, 0, "Largest random amount subtracted from segment.ms, so segments of many "
       "partitions do not all roll at once.", at_least(0), Synonym("log.roll.jitter.ms"),
       Synonym("log.roll.jitter.hours", H)),
    _t("segment.index.bytes", INT, 10485760, "Size of the offset index file of a segment.", at_least(4),
       Synonym("log.index.size.max.bytes")),
    _t("flush.messages", L, LONG_MAX, "Force an fsync after this many messages (default: leave it to the "
       "OS and replication).", at_least(1), Synonym("log.flush.interval.messages")),
    _t("flush.ms", L, LONG_MAX, "Force an fsync after this much time.", at_least(0),
       Synonym("log.flush.interval.ms"), Synonym("log.flush.scheduler.interval.ms")),
    _t("retention.bytes", L, -1, "Largest size a partition may reach before its oldest segments are "
       "deleted (delete policy); -1 means no size limit.", None, Synonym("log.retention.bytes")),
    _t("retention.ms", L, 604800000, "How long a segment is kept, judged by its newest record, before it is "
       "deleted (delete policy); -1 means no time limit.", at_least(-1), Synonym("log.retention.ms"),
       Synonym("log.retention.minutes", M), Synonym("log.retention.hours", H)),
    _t("max.message.bytes", INT, 1048588, "Largest record batch (after compression) the topic accepts.",
       at_least(0), Synonym("message.max.bytes")),
    _t("index.interval.bytes", INT, 4096, "How many bytes of records between two offset index entries.",
       at_least(0), Synonym("log.index.interval.bytes")),
    _t("delete.retention.ms", L, 86400000, "How long tombstones are kept after compaction (compact policy).",
       at_least(0), Synonym("log.cleaner.delete.retention.ms")),
    _t("min.compaction.lag.ms", L, 0, "Least time a record stays uncompacted.", at_least(0),
       Synonym("log.cleaner.min.compaction.lag.ms")),
    _t("max.compaction.lag.ms", L, LONG_MAX, "Most time a record may stay uncompacted.", at_least(1),
       Synonym("log.cleaner.max.compaction.lag.ms")),
    _t("file.delete.delay.ms", L, 60000, "Wait before a deleted segment's files are removed from disk.",
       at_least(0), Synonym("log.segment.delete.delay.ms")),
    _t("min.cleanable.dirty.ratio", D, 0.5, "Share of uncompacted log above which the log is compacted.",
       between(0, 1), Synonym("log.cleaner.min.cleanable.ratio")),
    _t("cleanup.policy", LI, ["delete"], "What happens to old segments: 'delete' (by retention.ms / "
       "retention.bytes), 'compact' (keep the newest record of each key), or both.",
       each_one_of("compact", "delete"), Synonym("log.cleanup.policy")),
    _t("unclean.leader.election.enable", B, False, "Whether a replica outside the ISR may become leader.",
       None, Synonym("unclean.leader.election.enable")),
    _t("min.insync.replicas", INT, 1, "Replicas that must acknowledge an acks=all write; a single broker "
       "holds one replica of each partition, which always suffices.", at_least(1),
       Synonym("min.insync.replicas")),
    _t("compression.type", S, "producer", "Codec the topic stores batches with; 'producer' keeps the "
       "producer's codec.", one_of(*_COMPRESSION), Synonym("compression.type")),
    _t("compression.gzip.level", INT, -1, "Level for gzip when compression.type is gzip.", _gzip_level,
       Synonym("compression.gzip.level")),
    _t("compression.lz4.level", INT, 9, "Level for lz4 when compression.type is lz4.", between(1, 17),
       Synonym("compression.lz4.level")),
    _t("compression.zstd.level", INT, 3, "Level for zstd when compression.type is zstd.", between(-131072, 22),
       Synonym("compression.zstd.level")),
    _t("preallocate", B, False, "Allocate a segment's file in full when it is created.", None,
       Synonym("log.preallocate")),
    _t("message.format.version", S, "3.0-IV1", "Deprecated record format version; ignored since 3.0 "
       "(records are always written in format v2).", _metadata_version, Synonym("log.message.format.version")),
    _t("message.timestamp.type", S, "CreateTime", "Which timestamp records carry: the producer's "
       "(CreateTime) or the broker's at append (LogAppendTime).", one_of(*_TIMESTAMP_TYPES),
       Synonym("log.message.timestamp.type")),
    _t("message.timestamp.difference.max.ms", L, LONG_MAX, "Deprecated: largest allowed distance between a "
       "CreateTime timestamp and the broker's clock.", at_least(0),
       Synonym("log.message.timestamp.difference.max.ms")),
    _t("message.timestamp.before.max.ms", L, LONG_MAX, "How far in the past a CreateTime timestamp may be.",
       at_least(0), Synonym("log.message.timestamp.before.max.ms")),
    _t("message.timestamp.after.max.ms", L, LONG_MAX, "How far in the future a CreateTime timestamp may be.",
       at_least(0), Synonym("log.message.timestamp.after.max.ms")),
    _t("leader.replication.throttled.replicas", LI, [], "Replicas whose leader-side replication is "
       "throttled ('*' for all).", _throttled_replicas),
    _t("follower.replication.throttled.replicas", LI, [], "Replicas whose follower-side replication is "
       "throttled ('*' for all).", _throttled_replicas),
    _t("message.downconversion.enable", B, True, "Whether old fetch versions get records converted to their "
       "format.", None, Synonym("log.message.downconversion.enable")),
    _t("remote.storage.enable", B, False, "Tiered storage for this topic (not available on this broker)."),
    _t("local.retention.ms", L, -2, "Local retention when tiered storage is on; -2 follows retention.ms.",
       at_least(-2), Synonym("log.local.retention.ms")),
    _t("local.retention.bytes", L, -2, "Local size limit when tiered storage is on; -2 follows "
       "retention.bytes.", at_least(-2), Synonym("log.local.retention.bytes")),
    _t("remote.log.copy.disable", B, False, "Stop copying segments to tiered storage."),
    _t("remote.log.delete.on.disable", B, False, "Delete remote data when tiered storage is turned off."),
)}


def _b(name: str, ctype: ConfigType, default: Any, doc: str, validator: Validator | None = None,
       dynamic: Dynamic = Dynamic.READ_ONLY) -> ConfigKey:
    return ConfigKey(name, ctype, default, doc, validator, (), dynamic)


RO, PB, CW = Dynamic.READ_ONLY, Dynamic.PER_BROKER, Dynamic.CLUSTER_WIDE

# Broker configs: the settings kcoord honours (server/config.py SETTINGS; defaults are kcoord's,
# tests/unit/test_config_catalogue.py keeps the two in step) and the broker defaults behind every
# topic config. Dynamic modes are Kafka's (DynamicBrokerConfig.AllDynamicConfigs), except
# `listeners` and `advertised.listeners` (per-broker in Kafka): kcoord binds its listeners and
# their advertised endpoints once at start-up, so they are read-only here.
BROKER_CONFIGS: dict[str, ConfigKey] = {k.name: k for k in (
    _b("listeners", S, "PLAINTEXT://127.0.0.1:9092", "Addresses the broker listens on (NAME://host:port)."),
    _b("advertised.listeners", S, None, "Addresses given to clients in Metadata and FindCoordinator; "
       "null means the listeners."),
    _b("node.id", INT, 1, "Id of this node in the cluster."),
    _b("broker.id", INT, -1, "Older name of node.id; used when set."),
    # replication (server/replication/): how followers fetch and when the leader drops them
    _b("replica.lag.time.max.ms", L, 30000, "A follower not caught up with the leader for this long leaves "
       "the ISR.", at_least(1)),
    _b("replica.fetch.wait.max.ms", INT, 500, "Longest a follower's Fetch waits at the leader for data.",
       at_least(0)),
    _b("replica.fetch.min.bytes", INT, 1, "Bytes a follower's Fetch waits for at the leader.", at_least(1)),
    _b("replica.fetch.max.bytes", INT, 1048576, "Bytes a follower fetches per partition (the first batch "
       "even if larger).", at_least(0)),
    _b("replica.fetch.response.max.bytes", INT, 10485760, "Bytes a follower fetches per Fetch (the first "
       "batch even if larger).", at_least(0)),
    _b("replica.fetch.backoff.ms", INT, 1000, "Pause of a follower's fetcher after an error.", at_least(0)),
    _b("replica.socket.timeout.ms", INT, 30000, "Timeout of a follower's requests to its leader.", at_least(1)),
    _b("replica.high.watermark.checkpoint.interval.ms", L, 5000, "How often the high watermarks are written to "
       "replication-offset-checkpoint.", at_least(1)),
    _b("zookeeper.connect", S, None, "ZooKeeper connection string (host:port,...[/chroot]); unset: one node, "
       "no cluster."),
    _b("zookeeper.session.timeout.ms", INT, 18000, "ZooKeeper session timeout: a node silent this long is gone."),
    _b("zookeeper.connection.timeout.ms", INT, None, "Longest wait to connect to ZooKeeper at start-up; "
       "zookeeper.session.timeout.ms when null."),
    _b("broker.rack", S, None, "Rack of this broker, for rack-aware replica assignment."),
    _b("replica.selector.class", S, None, "KIP-392: org.apache.kafka.common.replica.RackAwareReplicaSelector "
       "tells a consumer with client.rack to fetch from an in-sync replica in its rack; null: from the "
       "leader."),
    _b("inter.broker.listener.name", S, None, "Listener the brokers use between themselves; the first when null."),
    _b("offsets.topic.replication.factor", INT, 3, "Replication factor of __consumer_offsets (a cluster creates "
       "it once this many brokers are up).", at_least(1)),
    _b("transaction.state.log.replication.factor", INT, 3, "Replication factor of __transaction_state (a "
       "cluster creates it once this many brokers are up).", at_least(1)),
    _b("transaction.state.log.min.isr", INT, 2, "min.insync.replicas of __transaction_state.", at_least(1)),
    _b("auto.leader.rebalance.enable", B, True, "Move leadership back to preferred replicas in the background."),
    _b("leader.imbalance.check.interval.seconds", L, 300, "How often the controller checks for leader imbalance.",
       at_least(1)),
    _b("leader.imbalance.per.broker.percentage", INT, 10, "Share of a broker's partitions led elsewhere that "
       "triggers a preferred replica election.", at_least(0)),
    _b("controlled.shutdown.enable", B, True, "On SIGTERM, move leadership away before stopping."),
    _b("log.dirs", S, "./data", "Directory holding the partition logs (the first of a comma list)."),
    _b("log.dir", S, None, "Used when log.dirs is not set."),
    _b("num.partitions", INT, 1, "Partitions of an auto-created topic or a CreateTopics without a count.",
       at_least(1)),
    _b("default.replication.factor", INT, 1, "Replication factor of auto-created topics."),
    _b("auto.create.topics.enable", B, True, "Create a topic when Metadata asks for an unknown one."),
    _b("message.max.bytes", INT, 1048588, "Largest record batch accepted; the default of max.message.bytes.",
       at_least(0), CW),
    _b("socket.request.max.bytes", INT, 104857600, "Largest request the broker reads.", at_least(1)),
    _b("max.connections", INT, INT_MAX, "Most connections the broker accepts.", at_least(0), CW),
    _b("max.connections.per.ip", INT, INT_MAX, "Most connections from one address.", at_least(0), CW),
    _b("queued.max.requests", INT, 500, "Requests read from one connection before reading pauses.", at_least(1)),
    _b("quota.window.num", INT, 11, "Samples kept of each client quota's rate.", at_least(1)),
    _b("quota.window.size.seconds", INT, 1, "Time span of each client quota sample.", at_least(1)),
    _b("log.segment.bytes", INT, 1073741824, "Default of segment.bytes.", at_least(_RECORD_OVERHEAD_V0), CW),
    _b("log.roll.ms", L, None, "Default of segment.ms; log.roll.hours when null.", None, CW),
    _b("log.roll.hours", INT, 168, "Default of segment.ms, in hours.", at_least(1)),
    _b("log.roll.jitter.ms", L, None, "Default of segment.jitter.ms; log.roll.jitter.hours when null.", None, CW),
    _b("log.roll.jitter.hours", INT, 0, "Default of segment.jitter.ms, in hours.", at_least(0)),
    _b("log.retention.ms", L, None, "Default of retention.ms; log.retention.minutes when null.", None, CW),
    _b("log.retention.minutes", INT, None, "Default of retention.ms in minutes; log.retention.hours when null."),
    _b("log.retention.hours", INT, 168, "Default of retention.ms, in hours."),
    _b("log.retention.bytes", L, -1, "Default of retention.bytes.", None, CW),
    _b("log.retention.check.interval.ms", L, 300000, "How often retention deletes old segments.", at_least(1)),
    _b("log.cleanup.policy", LI, ["delete"], "Default of cleanup.policy.", each_one_of("compact", "delete"), CW),
    _b("log.index.size.max.bytes", INT, 10485760, "Default of segment.index.bytes.", at_least(4), CW),
    _b("log.index.interval.bytes", INT, 4096, "Default of index.interval.bytes.", at_least(0), CW),
    _b("log.flush.interval.messages", L, LONG_MAX, "Default of flush.messages.", at_least(1), CW),
    _b("log.flush.interval.ms", L, None, "Default of flush.ms; log.flush.scheduler.interval.ms when null.",
       None, CW),
    _b("log.flush.scheduler.interval.ms", L, LONG_MAX, "How often logs are checked for a time-based flush."),
    _b("log.segment.delete.delay.ms", L, 60000, "Default of file.delete.delay.ms.", at_least(0), CW),
    _b("log.preallocate", B, False, "Default of preallocate.", None, CW),
    _b("log.message.format.version", S, "3.0-IV1", "Default of message.format.version (ignored since 3.0).",
       _metadata_version),
    _b("log.message.timestamp.type", S, "CreateTime", "Default of message.timestamp.type.",
       one_of(*_TIMESTAMP_TYPES), CW),
    _b("log.message.timestamp.difference.max.ms", L, LONG_MAX, "Default of "
       "message.timestamp.difference.max.ms.", at_least(0), CW),
    _b("log.message.timestamp.before.max.ms", L, LONG_MAX, "Default of message.timestamp.before.max.ms.",
       at_least(0), CW),
    _b("log.message.timestamp.after.max.ms", L, LONG_MAX, "Default of message.timestamp.after.max.ms.",
       at_least(0), CW),
    _b("log.message.downconversion.enable", B, True, "Default of message.downconversion.enable.", None, CW),
    _b("log.local.retention.ms", L, -2, "Default of local.retention.ms.", at_least(-2), CW),
    _b("log.local.retention.bytes", L, -2, "Default of local.retention.bytes.", at_least(-2), CW),
    _b("log.cleaner.delete.retention.ms", L, 86400000, "Default of delete.retention.ms; also how long the "
       "compactor keeps tombstones of __consumer_offsets.", at_least(0), CW),
    _b("log.cleaner.min.compaction.lag.ms", L, 0, "Default of min.compaction.lag.ms.", at_least(0), CW),
    _b("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, "Default of max.compaction.lag.ms.", at_least(1), CW),
    _b("log.cleaner.min.cleanable.ratio", D, 0.5, "Default of min.cleanable.dirty.ratio.", between(0, 1), CW),
    _b("log.cleaner.backoff.ms", L, 15000, "Pause of the compactor when nothing is to be compacted.",
       at_least(0), CW),
    _b("unclean.leader.election.enable", B, False, "Default of unclean.leader.election.enable.", None, CW),
    _b("min.insync.replicas", INT, 1, "Default of min.insync.replicas.", at_least(1), CW),
    _b("compression.type", S, "producer", "Default of compression.type.", one_of(*_COMPRESSION), CW),
    _b("compression.gzip.level", INT, -1, "Default of compression.gzip.level.", _gzip_level, CW),
    _b("compression.lz4.level", INT, 9, "Default of compression.lz4.level.", between(1, 17), CW),
    _b("compression.zstd.level", INT, 3, "Default of compression.zstd.level.", between(-131072, 22), CW),
    _b("offsets.topic.num.partitions", INT, 50, "Partitions of __consumer_offsets, fixed once it exists.",
       at_least(1)),
    _b("offsets.topic.segment.bytes", INT, 104857600, "segment.bytes of __consumer_offsets.", at_least(1)),
    _b("offsets.retention.minutes", INT, 10080, "How long committed offsets of an empty group are kept.",
       at_least(1)),
    _b("offsets.retention.check.interval.ms", L, 600000, "How often expired offsets are removed.", at_least(1)),
    _b("offsets.commit.timeout.ms", INT, 5000, "How long a commit may wait to be durable.", at_least(1)),
    _b("offsets.commit.required.acks", ConfigType.SHORT, -1, "Acknowledgements a cluster's group coordinator "
       "waits for before answering a commit or a group write (-1: every in-sync replica, and at least "
       "min.insync.replicas of them); at most offsets.topic.replication.factor.", at_least(-1)),
    _b("offsets.load.buffer.size", INT, 5242880, "Read size when loading __consumer_offsets.", at_least(1)),
    _b("offset.metadata.max.bytes", INT, 4096, "Largest metadata string of a committed offset."),
    _b("group.min.session.timeout.ms", INT, 6000, "Shortest session timeout a member may ask for."),
    _b("group.max.session.timeout.ms", INT, 1800000, "Longest session timeout a member may ask for."),
    _b("group.initial.rebalance.delay.ms", INT, 3000, "Wait for more members before a new group's first "
       "rebalance."),
    _b("group.max.size", INT, INT_MAX, "Most members a group may have.", at_least(1)),
    _b("group.share.record.lock.duration.ms", INT, 30000, "How long a share consumer holds an acquired "
       "record.", between(1000, 3600000)),
    _b("group.share.delivery.count.limit", INT, 5, "Deliveries of a record before it is archived.",
       between(2, 10)),
    _b("group.share.partition.max.record.locks", INT, 2000, "In-flight records per share partition.",
       between(100, 10000)),
    _b("share.coordinator.state.topic.num.partitions", INT, 50, "Partitions of __share_group_state.",
       at_least(1)),
    _b("share.coordinator.state.topic.replication.factor", INT, 3, "Replication factor of __share_group_state "
       "on a cluster (created at the first share-state use once this many brokers are up).", at_least(1)),
    _b("share.coordinator.state.topic.min.isr", INT, 2, "min.insync.replicas of __share_group_state.",
       at_least(1)),
    _b("share.coordinator.state.topic.segment.bytes", INT, 104857600, "segment.bytes of "
       "__share_group_state.", at_least(1)),
    _b("share.coordinator.snapshot.update.records.per.snapshot", INT, 500, "ShareUpdate records between "
       "two ShareSnapshot records of a share partition.", between(0, 500)),
    _b("share.coordinator.write.timeout.ms", INT, 5000, "How long a share-state write may wait to be "
       "durable.", at_least(1)),
    _b("max.incremental.fetch.session.cache.slots", INT, 1000, "Most incremental fetch sessions kept "
       "(KIP-227), an eighth in each of the cache's 8 shards.", at_least(0)),
)}


def topic_key(name: str) -> ConfigKey | None:
    return TOPIC_CONFIGS.get(name)


def broker_key(name: str) -> ConfigKey | None:
    return BROKER_CONFIGS.get(name)


def broker_synonyms(name: str) -> list[str]:
    """DynamicBrokerConfig.brokerConfigSynonyms: the names one broker setting goes by."""
    for group in (["log.roll.ms", "log.roll.hours"], ["log.roll.jitter.ms", "log.roll.jitter.hours"],
                  ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]):
        if name in group:
            return group
    if name == "log.flush.interval.ms":
        return ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"]
    return [name]


# ---------------------------------------------------------------------------- topic validation


def check_topic_configs(configs: dict[str, str | None], merged: dict[str, Any]) -> dict[str, Any]:
    """LogConfig.validate: `configs` (the topic's own, as given) must all be known topic configs
    with non-null, valid values. `merged` maps every topic config to its effective typed value
    without the topic's own; returns the topic's typed values. Raises ConfigError (messages as
    Kafka's; an unknown name or a null is TopicConfigError, answered INVALID_CONFIG too)."""
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise TopicConfigError(f"Unknown topic config name: {name}")
    nulls = [name for name, value in configs.items() if value is None]
    if nulls:
        raise TopicConfigError("Null value not supported for topic configs: " + ",".join(nulls))
    parsed: dict[str, Any] = {}
    for name, key in TOPIC_CONFIGS.items():  # definition order: the first bad value is reported
        if name in configs:
            parsed[name] = key.parse(configs[name])
    effective = {**merged, **parsed}
    lo, hi = effective["min.compaction.lag.ms"], effective["max.compaction.lag.ms"]
    if lo > hi:
        raise TopicConfigError(f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                               f"max.compaction.lag.ms ({hi})")
    if effective["remote.storage.enable"]:
        raise TopicConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                               "configured with remote log storage.")
    return parsed


class TopicConfigError(ConfigError):
    """InvalidConfigurationException: a message of its own, no "Invalid value ..." prefix."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)


# ---------------------------------------------------------------------------- settings glue


def inferred_key(name: str, default: Any, secret: bool) -> ConfigKey:
    """A setting kcoord has that this table does not describe (kcoord's own, or one another part
    of the server added): typed from its default, read-only; a secret is a PASSWORD."""
    if secret:
        ctype = ConfigType.PASSWORD
    elif isinstance(default, bool):
        ctype = ConfigType.BOOLEAN
    elif isinstance(default, int):
        ctype = ConfigType.INT if -2**31 <= default < 2**31 else ConfigType.LONG
    elif isinstance(default, float):
        ctype = ConfigType.DOUBLE
    elif isinstance(default, list | tuple):
        ctype = ConfigType.LIST
    else:
        ctype = ConfigType.STRING
    if isinstance(default, list | tuple):
        default = [str(x) for x in default]
    elif secret or default == "":
        default = None
    return ConfigKey(name, ctype, default, "", None, (), Dynamic.READ_ONLY)


def check_static(name: str, raw: Any) -> None:
    """A broker config given at start-up that only this table knows: refused when invalid."""
    key = BROKER_CONFIGS.get(name)
    if key is not None:
        key.parse(raw)
