"""Server configuration with Kafka's setting names and defaults.

Sources, later wins: built-in defaults, a server.properties (Java properties) or .toml file,
then `--override name=value` flags, exactly like kafka-server-start.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def _str(v: Any) -> str:
    return str(v).strip()


# name -> (parser, default): the settings kcoord honours. Like Kafka, other names (a stock
# server.properties has many) are kept aside and reported at start-up, not refused; a bad
# value for a known name is refused.
SETTINGS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "listeners": (_str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (_str, ""),
    "node.id": (int, 1),
    "broker.id": (int, -1),  # alias of node.id from ZooKeeper-era configs
    "log.dirs": (_str, "./data"),
    "log.dir": (_str, ""),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (_bool, True),
    "message.max.bytes": (int, 1048588),
    "socket.request.max.bytes": (int, 104857600),
    "max.connections": (int, 2147483647),
    "max.connections.per.ip": (int, 2147483647),
    "queued.max.requests": (int, 500),
    "log.segment.bytes": (int, 1073741824),
    "log.retention.ms": (int, -2),  # -2: not set, derive from log.retention.minutes / hours
    "log.retention.minutes": (int, -2),
    "log.retention.hours": (int, 168),
    "log.retention.bytes": (int, -1),
    "log.retention.check.interval.ms": (int, 300000),
    "log.message.timestamp.type": (_str, "CreateTime"),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.topic.segment.bytes": (int, 104857600),
    "offsets.retention.minutes": (int, 10080),
    "offsets.retention.check.interval.ms": (int, 600000),
    "offsets.commit.timeout.ms": (int, 5000),
    "offsets.load.buffer.size": (int, 5242880),
    "offset.metadata.max.bytes": (int, 4096),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.max.size": (int, 2147483647),
    # Kafka's log cleaner settings, used by `kcoord compact` / `kcoord sidecar`
    "log.cleaner.delete.retention.ms": (int, 86400000),
    "log.cleaner.min.cleanable.ratio": (float, 0.5),
    "log.cleaner.backoff.ms": (int, 15000),
    "cluster.id": (_str, ""),
    "log.level": (_str, "INFO"),
    # kcoord's own: where Prometheus scrapes /metrics, e.g. http://127.0.0.1:9404 (off when empty)
    "kcoord.metrics.listener": (_str, ""),
    # kcoord's own: the control API for tests (fault injection, recording, reset), e.g.
    # http://127.0.0.1:9405 (off when empty; server/control/)
    "kcoord.control.listener": (_str, ""),
    # how often the server looks for compacted segments the sidecar committed (.swap files)
    "kcoord.compaction.handoff.check.ms": (int, 1000),
}


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listener(spec: str) -> Listener:
    """`PLAINTEXT://host:port`; an empty host means all interfaces, as in Kafka."""
    name, sep, rest = spec.partition("://")
    if not sep:
        raise ValueError(f"listener {spec!r} is not NAME://host:port")
    parts = urlsplit("//" + rest)
    if parts.port is None:
        raise ValueError(f"listener {spec!r} has no port")
    return Listener(name.upper(), parts.hostname or "", parts.port)


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


class Config:
    """Parsed, validated settings. Read with cfg["name"] or the typed helpers below."""

    def __init__(self, values: dict[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {k: d for k, (_, d) in SETTINGS.items()}
        self.unknown: dict[str, Any] = {}
        for k, v in (values or {}).items():
            self.set(k, v)

    def set(self, name: str, value: Any) -> None:
        if name not in SETTINGS:
            self.unknown[name] = value
            return
        parser, _ = SETTINGS[name]
        try:
            self._values[name] = parser(value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"bad value for {name}: {value!r} ({e})") from None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    @classmethod
    def load(cls, path: str | Path | None = None, overrides: Iterable[str] = ()) -> Config:
        values: dict[str, Any] = {}
        if path is not None:
            p = Path(path)
            text = p.read_text()
            if p.suffix == ".toml":
                import tomllib

                values.update(_flatten_toml(tomllib.loads(text)))
            else:
                values.update(parse_properties(text))
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
    def listeners(self) -> list[Listener]:
        return [parse_listener(s.strip()) for s in self["listeners"].split(",") if s.strip()]

    @property
    def advertised_listeners(self) -> list[Listener]:
        spec = self["advertised.listeners"]
        if not spec:
            return self.listeners
        return [parse_listener(s.strip()) for s in spec.split(",") if s.strip()]

    @property
    def advertised(self) -> tuple[str, int]:
        """host and port clients should connect to (Metadata, FindCoordinator)."""
        lst = self.advertised_listeners[0]
        return (lst.host or "127.0.0.1", lst.port)

    @property
    def log_retention_ms(self) -> int:
        if self["log.retention.ms"] != -2:
            return self["log.retention.ms"]
        if self["log.retention.minutes"] != -2:
            return self["log.retention.minutes"] * 60_000
        return self["log.retention.hours"] * 3_600_000
