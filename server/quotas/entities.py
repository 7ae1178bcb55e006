"""Quota entities and keys, validated as Kafka's controller does (ClientQuotaControlManager for
AlterClientQuotas, ClientQuotasImage.describe for DescribeClientQuotas filters).

An entity is a tuple of (entity type, entity name) pairs sorted by type; a name of None is the
type's default (`<default>` in kafka-configs). Pure functions: no I/O.
"""
from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from kcoord.protocol.errors import ErrorCode

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1

# key -> Kafka's ConfigDef type (QuotaConfig.userAndClientQuotaConfigs / ipConfigs)
USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG", REQUEST_PERCENTAGE: "DOUBLE",
                    CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_KEYS = {CONNECTION_CREATION_RATE: "INT"}

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, "str | None"], ...]


class QuotaError(ValueError):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def entity_text(entity: Iterable[tuple[str, str | None]]) -> str:
    """As Kafka's ClientQuotaEntity.toString: ClientQuotaEntity(entries={user=alice})."""
    inner = ", ".join(f"{t}={n}" for t, n in entity)
    return f"ClientQuotaEntity(entries={{{inner}}})"


def validate_entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity of an AlterClientQuotas entry, or QuotaError (INVALID_REQUEST)."""
    # Kafka reads the entry's entity into a map first (AlterClientQuotasRequest.entries): a
    # type named twice keeps its last name
    seen = dict(pairs)
    for etype, name in seen.items():
        if etype not in ENTITY_TYPES:
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {etype}")
        if name is not None and name == "":
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Empty {etype} not supported")
    if not seen:
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    return tuple(sorted(seen.items()))


def keys_for(entity: Entity) -> dict[str, str]:
    """The quota keys the entity's combination of types accepts, or QuotaError."""
    types = dict(entity)
    if IP in types:
        if USER in types or CLIENT_ID in types:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity should"
                             "not be combined with User or ClientId")
        if not _valid_ip_entity(types[IP]):
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"{types[IP]} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_CLIENT_KEYS


def _valid_ip_entity(name: str | None) -> bool:
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


def validate_value(keys: dict[str, str], key: str, value: float) -> None:
    ctype = keys.get(key)
    if ctype is None:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not value > 0.0:  # NaN too
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if ctype == "DOUBLE":
        return
    if ctype == "INT" and value > INT_MAX:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for an INT.")
    if ctype == "LONG" and value > LONG_MAX:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for a LONG.")
    if abs(value % 1.0) > 1e-6:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")


class Filter:
    """A DescribeClientQuotas filter: exact names (None: the default) and types that must be
    present, strict or not."""

    __slots__ = ("exact", "specified", "strict")

    def __init__(self, components: Iterable[tuple[str, int, str | None]], strict: bool) -> None:
        self.exact: dict[str, str | None] = {}
        self.specified: set[str] = set()
        self.strict = strict
        for etype, match_type, match in components:
            if etype == "":
                raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
            if etype in self.exact or etype in self.specified:
                raise QuotaError(ErrorCode.INVALID_REQUEST,
                                 f"Entity type {etype} cannot appear more than once in the filter.")
            if etype not in ENTITY_TYPES:
                raise QuotaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {etype}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaError(ErrorCode.INVALID_REQUEST,
                                     "Request specified MATCH_TYPE_EXACT, but set match string to null.")
                self.exact[etype] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise QuotaError(ErrorCode.INVALID_REQUEST,
                                     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                self.exact[etype] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise QuotaError(ErrorCode.INVALID_REQUEST,
                                     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                self.specified.add(etype)
            else:
                raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
        named = set(self.exact) | self.specified
        if IP in named and (USER in named or CLIENT_ID in named):
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                             "component should not be used with user or clientId filter component.")

    def matches(self, entity: Entity) -> bool:
        types = dict(entity)
        if self.strict and len(types) != len(self.exact) + len(self.specified):
            return False
        for etype, name in self.exact.items():
            if etype not in types or types[etype] != name:
                return False
        return all(etype in types for etype in self.specified)
