"""The answer Kafka gives when a request fails as a whole with one error code, built for any
API and version from kafka-python's message schemas (no function per API).

Where the code goes follows Kafka's AbstractRequest.getErrorResponse implementations:

- a response with a top-level error_code carries it there, and its arrays stay empty
  (Heartbeat, JoinGroup, SyncGroup, LeaveGroup, OffsetFetch v2-v7, FindCoordinator v0-v3,
  ListGroups, InitProducerId, OffsetDelete, ApiVersions, Fetch v13+);
- otherwise the response mirrors the request's items (topics, partitions, groups, keys) down
  to the first level whose entries have an error_code, and every entry there carries it
  (OffsetCommit and Produce per partition, Metadata and CreateTopics per topic, DescribeGroups
  and DeleteGroups per group, FindCoordinator v4+ per key, OffsetFetch v8+ per group);
- Fetch before v13 does both: the top-level code and every partition (clients of those
  versions read only the partitions).

An error to ApiVersions is a v0 body whatever the request's version, as Kafka's refusal of
an unknown version is (KIP-511): clients parse an ApiVersions error that way.

Other fields take what Kafka's error answers carry: identities copied from the request
(names, topic ids, partition indexes, group ids, keys), -1 for every number Kafka marks
unknown (offsets, epochs, timestamps, node ids, ports, producer ids, generations), a zero
throttle time, empty strings, null where nullable, empty arrays.
"""
from __future__ import annotations

import uuid
from typing import Any

from kcoord.protocol.api import ApiKey, ApiSpec

# response array field -> the request array it mirrors, when the names differ
_MIRRORS: dict[str, tuple[str, ...]] = {
    "responses": ("topic_data", "topics"),  # Produce, Fetch
    "partition_responses": ("partition_data",),  # Produce
    "partitions": ("partitions", "partition_indexes"),  # Fetch, ListOffsets, OffsetFetch v0-v7
    "coordinators": ("coordinator_keys",),  # FindCoordinator v4+
    "results": ("groups_names", "creations"),  # DeleteGroups, CreateAcls
    "filter_results": ("filters",),  # DeleteAcls
    "replica_election_results": ("topic_partitions",),  # ElectLeaders
    "partition_result": ("partitions",),  # ElectLeaders
    "groups": ("groups", "group_ids"),  # DescribeGroups, OffsetFetch v8+, ConsumerGroupDescribe
    "topics": ("topics",),
}

# identity fields copied from a request item (response name -> request names)
_IDENTITY: dict[str, tuple[str, ...]] = {
    "name": ("name",),
    "topic": ("topic", "name"),
    "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition"),
    "partition_id": (),  # ElectLeaders: the request's partitions are plain ints
    "user": ("name",),
    "index": ("index",),
    "group_id": ("group_id",),
    "key": ("key",),
}

# top-level scalars Kafka echoes from the request (Fetch's session id)
_ECHOED = {ApiKey.FETCH: ("session_id",)}

# APIs whose error answer also fills the items under a top-level code, below a version
_ALSO_ITEMS_BELOW = {ApiKey.FETCH: 13, ApiKey.ELECT_LEADERS: 1 << 15}

# responses with one entry per distinct name across several request arrays (AlterUserScram-
# Credentials: a result per user named in its deletions or upsertions)
_UNION_BY_NAME = {ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ("deletions", "upsertions")}

_ZERO_UUID = uuid.UUID(int=0)


def encode(message: Any, version: int) -> bytes:
    """A request or response object's bytes, decoded ones included (kafka-python's decode
    leaves the header slot unset, which its encode trips on)."""
    if present(message, "_header") is None:
        message._header = None
    return bytes(message.encode(version=version))


def present(obj: Any, attr: str) -> Any:
    """A field's value if the message's version has it, else None (kafka-python answers a
    field outside the version with its default, e.g. OffsetFetch v8's unused group_id "")."""
    try:
        return object.__getattribute__(obj, attr)
    except AttributeError:
        return None


def body_version(key: ApiKey, version: int) -> int:
    """The version an error response to a request of this version is encoded at."""
    return 0 if key == ApiKey.API_VERSIONS else version


def error_response(spec: ApiSpec, version: int, request: Any, code: int, message: str | None = None,
                   at_items: bool = False) -> Any:
    """The response object Kafka would send for `request` failing with `code` (encode it at
    body_version(spec.key, version)). `at_items`: an error of each requested partition (or
    group, topic, key) rather than of the request, as NOT_LEADER_OR_FOLLOWER is: the
    top-level code stays 0 and the entries carry it."""
    version = body_version(spec.key, version)
    top = spec.response._struct
    top_error = _has_error(top, version) and not at_items
    values = _scalars(top, version, None, code, message, at_error_level=top_error)
    for attr in _ECHOED.get(spec.key, ()):
        if attr in values and present(request, attr) is not None:
            values[attr] = present(request, attr)
    mirror = not top_error or version < _ALSO_ITEMS_BELOW.get(spec.key, -1)
    union = _UNION_BY_NAME.get(spec.key)
    for attr, field in _arrays(top, version):
        requested = _request_array(request, attr) if union is None else _union_by_name(request, union)
        values[attr] = _items(field, version, requested, code, message) if mirror else []
    return spec.response(version=version, **values)


def _has_error(struct: Any, version: int) -> bool:
    f = struct.fields.get("error_code")
    return f is not None and f.for_version_q(version) and f._tag is None


def _present(struct: Any, version: int) -> list[tuple[str, Any]]:
    """Fields of this version, tagged ones excepted (left unset, they are not sent)."""
    return [(a, f) for a, f in struct.fields.items() if f.for_version_q(version) and f._tag is None]


def _arrays(struct: Any, version: int) -> list[tuple[str, Any]]:
    return [(a, f) for a, f in _present(struct, version) if f.is_array()]


def _scalars(struct: Any, version: int, item: Any, code: int, message: str | None,
             at_error_level: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for attr, field in _present(struct, version):
        if field.is_array():
            continue
        if field.is_struct():
            values[attr] = None if field.nullable_for_version_q(version) else _struct_value(field, version)
        elif attr == "error_code":
            values[attr] = code if at_error_level else 0
        elif attr == "error_message":
            values[attr] = message if at_error_level else None
        else:
            values[attr] = _identity(attr, item) if item is not None and attr in _IDENTITY else None
            if values[attr] is None:
                values[attr] = _unknown(attr, field, version)
    return values


def _identity(attr: str, item: Any) -> Any:
    if not hasattr(item, "_struct"):  # a request array of plain values (group ids, keys, indexes)
        return item
    for name in _IDENTITY[attr]:
        value = present(item, name)
        if value is not None:
            return value
    return None


def _unknown(attr: str, field: Any, version: int) -> Any:
    """What Kafka's error answers put in a field they say nothing about."""
    t = field._type_str
    if t.startswith("int") or t.startswith("uint"):
        if attr == "throttle_time_ms":
            return 0
        if field._json.get("default") is not None:
            return field.default
        return -1  # unknown offset, epoch, timestamp, node, port, producer id, generation
    if field.nullable_for_version_q(version):
        return None
    if t == "uuid":
        return _ZERO_UUID
    if t == "bool":
        return False
    if t == "float64":
        return 0.0
    if t == "bytes":
        return b""
    return field.default if field._json.get("default") is not None else ""


def _struct_value(field: Any, version: int) -> Any:
    values = _scalars(field, version, None, 0, None, at_error_level=False)
    for attr, _ in _arrays(field, version):
        values[attr] = []
    return field.data_class(**values)


def _request_array(request: Any, response_attr: str) -> list[Any] | None:
    if request is None:
        return None
    for name in _MIRRORS.get(response_attr, (response_attr,)):
        value = present(request, name)
        if isinstance(value, list):
            return value
    return None


def _union_by_name(request: Any, arrays: tuple[str, ...]) -> list[Any] | None:
    if request is None:
        return None
    by_name: dict[str, Any] = {}
    for name in arrays:
        for item in present(request, name) or ():
            by_name.setdefault(item.name, item)
    return list(by_name.values())


def _items(field: Any, version: int, requested: list[Any] | None, code: int, message: str | None) -> list[Any]:
    """One response entry per requested item, the error at the first level that has one."""
    if not field.is_struct_array() or not requested:
        return []
    here = _has_error(field, version)
    out = []
    for item in requested:
        values = _scalars(field, version, item, code, message, at_error_level=here)
        for attr, sub in _arrays(field, version):
            values[attr] = [] if here else _items(sub, version, _request_array(item, attr), code, message)
        out.append(field.data_class(**values))
    return out
