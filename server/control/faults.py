"""The faults a test injects, as data: which requests each applies to, and what it does.

A Match names the requests: an API, and optionally a group id, a client id, a topic or a
connection. A request's group ids and topics are read generically from its decoded body (any
group_id, the group names of DescribeGroups / DeleteGroups, FindCoordinator's group keys; any
topic name or topic id in its topic arrays), so a filter means the same for every API.

ErrorRule answers the next `count` matching requests with an error code (-1: every one until
removed); LatencyRule delays matching requests (a broker's round trip); StallRule stops
reading the connections of a client id.
"""
from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.error_response import present
from kcoord.protocol.errors import ErrorCode

_ids = itertools.count(1)

# request fields that hold group ids (plain strings or lists of them)
_GROUP_FIELDS = ("group_id", "groups_names", "group_ids")
_TOPIC_ARRAYS = ("topics", "topic_data")
_API_BY_NAME = {spec.name.lower(): key for key, spec in API_TABLE.items()}


class BadRule(ValueError):
    """A rule the control API refuses (HTTP 400); the message says why."""


def api_key(value: Any) -> ApiKey:
    """An API by Kafka's name (OffsetCommit, case-insensitive) or key (8)."""
    if isinstance(value, bool):
        raise BadRule(f"not an API: {value!r}")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip("-").isdigit()):
        key = int(value)
        if key not in API_TABLE:
            raise BadRule(f"API key {key} is not served (served: {sorted(int(k) for k in API_TABLE)})")
        return ApiKey(key)
    if isinstance(value, str) and value.strip().lower().replace("_", "") in _API_BY_NAME:
        return _API_BY_NAME[value.strip().lower().replace("_", "")]
    if isinstance(value, str) and value.strip().upper() in ApiKey.__members__:
        return ApiKey[value.strip().upper()]
    names = ", ".join(sorted(spec.name for spec in API_TABLE.values()))
    raise BadRule(f"unknown API {value!r} (one of {names}, or its key)")


def error_code(value: Any) -> ErrorCode:
    """An error by Kafka's name (NOT_COORDINATOR) or code (16); NONE is not an error."""
    code: ErrorCode | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        code = ErrorCode(value) if value in ErrorCode._value2member_map_ else None
    elif isinstance(value, str):
        text = value.strip().upper()
        if text.lstrip("-").isdigit():
            code = ErrorCode(int(text)) if int(text) in ErrorCode._value2member_map_ else None
        else:
            code = ErrorCode.__members__.get(text)
    if code is None or code == ErrorCode.NONE:
        raise BadRule(f"unknown error code {value!r} (Kafka's name, e.g. NOT_COORDINATOR, or its number)")
    return code


@dataclass(slots=True)
class Facts:
    """What rules filter on, about one request; the body's parts are read on demand."""

    api: ApiKey
    version: int
    client_id: str | None
    connection: int
    request: Any  # decoded request, or None when it was not needed (or did not decode)
    topic_names: Callable[[uuid.UUID], str | None]
    _groups: frozenset[str] | None = None
    _topics: frozenset[str] | None = None

    @property
    def groups(self) -> frozenset[str]:
        if self._groups is None:
            self._groups = frozenset(request_groups(self.api, self.request)) if self.request is not None \
                else frozenset()
        return self._groups

    @property
    def topics(self) -> frozenset[str]:
        if self._topics is None:
            self._topics = frozenset(request_topics(self.request, self.topic_names)) if self.request is not None \
                else frozenset()
        return self._topics


@dataclass(slots=True)
class Match:
    api: ApiKey | None = None
    group_id: str | None = None
    client_id: str | None = None
    topic: str | None = None
    connection: int | None = None

    @property
    def needs_body(self) -> bool:
        return self.group_id is not None or self.topic is not None

    def matches(self, f: Facts) -> bool:
        return ((self.api is None or self.api == f.api)
                and (self.client_id is None or self.client_id == f.client_id)
                and (self.connection is None or self.connection == f.connection)
                and (self.group_id is None or self.group_id in f.groups)
                and (self.topic is None or self.topic in f.topics))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"api": API_TABLE[self.api].name if self.api is not None else None}
        for k in ("group_id", "client_id", "topic", "connection"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out


def parse_match(body: dict[str, Any], api_required: bool) -> Match:
    api = body.get("api")
    if api is None and api_required:
        raise BadRule("'api' is required (e.g. \"OffsetCommit\")")
    m = Match(api=api_key(api) if api is not None else None)
    for k in ("group_id", "client_id", "topic"):
        v = body.get(k)
        if v is not None and not isinstance(v, str):
            raise BadRule(f"'{k}' must be a string")
        setattr(m, k, v)
    conn = body.get("connection")
    if conn is not None and (isinstance(conn, bool) or not isinstance(conn, int)):
        raise BadRule("'connection' must be a connection id (GET /connections lists them)")
    m.connection = conn
    return m


@dataclass(slots=True)
class ErrorRule:
    match: Match
    code: ErrorCode
    count: int  # requests still to answer with the error; -1: until removed
    message: str | None = None
    id: int = field(default_factory=lambda: next(_ids))
    answered: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "error", **self.match.to_json(), "error": self.code.name,
                "error_code": int(self.code), "count": self.count, "answered": self.answered,
                "message": self.message}


@dataclass(slots=True)
class LatencyRule:
    match: Match
    ms: int
    id: int = field(default_factory=lambda: next(_ids))
    delayed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "latency", **self.match.to_json(), "ms": self.ms, "delayed": self.delayed}


@dataclass(slots=True)
class StallRule:
    client_id: str
    id: int = field(default_factory=lambda: next(_ids))

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "stall", "client_id": self.client_id}


def parse_count(body: dict[str, Any]) -> int:
    count = body.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count == 0 or count < -1:
        raise BadRule("'count' must be a positive number of requests, or -1 for every one until removed")
    return count


# ---------------------------------------------------------------- a request's groups and topics


def request_groups(api: ApiKey, request: Any) -> Iterator[str]:
    if api == ApiKey.FIND_COORDINATOR:
        if (present(request, "key_type") or 0) != 0:  # a transactional id, not a group
            return
        if present(request, "key"):
            yield request.key
        yield from present(request, "coordinator_keys") or ()
        return
    if api == ApiKey.DESCRIBE_GROUPS:
        yield from request.groups or ()
        return
    yield from _walk_groups(request)


def _walk_groups(obj: Any) -> Iterator[str]:
    for attr in _GROUP_FIELDS:
        value = present(obj, attr)
        if isinstance(value, str):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, str))
    groups = present(obj, "groups")  # OffsetFetch v8+
    if isinstance(groups, list):
        for g in groups:
            if hasattr(g, "_struct"):
                yield from _walk_groups(g)


def request_topics(request: Any, topic_names: Callable[[uuid.UUID], str | None]) -> Iterator[str]:
    for attr in _TOPIC_ARRAYS:
        items = present(request, attr)
        if not isinstance(items, list):
            continue
        for t in items:
            if isinstance(t, str):
                yield t
                continue
            name = present(t, "name") or present(t, "topic")
            if not name and present(t, "topic_id") is not None:
                name = topic_names(t.topic_id)
            if name:
                yield name
    groups = present(request, "groups")  # OffsetFetch v8+: topics inside each group
    if isinstance(groups, list):
        for g in groups:
            if hasattr(g, "_struct"):
                yield from request_topics(g, topic_names)
