"""Listeners with Kafka's names and semantics.

`listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9093,INTERNAL://127.0.0.1:9094` names the
sockets to bind; each listener name maps to a security protocol through
listener.security.protocol.map (by default each of PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL
maps to itself, so a listener named INTERNAL needs an entry such as INTERNAL:SASL_PLAINTEXT).
advertised.listeners (default: listeners) says, per listener name, which host and port clients
are told to use; a client is always answered (Metadata, FindCoordinator, DescribeCluster) with
the endpoint of the listener it connected to, as Kafka does.

Settings are read per listener the way Kafka reads them: `listener.name.<name>.<setting>`
first (and `listener.name.<name>.<mechanism>.<setting>` for SASL settings), then the
broker-wide `<setting>`.

A `Listener` is one bound socket: its name, security protocol, the address it binds, the
endpoint it advertises, and what its connections need (TLS context, SASL settings). The
server owns a list of them; anything that serves connections (virtual brokers included)
builds on this object.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

    from kcoord.server.config import Config
    from kcoord.server.security.sasl import SaslSettings


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"

# Kafka's SocketServerConfigs.listenerListToEndPoints pattern
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One `NAME://host:port` entry; an empty host binds every interface."""

    name: str
    host: str
    port: int


def parse_endpoint(spec: str) -> EndPoint:
    m = _ENDPOINT.match(spec.strip())
    if m is None:
        raise ValueError(f"Unable to parse {spec.strip()} to a broker endpoint")
    port = int(m.group(3))
    if not 0 <= port <= 65535:
        raise ValueError(f"Unable to parse {spec.strip()} to a broker endpoint: port {port} out of range")
    return EndPoint(m.group(1).upper(), m.group(2), port)


def parse_endpoints(value: str) -> list[EndPoint]:
    return [parse_endpoint(s) for s in value.split(",") if s.strip()]


def parse_protocol_map(value: str) -> dict[str, SecurityProtocol]:
    """`INTERNAL:SASL_PLAINTEXT,EXTERNAL:SASL_SSL` (Kafka's Csv.parseCsvMap)."""
    out: dict[str, SecurityProtocol] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        name, sep, proto = item.strip().rpartition(":")
        if not sep or not name.strip():
            raise ValueError(f"Error parsing configuration property 'listener.security.protocol.map': "
                             f"malformed entry {item.strip()!r}")
        try:
            out[name.strip().upper()] = SecurityProtocol(proto.strip().upper())
        except ValueError:
            raise ValueError(f"Error parsing configuration property 'listener.security.protocol.map': "
                             f"{proto.strip()!r} is not a security protocol "
                             f"({', '.join(p.value for p in SecurityProtocol)})") from None
    return out


def _is_ip(host: str) -> int:
    try:
        return ipaddress.ip_address(host.split("%")[0]).version
    except ValueError:
        return 0


def _check_distinct(endpoints: list[EndPoint], value: str, distinct_ports: bool) -> None:
    """Kafka's rules: distinct names; distinct ports (0 excepted) unless one IPv4 and one IPv6."""
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ValueError(f"Each listener must have a different name, listeners: {value}")
    if not distinct_ports:
        return
    by_port: dict[int, list[EndPoint]] = {}
    for e in endpoints:
        if e.port:
            by_port.setdefault(e.port, []).append(e)
    for port, eps in by_port.items():
        if len(eps) == 1:
            continue
        versions = sorted(_is_ip(e.host) for e in eps)
        if versions != [4, 6]:
            raise ValueError(f"Each listener must have a different port unless exactly one listener has an "
                             f"IPv4 address and the other IPv6 address, listeners: {value}, port: {port}")


@dataclass(frozen=True, slots=True)
class ListenerSpec:
    """A configured listener, before it is bound."""

    name: str
    protocol: SecurityProtocol
    host: str
    port: int
    advertised: EndPoint | None  # None: not named in advertised.listeners (Kafka does not advertise it)


def listener_specs(config: Config) -> list[ListenerSpec]:
    """Every configured listener, validated as Kafka validates them (ValueError with Kafka's
    message otherwise)."""
    protocols = parse_protocol_map(config["listener.security.protocol.map"])
    raw = config["listeners"]
    endpoints = parse_endpoints(raw)
    if not endpoints:
        raise ValueError("listeners must name at least one listener")
    _check_distinct(endpoints, raw, distinct_ports=True)
    adv_raw = config["advertised.listeners"]
    advertised = parse_endpoints(adv_raw) if adv_raw else endpoints
    _check_distinct(advertised, adv_raw, distinct_ports=False)
    names = {e.name for e in endpoints}
    for e in endpoints + advertised:
        if e.name not in protocols:
            raise ValueError(f"No security protocol defined for listener {e.name}")
    extra = {e.name for e in advertised} - names
    if extra:
        raise ValueError(
            "advertised.listeners listener names must be equal to or a subset of the ones defined in "
            f"listeners. Found {','.join(sorted({e.name for e in advertised}))}. The valid options based "
            f"on the current configuration are {','.join(sorted(names))}")
    if any(e.host == "0.0.0.0" for e in advertised):
        raise ValueError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                         "Use a routable IP address.")
    adv_by_name = {e.name: e for e in advertised}
    return [ListenerSpec(e.name, protocols[e.name], e.host, e.port, adv_by_name.get(e.name)) for e in endpoints]


def listener_setting(config: Config, listener: str, name: str, mechanism: str | None = None) -> Any:
    """A setting as Kafka reads it for one listener: `listener.name.<l>.<mechanism>.<name>`
    (SASL settings), then `listener.name.<l>.<name>`, then the broker-wide `<name>`."""
    scoped = config.listener_overrides.get(listener.lower(), {})
    if mechanism is not None:
        key = f"{mechanism.lower()}.{name}"
        if key in scoped:
            return scoped[key]
    if name in scoped:
        return scoped[name]
    return config[name]


def has_listener_setting(config: Config, listener: str, name: str) -> bool:
    return name in config.listener_overrides.get(listener.lower(), {})


@dataclass(eq=False)
class Listener:
    """One bound listener socket and everything its connections need."""

    name: str
    protocol: SecurityProtocol
    host: str  # bind address; "" binds every interface
    port: int  # configured port; 0 takes any free port
    advertised_endpoint: EndPoint | None
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None
    principal_mapper: Any = None  # kcoord.server.security.principal.SslPrincipalMapper for SSL listeners
    bound: list[tuple[str, int]] = field(default_factory=list)  # (host, port) of each bound socket

    @property
    def bound_port(self) -> int:
        return self.bound[0][1] if self.bound else self.port

    @property
    def advertised(self) -> tuple[str, int] | None:
        """What clients connected to this listener are told to use; None when the listener is
        not in advertised.listeners (Kafka then leaves this broker out of their metadata). A
        port of 0 advertises the port actually bound; an empty host advertises 127.0.0.1."""
        adv = self.advertised_endpoint
        if adv is None:
            return None
        port = adv.port or self.bound_port
        return (adv.host or "127.0.0.1", port)

    def describe(self) -> str:
        hosts = ", ".join(f"{h}:{p}" for h, p in self.bound) or f"{self.host}:{self.port}"
        return f"{self.name} ({self.protocol.value}) on {hosts}"
