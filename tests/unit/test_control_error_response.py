"""protocol/error_response.py: for every API and version kcoord serves, an injected
error is answered where Kafka's getErrorResponse puts it (top level, per topic, per partition,
per group, per key), the requested items mirrored, unknown numbers -1, and the response
encodes and decodes at that version."""
from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.error_response import body_version, error_response
from kcoord.protocol.errors import ErrorCode

CODE = ErrorCode.NOT_COORDINATOR
TOPIC_ID = uuid.uuid4()


def sample(field: Any, version: int, depth: int = 0) -> dict[str, Any]:
    """A request body with every field of this version set, and two items in every array."""
    out = {}
    for attr, f in field.fields.items():
        if not f.for_version_q(version):
            continue
        t = f._type_str
        if f.is_struct_array():
            out[attr] = [f.data_class(**sample(f, version, depth + 1)) for _ in range(2)]
            for i, item in enumerate(out[attr]):  # distinct identities
                for key in ("name", "topic", "group_id", "key"):
                    if getattr(item, key, None) is not None and key in item._struct.fields:
                        setattr(item, key, f"{key}-{depth}-{i}")
                for key in ("partition_index", "partition", "index"):
                    if key in item._struct.fields and f.fields[key].for_version_q(version):
                        setattr(item, key, 10 * depth + i)
        elif f.is_struct():
            out[attr] = f.data_class(**sample(f, version, depth + 1))
        elif f.is_array():
            out[attr] = ["g-0", "g-1"] if "string" in t else [7, 8]
        elif t == "string":
            out[attr] = f"{attr}-s"
        elif t == "uuid":
            out[attr] = TOPIC_ID
        elif t == "bool":
            out[attr] = False
        elif t in ("bytes", "records"):
            out[attr] = b""
        elif t == "float64":
            out[attr] = 0.0
        else:
            out[attr] = 1
    return out


def requests() -> list[tuple[ApiKey, int]]:
    return [(key, v) for key, spec in sorted(API_TABLE.items()) for v in range(spec.min_version, spec.max_version + 1)]


def build(key: ApiKey, v: int) -> Any:
    spec = API_TABLE[key]
    values = sample(spec.request._struct, v)
    if key == ApiKey.FIND_COORDINATOR:
        values["key_type"] = 0
    if key == ApiKey.PRODUCE:
        values["acks"] = 1
    req = spec.request(version=v, **values)
    return spec.request.decode(req.encode(version=v), version=v)


def roundtrip(key: ApiKey, v: int) -> tuple[Any, Any]:
    spec = API_TABLE[key]
    req = build(key, v)
    resp = error_response(spec, v, req, CODE, "injected")
    body = bytes(resp.encode(version=body_version(key, v)))
    again = spec.response.decode(body, version=v)
    return req, again


@pytest.mark.parametrize(("key", "version"), requests(), ids=lambda x: str(x))
def test_every_api_and_version_encodes_and_decodes(key, version):
    _, resp = roundtrip(key, version)
    assert resp is not None


def codes(resp: Any, path: str) -> list[int]:
    """error_code values at a dotted path of arrays, e.g. 'topics.partitions'."""
    level = [resp]
    for part in path.split(".") if path else []:
        level = [x for item in level for x in getattr(item, part)]
    return [x.error_code for x in level]


# (API, versions) -> (where the code is, arrays left empty): Kafka's getErrorResponse
WHERE = [
    (ApiKey.PRODUCE, range(3, 12), "responses.partition_responses", []),
    (ApiKey.FETCH, range(4, 7), "responses.partitions", []),
    (ApiKey.LIST_OFFSETS, range(0, 10), "topics.partitions", []),
    (ApiKey.METADATA, range(0, 13), "topics", ["brokers"]),
    (ApiKey.OFFSET_COMMIT, range(0, 10), "topics.partitions", []),
    (ApiKey.OFFSET_FETCH, range(0, 2), "topics.partitions", []),
    (ApiKey.OFFSET_FETCH, range(2, 8), "", ["topics"]),
    (ApiKey.OFFSET_FETCH, range(8, 10), "groups", []),
    (ApiKey.FIND_COORDINATOR, range(0, 4), "", []),
    (ApiKey.FIND_COORDINATOR, range(4, 7), "coordinators", []),
    (ApiKey.JOIN_GROUP, range(0, 10), "", ["members"]),
    (ApiKey.HEARTBEAT, range(0, 5), "", []),
    (ApiKey.LEAVE_GROUP, range(0, 6), "", []),
    (ApiKey.SYNC_GROUP, range(0, 6), "", []),
    (ApiKey.DESCRIBE_GROUPS, range(0, 6), "groups", []),
    (ApiKey.LIST_GROUPS, range(0, 6), "", ["groups"]),
    (ApiKey.API_VERSIONS, range(0, 5), "", ["api_keys"]),
    (ApiKey.CREATE_TOPICS, range(0, 8), "topics", []),
    (ApiKey.INIT_PRODUCER_ID, range(0, 6), "", []),
    (ApiKey.DELETE_GROUPS, range(0, 3), "results", []),
    (ApiKey.OFFSET_DELETE, range(0, 1), "", ["topics"]),
]


@pytest.mark.parametrize(("key", "versions", "path", "empty"), WHERE, ids=lambda x: str(x))
def test_the_error_sits_where_kafka_puts_it(key, versions, path, empty):
    for v in versions:
        req, resp = roundtrip(key, v)
        got = codes(resp, path)
        assert got and set(got) == {CODE}, (key, v, path, got)
        for attr in empty:
            assert not getattr(resp, attr), (key, v, attr)
        if path:  # only the error level carries it: the top, if it has a code, is clean
            top = getattr(resp, "error_code", 0) if "error_code" in resp._struct.fields \
                and resp._struct.fields["error_code"].for_version_q(v) else 0
            assert top == 0, (key, v)


def test_fetch_answers_at_the_top_and_per_partition_below_v13_and_only_at_the_top_from_v13():
    for v in range(7, 13):
        _, resp = roundtrip(ApiKey.FETCH, v)
        assert resp.error_code == CODE and set(codes(resp, "responses.partitions")) == {CODE}
        assert [t.topic for t in resp.responses] == ["topic-0-0", "topic-0-1"]
        assert [p.partition_index for p in resp.responses[0].partitions] == [10, 11]
        assert {p.high_watermark for p in resp.responses[0].partitions} == {-1}
    for v in range(13, 18):
        req, resp = roundtrip(ApiKey.FETCH, v)
        assert resp.error_code == CODE and resp.responses == []
        assert resp.session_id == req.session_id  # echoed, as Kafka does


def test_items_mirror_the_request_and_unknown_numbers_are_minus_one():
    req, resp = roundtrip(ApiKey.OFFSET_COMMIT, 9)
    assert [t.name for t in resp.topics] == [t.name for t in req.topics]
    assert [p.partition_index for p in resp.topics[1].partitions] == [p.partition_index for p in req.topics[1].partitions]
    _, resp = roundtrip(ApiKey.PRODUCE, 11)
    part = resp.responses[0].partition_responses[0]
    assert (part.base_offset, part.log_append_time_ms, part.log_start_offset) == (-1, -1, -1)
    assert part.error_message == "injected"
    _, resp = roundtrip(ApiKey.OFFSET_FETCH, 1)  # partition indexes (plain ints) become entries
    assert [p.partition_index for p in resp.topics[0].partitions] == [7, 8]
    assert {p.committed_offset for p in resp.topics[0].partitions} == {-1}
    _, resp = roundtrip(ApiKey.FIND_COORDINATOR, 4)  # keys (plain strings) become entries
    assert [(c.key, c.node_id, c.port, c.host) for c in resp.coordinators] == [("g-0", -1, -1, ""), ("g-1", -1, -1, "")]
    _, resp = roundtrip(ApiKey.JOIN_GROUP, 9)
    assert (resp.generation_id, resp.member_id, resp.leader) == (-1, "", "")
    _, resp = roundtrip(ApiKey.INIT_PRODUCER_ID, 5)
    assert (resp.producer_id, resp.producer_epoch) == (-1, -1)
    _, resp = roundtrip(ApiKey.DELETE_GROUPS, 2)
    assert [r.group_id for r in resp.results] == ["g-0", "g-1"]


@pytest.mark.parametrize(("key", "array", "per_item"), [
    (ApiKey.CREATE_ACLS, "results", 2),  # one result per creation
    (ApiKey.DELETE_ACLS, "filter_results", 2),  # one per filter
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "results", 2),  # one per user named (deletions and upsertions)
    (ApiKey.ELECT_LEADERS, "replica_election_results", 2),  # one per topic, each partition inside
])
def test_arrays_without_a_top_level_home_mirror_the_request(key, array, per_item):
    spec = API_TABLE[key]
    for v in range(spec.min_version, spec.max_version + 1):
        req, resp = roundtrip(key, v)
        items = getattr(resp, array)
        assert len(items) == per_item, (key, v)
        if key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
            # the sample names the same two users in deletions and upsertions: one result each
            assert sorted(r.user for r in items) == sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
            assert all(r.error_code == CODE for r in items)
        if key == ApiKey.ELECT_LEADERS:
            assert [t.topic for t in items] == [t.topic for t in req.topic_partitions]
            assert [[p.partition_id for p in t.partition_result] for t in items] == [list(t.partitions) for t in req.topic_partitions]
            assert all(p.error_code == CODE for t in items for p in t.partition_result)
