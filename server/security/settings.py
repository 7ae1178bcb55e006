"""The security settings, with Kafka's names and defaults.

Secrets (Kafka's PASSWORD type) are parsed into `Password`, which prints as `[hidden]`, so a
configuration dump or an error message never shows them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Password:
    """A secret setting: `str()` and `repr()` give `[hidden]`, as Kafka's Password does."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value.value if isinstance(value, Password) else str(value)

    def __str__(self) -> str:
        return "[hidden]"

    __repr__ = __str__

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


def parse_str(v: Any) -> str:
    """A text setting, without surrounding white space (server/config.py's parser too)."""
    return str(v).strip()


def parse_bool(v: Any) -> bool:
    """A boolean setting: a bool, or true/1/yes and false/0/no in any case (server/config.py's
    parser too)."""
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"not a boolean: {v!r}")


_str, _bool = parse_str, parse_bool  # the tables' short names


def _one_of(*choices: str) -> Callable[[Any], str]:
    def parse(v: Any) -> str:
        s = str(v).strip().lower()
        if s not in choices:
            raise ValueError(f"String must be one of: {', '.join(choices)}")
        return s

    return parse


def _list(v: Any) -> list[str]:
    if isinstance(v, list | tuple):
        return [str(x).strip() for x in v if str(x).strip()]
    return [s.strip() for s in str(v).split(",") if s.strip()]


def _long(v: Any) -> int:
    n = int(str(v).strip())
    if n < 0:
        raise ValueError("must be >= 0")
    return n


# Settings that apply per listener (`listener.name.<listener>.<setting>` overrides them).
LISTENER_SCOPED: dict[str, Callable[[Any], Any]] = {
    "ssl.keystore.type": _str,
    "ssl.keystore.location": _str,
    "ssl.keystore.password": Password,
    "ssl.key.password": Password,
    "ssl.keystore.key": Password,
    "ssl.keystore.certificate.chain": Password,
    "ssl.truststore.type": _str,
    "ssl.truststore.location": _str,
    "ssl.truststore.password": Password,
    "ssl.truststore.certificates": Password,
    "ssl.client.auth": _one_of("none", "requested", "required"),
    "ssl.enabled.protocols": _list,
    "ssl.protocol": _str,
    "ssl.cipher.suites": _list,
    "ssl.principal.mapping.rules": _str,
    "sasl.enabled.mechanisms": _list,
    "sasl.server.max.receive.size": _long,
    "connections.max.reauth.ms": _long,
}

# Settings read per listener and SASL mechanism (`listener.name.<listener>.<mechanism>.<setting>`).
MECHANISM_SCOPED: dict[str, Callable[[Any], Any]] = {
    "sasl.jaas.config": Password,
    "connections.max.reauth.ms": _long,
}

# name -> (parser, Kafka's default)
SECURITY_SETTINGS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "listener.security.protocol.map": (_str, "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"),
    "ssl.keystore.type": (_str, "JKS"),  # kcoord reads PEM keystores only
    "ssl.keystore.location": (_str, ""),
    "ssl.keystore.password": (Password, Password("")),
    "ssl.key.password": (Password, Password("")),
    "ssl.keystore.key": (Password, Password("")),
    "ssl.keystore.certificate.chain": (Password, Password("")),
    "ssl.truststore.type": (_str, "JKS"),
    "ssl.truststore.location": (_str, ""),
    "ssl.truststore.password": (Password, Password("")),
    "ssl.truststore.certificates": (Password, Password("")),
    "ssl.client.auth": (_one_of("none", "requested", "required"), "none"),
    "ssl.enabled.protocols": (_list, ["TLSv1.2", "TLSv1.3"]),
    "ssl.protocol": (_str, "TLSv1.3"),
    "ssl.cipher.suites": (_list, []),
    "ssl.principal.mapping.rules": (_str, "DEFAULT"),
    "sasl.enabled.mechanisms": (_list, ["GSSAPI"]),
    "sasl.server.max.receive.size": (_long, 524288),
    "sasl.jaas.config": (Password, Password("")),  # a client setting: brokers read the listener-prefixed one
    "connections.max.reauth.ms": (_long, 0),
    "connection.failed.authentication.delay.ms": (_long, 100),
    "authorizer.class.name": (_str, ""),
    "super.users": (_str, ""),
    "allow.everyone.if.no.acl.found": (_bool, False),
}

# Whose values are secrets (Kafka's PASSWORD type): never printed.
SENSITIVE = frozenset(n for n, (p, _) in SECURITY_SETTINGS.items() if p is Password)
