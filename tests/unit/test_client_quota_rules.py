"""Client quotas without a server: Kafka's validation of alterations and filters, the sampled
rate and throttle time, ClientQuotaManager's precedence, the throttle field in answers."""
from __future__ import annotations

import pytest
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse
from kafka.protocol.producer.produce import ProduceResponse

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.server.config import Config
from kcoord.server.quotas import store
from kcoord.server.quotas.entities import Filter, QuotaError
from kcoord.server.quotas.gate import throttle_slot, with_throttle
from kcoord.server.quotas.manager import QuotaManager, _resolve
from kcoord.server.quotas.rate import Rate


def test_alter_makes_records_only_for_changes_and_validate_errors_per_entry():
    state: store.Quotas = {}
    records, results = store.alter(state, [([("client-id", "c")], [("producer_byte_rate", 10.0)])])
    assert [r["key"] for r in records] == ["producer_byte_rate"] and results[0][1] == ErrorCode.NONE
    for r in records:
        store.replay(state, r)
    # the same value again: nothing to write; a removal of a key that is not set: nothing either
    records, results = store.alter(state, [([("client-id", "c")], [("producer_byte_rate", 10.0),
                                                                   ("consumer_byte_rate", None)])])
    assert records == [] and results[0][1] == ErrorCode.NONE
    records, results = store.alter(state, [
        ([("client-id", "c")], [("producer_byte_rate", None)]),
        ([("user", "u")], [("request_percentage", -1.0)]),
    ])
    assert [r.get("remove") for r in records] == [True]
    assert [(code, msg) for _, code, msg in results] == [
        (ErrorCode.NONE, None), (ErrorCode.INVALID_REQUEST, "Quota request_percentage must be greater than 0")]
    for r in records:
        store.replay(state, r)
    assert state == {}


def test_a_type_named_twice_in_one_entity_keeps_its_last_name_as_kafka_reads_it():
    records, results = store.alter({}, [([("user", "a"), ("user", "b")], [("producer_byte_rate", 5.0)])])
    assert results[0][1] == ErrorCode.NONE
    assert records[0]["entity"] == [["user", "b"]]


def test_snapshot_replays_to_the_same_state():
    state: store.Quotas = {}
    for r in store.alter(state, [([("user", None), ("client-id", "x")], [("consumer_byte_rate", 3.0)]),
                                 ([("ip", "10.0.0.1")], [("connection_creation_rate", 7.0)])])[0]:
        store.replay(state, r)
    again: store.Quotas = {}
    for r in store.snapshot(state):
        store.replay(again, r)
    assert again == state


@pytest.mark.parametrize(("strict", "components", "expected"), [
    (False, [], 5),
    (True, [], 0),
    (False, [("user", 0, "u")], 2),
    (True, [("user", 0, "u")], 1),
    (False, [("user", 1, None)], 2),
    (False, [("user", 2, None)], 4),
    (True, [("user", 2, None), ("client-id", 2, None)], 2),
    (False, [("client-id", 0, "c"), ("user", 1, None)], 1),
])
def test_filter_matches_as_kafkas_image(strict, components, expected):
    entities = [(("user", "u"),), (("client-id", "c"), ("user", "u")), (("user", None),),
                (("client-id", "c"), ("user", None)), (("ip", None),)]
    flt = Filter(components, strict)
    assert sum(flt.matches(e) for e in entities) == expected


def test_filter_on_an_unknown_entity_type_is_unsupported_version():
    with pytest.raises(QuotaError) as e:
        Filter([("topic", 0, "t")], False)
    assert e.value.code == ErrorCode.UNSUPPORTED_VERSION


def test_rate_counts_at_least_samples_minus_one_windows_and_throttles_as_kafka():
    r = Rate(11, 1000)
    r.record(1000, 0)
    assert r.measure(0) == pytest.approx(100.0)  # 1000 bytes over the 10 s minimum
    assert r.throttle_ms(100.0, 0) == 0
    r.record(1000, 500)
    # 2000 bytes over 0.5 s counted as 10.5 s: (190.5 - 100) / 100 * 10500 ms
    assert r.throttle_ms(100.0, 500) == 9500
    # a new window opens a window after the first; one whose last value is 11 s old no
    # longer counts (the first, last written at 500 ms), and the span starts at the oldest left
    r.record(10, 1500)
    assert r.measure(1500) == pytest.approx(2010 / 10.5)
    assert r.measure(11_600) == pytest.approx(10 / 10.1)


def test_rate_keeps_one_window_more_than_the_samples():
    r = Rate(2, 1000)
    for t in (0, 1000, 2000, 3000):
        r.record(1, t)
    assert len(r.starts) == 3


def _bounds(*entities):
    return {tuple(sorted(e)): float(i + 1) for i, e in enumerate(entities)}


U_C, U_DC, U = [("user", "u"), ("client-id", "c")], [("user", "u"), ("client-id", None)], [("user", "u")]
DU_C, DU_DC, DU = [("user", None), ("client-id", "c")], [("user", None), ("client-id", None)], [("user", None)]
C, DC = [("client-id", "c")], [("client-id", None)]


@pytest.mark.parametrize(("entities", "expected"), [
    # each row: the quotas defined -> (metric tags, bound) for user u, client c (bound = position + 1)
    ([U_C, U_DC, U, DU_C, DU_DC, DU, C, DC], (("u", "c"), 1.0)),
    ([U_DC, U, DU_C, DU_DC, DU, C, DC], (("u", "c"), 1.0)),
    ([U, DU_C, DU_DC, DU, C, DC], (("u", ""), 1.0)),
    ([DU_C, DU_DC, DU, C, DC], (("u", "c"), 1.0)),
    ([DU_DC, DU, C, DC], (("u", "c"), 1.0)),
    ([DU, C, DC], (("u", ""), 1.0)),
    ([C, DC], (("", "c"), 1.0)),
    ([DC], (("", "c"), 1.0)),
    ([[("user", "other")]], None),
])
def test_precedence_is_client_quota_managers(entities, expected):
    assert _resolve(_bounds(*entities), "u", "c") == expected


def test_manager_is_active_only_with_a_user_or_client_quota(tmp_path):
    import asyncio

    m = QuotaManager(Config({"log.dirs": str(tmp_path)}), tmp_path)
    seen = []
    m.watch(seen.append)

    async def run():
        await m.alter([([("ip", None)], [("connection_creation_rate", 5.0)])], False)
        await m.alter([([("client-id", "c")], [("producer_byte_rate", 5.0)])], True)  # validate only
        await m.alter([([("client-id", "c")], [("producer_byte_rate", 5.0)])], False)
        await m.alter([([("client-id", "c")], [("producer_byte_rate", None)])], False)
    asyncio.run(run())
    assert seen == [False, True, False]
    assert (tmp_path / store.QUOTAS_FILE).exists()


def test_throttle_time_goes_where_each_answer_carries_it():
    assert throttle_slot(ApiKey.METADATA, 12) == 0
    assert throttle_slot(ApiKey.METADATA, 0) is None
    assert throttle_slot(ApiKey.PRODUCE, 9) == -1  # after the responses
    body = bytes(MetadataResponse(version=12, throttle_time_ms=0, brokers=[], cluster_id="x", controller_id=1,
                                  topics=[]).encode(version=12))
    framed = (len(body) + 5).to_bytes(4, "big") + b"\x00\x00\x00\x07\x00" + body
    out = with_throttle(framed, ApiKey.METADATA, 12, 1234)
    assert MetadataResponse.decode(out[9:], version=12).throttle_time_ms == 1234
    for version in (3, 9):
        body = bytes(ProduceResponse(version=version, responses=[], throttle_time_ms=0).encode(version=version))
        tail = b"\x00" if version >= 9 else b""
        framed = (len(body) + 4 + len(tail)).to_bytes(4, "big") + b"\x00\x00\x00\x07" + tail + body
        out = with_throttle(framed, ApiKey.PRODUCE, version, 77)
        assert int.from_bytes(out[:4], "big") == len(out) - 4
        assert ProduceResponse.decode(out[8 + len(tail):], version=version).throttle_time_ms == 77
    body = bytes(ApiVersionsResponse(version=3, error_code=0, api_keys=[], throttle_time_ms=0).encode(version=3))
    framed = (len(body) + 4).to_bytes(4, "big") + b"\x00\x00\x00\x07" + body
    assert ApiVersionsResponse.decode(with_throttle(framed, ApiKey.API_VERSIONS, 3, 5)[8:],
                                      version=3).throttle_time_ms == 5


def test_token_bucket_starts_full_and_refills_at_the_rate():
    from kcoord.server.quotas.mutation import TokenBucket

    b = TokenBucket()
    assert b.measure(2.0, 22.0, 1000) == 22.0
    b.record(30, 2.0, 22.0, 1000)
    assert b.tokens == -8.0
    assert b.measure(2.0, 22.0, 3000) == pytest.approx(-4.0)
    assert b.measure(2.0, 22.0, 100_000) == 22.0  # never above the burst


def test_idle_measures_are_forgotten_after_an_hour(tmp_path):
    import asyncio

    from kcoord.server.quotas import manager

    now = [0]
    m = QuotaManager(Config({"log.dirs": str(tmp_path)}), tmp_path, clock_ms=lambda: now[0])
    asyncio.run(m.alter([([("client-id", None)], [("producer_byte_rate", 1e6)])], False))
    for i in range(manager.PRUNE_AT):
        m.record("producer_byte_rate", "ANONYMOUS", f"c{i}", 10, now[0])
    now[0] = manager.INACTIVE_MS + 1
    m.record("producer_byte_rate", "ANONYMOUS", "fresh", 10, now[0])  # one more: the idle ones go
    assert [tags for _, tags in m.usage] == [("", "fresh")]
