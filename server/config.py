"""Server configuration with Kafka's setting names and defaults.

Sources, later wins: built-in defaults, a server.properties (Java properties) or .toml file,
the environment's KAFKA_<NAME> variables as the apache/kafka image reads them (when given one:
server/config_env.py), then `--override name=value` flags, as kafka-server-start.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kcoord.server.config_catalogue import BROKER_CONFIGS, check_static
from kcoord.server.kafka_config_names import known_to_kafka
from kcoord.server.security.settings import (
    LISTENER_SCOPED,
    MECHANISM_SCOPED,
    SECURITY_SETTINGS,
    SENSITIVE,
)
from kcoord.server.security.settings import parse_bool as _bool
from kcoord.server.security.settings import parse_str as _str

if TYPE_CHECKING:
    from kcoord.server.listeners import EndPoint


def _text(v: Any) -> str:
    """A value from a file or flag as Kafka's properties would hold it (TOML values too)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(_text(x) for x in v)
    return str(v)


def _assignors(v: Any) -> tuple[str, ...]:
    from kcoord.server.group.consumer.assignors import assignor_names

    names = [s for s in (v if isinstance(v, list | tuple) else str(v).split(",")) if str(s).strip()]
    if not names:
        raise ValueError("at least one assignor is needed")
    return tuple(assignor_names([str(s) for s in names]))


def _transaction_version(v: Any) -> int:
    level = int(str(v).strip())
    if not 0 <= level <= 2:
        raise ValueError("a transaction.version feature level: 0, 1 or 2")
    return level


def _migration_policy(v: Any) -> str:
    s = str(v).strip().lower()
    if s not in ("bidirectional", "upgrade", "downgrade", "disabled"):
        raise ValueError("one of bidirectional, upgrade, downgrade, disabled")
    return s


def _share_group_settings() -> dict[str, tuple[Callable[[Any], Any], Any]]:
    from kcoord.server.group.share.settings import SETTINGS as SHARE

    return SHARE


# name -> (parser, default): the settings kcoord honours. Like Kafka, other names (a stock
# server.properties has many) are kept aside and reported at start-up, not refused; a bad
# value for a known name is refused.
SETTINGS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "listeners": (_str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (_str, ""),
    "node.id": (int, 1),
    "broker.id": (int, -1),  # alias of node.id from ZooKeeper-era configs
    # replication (server/replication/), Kafka's defaults
    "replica.lag.time.max.ms": (int, 30000),
    "replica.fetch.wait.max.ms": (int, 500),
    "replica.fetch.min.bytes": (int, 1),
    "replica.fetch.max.bytes": (int, 1048576),
    "replica.fetch.response.max.bytes": (int, 10485760),
    "replica.fetch.backoff.ms": (int, 1000),
    "replica.socket.timeout.ms": (int, 30000),
    "replica.high.watermark.checkpoint.interval.ms": (int, 5000),
    "log.dirs": (_str, "./data"),
    "log.dir": (_str, ""),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (_bool, True),
    "delete.topic.enable": (_bool, True),
    "message.max.bytes": (int, 1048588),
    "socket.request.max.bytes": (int, 104857600),
    "max.connections": (int, 2147483647),
    "max.connections.per.ip": (int, 2147483647),
    "queued.max.requests": (int, 500),
    "quota.window.num": (int, 11),
    "quota.window.size.seconds": (int, 1),
    "log.segment.bytes": (int, 1073741824),
    "log.retention.ms": (int, -2),  # -2: not set, derive from log.retention.minutes / hours
    "log.retention.minutes": (int, -2),
    "log.retention.hours": (int, 168),
    "log.retention.bytes": (int, -1),
    "log.retention.check.interval.ms": (int, 300000),
    "max.incremental.fetch.session.cache.slots": (int, 1000),
    # Kafka's fixed MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (KIP-227's min.incremental.fetch.
    # session.eviction.ms, no longer a Kafka config): kcoord's own setting
    "kcoord.min.incremental.fetch.session.eviction.ms": (int, 120000),
    "log.message.timestamp.type": (_str, "CreateTime"),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.topic.segment.bytes": (int, 104857600),
    "offsets.retention.minutes": (int, 10080),
    "offsets.retention.check.interval.ms": (int, 600000),
    "offsets.commit.timeout.ms": (int, 5000),
    "offsets.commit.required.acks": (int, -1),
    "offsets.load.buffer.size": (int, 5242880),
    "offset.metadata.max.bytes": (int, 4096),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.max.size": (int, 2147483647),
    # the transaction coordinator (server/txn/)
    "transaction.state.log.num.partitions": (int, 50),
    "transaction.state.log.segment.bytes": (int, 104857600),
    "transaction.state.log.load.buffer.size": (int, 5242880),
    "transaction.max.timeout.ms": (int, 900000),
    "transactional.id.expiration.ms": (int, 604800000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (int, 10000),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (int, 3600000),
    "transaction.partition.verification.enable": (_bool, True),
    # kcoord's own: the finalized transaction.version feature, what `kafka-storage.sh format
    # --feature transaction.version=N` sets on a Kafka 4 cluster (2, its default: transactions v2)
    "kcoord.transaction.version": (_transaction_version, 2),
    # kcoord's own: answer EndTxn once PrepareCommit/PrepareAbort is durable (true, as Kafka
    # does, the default: markers are written afterwards) or once the transaction is complete (false)
    "kcoord.transaction.end.answer.on.prepare": (_bool, True),
    "request.timeout.ms": (int, 30000),
    # consumer groups (KIP-848), Kafka 4.x's names and defaults
    "group.consumer.session.timeout.ms": (int, 45000),
    "group.consumer.min.session.timeout.ms": (int, 45000),
    "group.consumer.max.session.timeout.ms": (int, 60000),
    "group.consumer.heartbeat.interval.ms": (int, 5000),
    "group.consumer.min.heartbeat.interval.ms": (int, 5000),
    "group.consumer.max.heartbeat.interval.ms": (int, 15000),
    "group.consumer.max.size": (int, 2147483647),
    "group.consumer.assignors": (_assignors, ("uniform", "range")),
    "group.consumer.migration.policy": (_migration_policy, "bidirectional"),
    # share partitions and their state (KIP-932), Kafka 4.x's names and defaults (server/share/)
    "group.share.record.lock.duration.ms": (int, 30000),
    "group.share.delivery.count.limit": (int, 5),
    "group.share.partition.max.record.locks": (int, 2000),
    "share.coordinator.state.topic.num.partitions": (int, 50),
    "share.coordinator.state.topic.segment.bytes": (int, 104857600),
    "share.coordinator.snapshot.update.records.per.snapshot": (int, 500),
    "share.coordinator.write.timeout.ms": (int, 5000),
    "share.coordinator.state.topic.replication.factor": (int, 3),
    "share.coordinator.state.topic.min.isr": (int, 2),
    # share groups (KIP-932): server/group/share/settings.py
    **_share_group_settings(),
    # Kafka's log cleaner settings, used by `kcoord compact` / `kcoord sidecar`
    "log.cleaner.delete.retention.ms": (int, 86400000),
    "log.cleaner.min.cleanable.ratio": (float, 0.5),
    "log.cleaner.backoff.ms": (int, 15000),
    # the cluster through ZooKeeper (server/cluster/, docs/cluster.md); unset: one node
    "zookeeper.connect": (_str, ""),
    "zookeeper.session.timeout.ms": (int, 18000),
    "zookeeper.connection.timeout.ms": (int, -2),  # -2 (not set): zookeeper.session.timeout.ms
    "broker.rack": (_str, ""),
    "replica.selector.class": (_str, ""),  # KIP-392 (server/replication/read_replica.py)
    "inter.broker.listener.name": (_str, ""),
    "offsets.topic.replication.factor": (int, 3),
    "transaction.state.log.replication.factor": (int, 3),
    "transaction.state.log.min.isr": (int, 2),
    "auto.leader.rebalance.enable": (_bool, True),
    "leader.imbalance.check.interval.seconds": (int, 300),
    "leader.imbalance.per.broker.percentage": (int, 10),
    "controlled.shutdown.enable": (_bool, True),
    "unclean.leader.election.enable": (_bool, False),
    "cluster.id": (_str, ""),
    "log.level": (_str, "INFO"),
    # kcoord's own: where Prometheus scrapes /metrics, e.g. http://127.0.0.1:9404 (off when empty)
    "kcoord.metrics.listener": (_str, ""),
    # kcoord's own: the control API for tests (fault injection, recording, reset), e.g.
    # http://127.0.0.1:9405 (off when empty; server/control/)
    "kcoord.control.listener": (_str, ""),
    # kcoord's own: serve N node ids, each on its own listener ports (server/virtual/); 1: off
    "kcoord.virtual.brokers": (int, 1),
    # how often the server looks for compacted segments the sidecar committed (.swap files)
    "kcoord.compaction.handoff.check.ms": (int, 1000),
    **SECURITY_SETTINGS,
}


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties: `key=value` or `key: value`, # and ! comments, \\ line continuations."""
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        idx = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if idx < 0:
            out[line] = ""
        else:
            out[line[:idx].strip()] = line[idx + 1 :].strip()
    return out


def _flatten_toml(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten_toml(v, name + "."))
        else:
            out[name] = v
    return out


def _parse(name: str, parser: Callable[[Any], Any], value: Any) -> Any:
    try:
        return parser(value)
    except (TypeError, ValueError) as e:
        if name in SENSITIVE or name.endswith(tuple("." + n for n in SENSITIVE)):
            raise ValueError(f"bad value for {name}: [hidden]") from None  # secrets stay out of logs
        raise ValueError(f"bad value for {name}: {value!r} ({e})") from None


class Config:
    """Parsed, validated settings. Read with cfg["name"] or the typed helpers below."""

    def __init__(self, values: dict[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {k: d for k, (_, d) in SETTINGS.items()}
        self.unknown: dict[str, Any] = {}  # names Kafka does not know either: warned about
        self.ignored: dict[str, Any] = {}  # Kafka's names kcoord does not use: a DEBUG note
        # every name given (file or --override) as text: Kafka's STATIC_BROKER_CONFIG layer
        self.given: dict[str, str] = {}
        # listener.name.<listener>.[<mechanism>.]<setting>: listener (lower case) -> {"[mechanism.]setting": value}
        self.listener_overrides: dict[str, dict[str, Any]] = {}
        for k, v in (values or {}).items():
            self.set(k, v)
        from kcoord.server.listeners import listener_specs

        listener_specs(self)  # Kafka refuses a bad listener configuration at start-up
        if self["offsets.commit.required.acks"] > self["offsets.topic.replication.factor"]:  # GroupCoordinatorConfig
            raise ValueError("offsets.commit.required.acks must be greater or equal to -1 and less or equal to "
                             "offsets.topic.replication.factor")

    def set(self, name: str, value: Any) -> None:
        try:
            check_static(name, value)  # Kafka's type and range rules, where the catalogue has them
        except ValueError as e:
            raise ValueError(f"bad value for {name}: {value!r} ({e})") from None
        self.given[name] = _text(value)
        if name.startswith("listener.name."):
            self._set_listener_scoped(name, value)
            return
        if name not in SETTINGS:
            if name not in BROKER_CONFIGS:  # the broker defaults of topic configs are known
                self._not_used(name, value)
            return
        self._values[name] = _parse(name, SETTINGS[name][0], value)

    def apply(self, name: str, value: str | None) -> None:
        """A dynamic broker config (server/config_layers.py) changed: `value` is the effective
        dynamic text, None when none is left (the static or default value comes back)."""
        if name not in SETTINGS:
            return
        if value is None:
            value = self.given.get(name)
        if value is None:
            self._values[name] = SETTINGS[name][1]
        else:
            self._values[name] = _parse(name, SETTINGS[name][0], value)

    def _set_listener_scoped(self, name: str, value: Any) -> None:
        """`listener.name.<listener>.<setting>` or `listener.name.<listener>.<mechanism>.<setting>`
        (Kafka's per-listener overrides; the listener name is lower case in the prefix)."""
        listener, _, rest = name[len("listener.name."):].partition(".")
        mechanism, _, after = rest.partition(".")
        if rest in LISTENER_SCOPED:
            key, parser = rest, LISTENER_SCOPED[rest]
        elif after in MECHANISM_SCOPED and mechanism:
            key, parser = f"{mechanism.lower()}.{after}", MECHANISM_SCOPED[after]
        else:
            self._not_used(name, value)
            return
        if not listener:
            self.unknown[name] = value
            return
        self.listener_overrides.setdefault(listener.lower(), {})[key] = _parse(name, parser, value)

    def _not_used(self, name: str, value: Any) -> None:
        (self.ignored if known_to_kafka(name) else self.unknown)[name] = value

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Iterable[str] = (),
             environ: Mapping[str, str] | None = None) -> Config:
        """`environ`: the process environment, whose KAFKA_<NAME> variables are settings
        (the command line passes os.environ; None: no environment layer)."""
        values: dict[str, Any] = {}
        if path is not None:
            p = Path(path)
            text = p.read_text()
            if p.suffix == ".toml":
                import tomllib

                values.update(_flatten_toml(tomllib.loads(text)))
            else:
                values.update(parse_properties(text))
        if environ is not None:
            from kcoord.server.config_env import env_settings

            values.update(env_settings(environ))
        for ov in overrides:
            name, sep, value = ov.partition("=")
            if not sep:
                raise ValueError(f"--override wants name=value, got {ov!r}")
            values[name.strip()] = value.strip()
        return cls(values)

    # Derived settings, computed the way Kafka does.

    @property
    def node_id(self) -> int:
        return self["node.id"] if self["broker.id"] < 0 else self["broker.id"]

    @property
    def log_dir(self) -> Path:
        # Kafka accepts a comma list; kcoord keeps everything in the first directory.
        raw = self["log.dirs"] or self["log.dir"]
        return Path(raw.split(",")[0].strip())

    @property
    def listeners(self) -> list[EndPoint]:
        from kcoord.server.listeners import parse_endpoints

        return parse_endpoints(self["listeners"])

    @property
    def advertised_listeners(self) -> list[EndPoint]:
        from kcoord.server.listeners import parse_endpoints

        return parse_endpoints(self["advertised.listeners"]) or self.listeners

    @property
    def advertised(self) -> tuple[str, int]:
        """The first advertised endpoint. Handlers answer with the endpoint of the listener the
        request came in on instead (RequestContext.advertised)."""
        lst = self.advertised_listeners[0]
        return (lst.host or "127.0.0.1", lst.port)

    @property
    def log_retention_ms(self) -> int:
        if self["log.retention.ms"] != -2:
            return self["log.retention.ms"]
        if self["log.retention.minutes"] != -2:
            return self["log.retention.minutes"] * 60_000
        return self["log.retention.hours"] * 3_600_000
