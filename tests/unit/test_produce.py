"""Produce handler: offsets, acks, validation errors as Kafka answers them, LogAppendTime,
idempotent producers (duplicates, gaps, epochs, across a restart)."""
from __future__ import annotations

import pytest
from test_produce_helpers import NOW, batch, call, decode_records, make_broker, produce, produce_req

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.handlers import NO_RESPONSE


@pytest.fixture
async def broker(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 2, {})
    yield b
    await b.stop()


def log_of(broker, topic="t", p=0):
    return broker.logs.get(topic, p)


async def test_offsets_are_assigned_across_batches_and_requests(broker):
    r1 = await produce(broker, "t", 0, batch([b"a", b"b", b"c"]))
    r2 = await produce(broker, "t", 0, batch([b"d"]))
    r3 = await produce(broker, "t", 0, batch([b"e", b"f"]))
    assert [r.error_code for r in (r1, r2, r3)] == [0, 0, 0]
    assert [r.base_offset for r in (r1, r2, r3)] == [0, 3, 4]
    assert r3.log_append_time_ms == -1 and r3.log_start_offset == 0
    data = log_of(broker).read(0, 2**20)
    assert [(o, v) for o, _, v in decode_records(data)] == list(enumerate([b"a", b"b", b"c", b"d", b"e", b"f"]))
    assert log_of(broker).log_end_offset == 6
    # the other partition has its own offsets
    assert (await produce(broker, "t", 1, batch([b"x"]))).base_offset == 0


async def test_acks_zero_sends_nothing_and_appends(broker):
    assert await produce(broker, "t", 0, batch([b"a"]), acks=0) is NO_RESPONSE
    assert log_of(broker).log_end_offset == 1


async def test_acks_zero_error_closes_the_connection(broker):
    from kcoord.server.dispatch import CloseConnection

    with pytest.raises(CloseConnection):
        await produce(broker, "nope", 0, batch([b"a"]), acks=0)


async def test_acks_all_leaves_the_flush_to_the_os_by_default(broker):
    # Kafka's flush.messages default (Long.MAX): acknowledged from the page cache
    r = await produce(broker, "t", 0, batch([b"a", b"b"]), acks=-1)
    assert r.error_code == 0 and r.base_offset == 0
    assert log_of(broker).durable_offset == 0 and log_of(broker).sync_count == 0


async def test_invalid_required_acks(broker):
    r = await produce(broker, "t", 0, batch([b"a"]), acks=2)
    assert r.error_code == E.INVALID_REQUIRED_ACKS
    assert log_of(broker).log_end_offset == 0


async def test_unknown_topic_or_partition(broker):
    assert (await produce(broker, "nope", 0, batch([b"a"]))).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await produce(broker, "t", 2, batch([b"a"]))).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.topics.get("nope") is None  # Produce never creates topics


async def test_corrupt_crc(broker):
    data = bytearray(batch([b"hello"]))
    data[-1] ^= 0xFF
    r = await produce(broker, "t", 0, bytes(data))
    assert r.error_code == E.CORRUPT_MESSAGE and r.base_offset == -1
    assert log_of(broker).log_end_offset == 0


async def test_old_magic_and_two_batches_and_nonzero_base_offset_are_invalid_records(broker):
    data = bytearray(batch([b"a"]))
    data[16] = 1
    assert (await produce(broker, "t", 0, bytes(data))).error_code == E.INVALID_RECORD
    two = batch([b"a"]) + batch([b"b"])
    assert (await produce(broker, "t", 0, two)).error_code == E.INVALID_RECORD
    moved = bytearray(batch([b"a"]))
    moved[7] = 5
    assert (await produce(broker, "t", 0, bytes(moved))).error_code == E.INVALID_RECORD
    assert (await produce(broker, "t", 0, b"")).error_code == E.INVALID_RECORD
    assert log_of(broker).log_end_offset == 0


async def test_message_too_large_uses_topic_max_message_bytes(broker):
    broker.create_topic("small", 1, {"max.message.bytes": "200"})
    r = await produce(broker, "small", 0, batch([b"x" * 300]))
    assert r.error_code == E.MESSAGE_TOO_LARGE
    assert (await produce(broker, "small", 0, batch([b"x" * 10]))).error_code == 0


async def test_message_too_large_broker_default(tmp_path):
    b = await make_broker(tmp_path, **{"message.max.bytes": 500})
    try:
        b.create_topic("t", 1, {})
        assert (await produce(b, "t", 0, batch([b"x" * 600]))).error_code == E.MESSAGE_TOO_LARGE
    finally:
        await b.stop()


async def test_internal_topic_refused_like_kafka(broker):
    r = await produce(broker, "__consumer_offsets", 0, batch([b"a"]))
    assert r.error_code == E.INVALID_TOPIC_EXCEPTION
    assert "internal topic" in r.error_message


async def test_transactional_batches_outside_a_transaction_are_refused(broker):
    data = batch([b"a"], pid=1, epoch=0, seq=0, transactional=True)
    r = await produce(broker, "t", 0, data)
    assert r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    # no transaction coordinator yet (no __transaction_state): retriable, as Kafka maps it
    r = await produce(broker, "t", 0, data, transactional_id="tx")
    assert r.error_code == E.NOT_ENOUGH_REPLICAS
    broker.parts.txn.get().ensure_topic()
    r = await produce(broker, "t", 0, data, transactional_id="tx")  # an id the coordinator never saw
    assert r.error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert log_of(broker).log_end_offset == 0


async def test_zstd_needs_v7(broker):
    data = batch([b"a"], compression=4)
    assert (await produce(broker, "t", 0, data, version=6)).error_code == E.UNSUPPORTED_COMPRESSION_TYPE
    assert (await produce(broker, "t", 0, data, version=7)).error_code == 0


async def test_compressed_batch_stored_as_it_arrives(broker):
    data = batch([b"v%d" % i * 50 for i in range(20)], compression=1)  # gzip
    r = await produce(broker, "t", 0, data)
    assert r.error_code == 0
    stored = log_of(broker).read(0, 2**20)
    assert stored[12:16] == b"\x00\x00\x00\x00"  # leader epoch 0 stamped
    assert stored[16:] == data[16:]  # bytes after the patched header fields are untouched
    assert [v for _, _, v in decode_records(stored)] == [b"v%d" % i * 50 for i in range(20)]


async def test_log_append_time_topic(broker):
    broker.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    broker.clock.advance(1234)
    r = await produce(broker, "lat", 0, batch([b"a", b"b"], ts=5))
    assert r.error_code == 0 and r.log_append_time_ms == NOW + 1234
    recs = decode_records(log_of(broker, "lat").read(0, 2**20))
    assert [ts for _, ts, _ in recs] == [NOW + 1234, NOW + 1234]


async def test_log_append_time_broker_default(tmp_path):
    b = await make_broker(tmp_path, **{"log.message.timestamp.type": "LogAppendTime"})
    try:
        b.create_topic("t", 1, {})
        r = await produce(b, "t", 0, batch([b"a"], ts=5))
        assert r.log_append_time_ms == NOW
        b.create_topic("ct", 1, {"message.timestamp.type": "CreateTime"})
        assert (await produce(b, "ct", 0, batch([b"a"], ts=5))).log_append_time_ms == -1
    finally:
        await b.stop()


async def test_compacted_topic_wants_keys(broker):
    broker.create_topic("c", 1, {"cleanup.policy": "compact"})
    r = await produce(broker, "c", 0, batch([b"a", b"b"], keys=[b"k", None]))
    assert r.error_code == E.INVALID_RECORD
    assert [e.batch_index for e in r.record_errors] == [1]
    assert (await produce(broker, "c", 0, batch([b"a"], keys=[b"k"]))).error_code == 0


async def test_compacted_topic_lists_every_keyless_record(broker):
    """KIP-467 as Kafka's LogValidator: each keyless record is named, with its message, so a
    client fails exactly those (librdkafka fails the rest with _INVALID_DIFFERENT_RECORD)."""
    broker.create_topic("c2", 1, {"cleanup.policy": "delete,compact"})
    keys = [None if i % 10 == 0 else b"k%d" % i for i in range(40)]
    r = await produce(broker, "c2", 0, batch([b"v"] * 40, keys=keys))
    assert r.error_code == E.INVALID_RECORD
    assert [e.batch_index for e in r.record_errors] == [0, 10, 20, 30]
    assert {e.batch_index_error_message for e in r.record_errors} == {
        "Compacted topic cannot accept message without key in topic partition c2-0"}
    assert r.error_message.startswith("One or more records have been rejected due to 4 record errors in total, "
                                      "and only showing the first three errors at most: [RecordError(batchIndex=0, ")
    assert r.error_message.count("RecordError(") == 3
    assert broker.logs.get("c2", 0).log_end_offset == 0  # nothing of the batch was appended


async def test_keyless_records_are_fine_on_a_delete_topic(broker):
    assert (await produce(broker, "t", 0, batch([b"a"], keys=[None]))).error_code == 0


async def test_timestamp_bounds_when_configured(broker):
    broker.create_topic("tb", 1, {"message.timestamp.before.max.ms": "1000"})
    r = await produce(broker, "tb", 0, batch([b"a"], ts=NOW - 5000))
    assert r.error_code == E.INVALID_TIMESTAMP and r.record_errors[0].batch_index == 0
    assert r.error_message == "One or more records have been rejected due to invalid timestamp"
    assert r.record_errors[0].batch_index_error_message.startswith(f"Timestamp {NOW - 5000} of message with offset 0")
    assert (await produce(broker, "tb", 0, batch([b"a"], ts=NOW - 10))).error_code == 0


async def test_log_start_offset_reported(broker):
    await produce(broker, "t", 0, batch([b"a"]))
    r = await produce(broker, "t", 0, batch([b"b"]), version=5)
    assert r.log_start_offset == 0 and r.base_offset == 1


async def test_many_partitions_in_one_request(broker):
    from kafka.protocol.producer import ProduceRequest

    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    req = ProduceRequest(version=9, transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        T(name="t", partition_data=[P(index=0, records=batch([b"a"])), P(index=1, records=batch([b"b", b"c"])),
                                    P(index=9, records=batch([b"z"]))]),
        T(name="missing", partition_data=[P(index=0, records=batch([b"a"]))]),
    ])
    resp = await call(broker, ApiKey.PRODUCE, req, 9)
    got = {(t.name, p.index): (p.error_code, p.base_offset) for t in resp.responses for p in t.partition_responses}
    assert got == {("t", 0): (0, 0), ("t", 1): (0, 0), ("t", 9): (E.UNKNOWN_TOPIC_OR_PARTITION, -1),
                   ("missing", 0): (E.UNKNOWN_TOPIC_OR_PARTITION, -1)}


# ------------------------------------------------------------------ idempotence


async def test_duplicate_batch_gets_its_original_offset_and_is_not_appended(broker):
    b0 = batch([b"a", b"b"], pid=3, epoch=0, seq=0)
    b1 = batch([b"c"], pid=3, epoch=0, seq=2)
    await produce(broker, "t", 0, batch([b"other"]))
    r0 = await produce(broker, "t", 0, b0)
    r1 = await produce(broker, "t", 0, b1)
    assert (r0.base_offset, r1.base_offset) == (1, 3)
    again = await produce(broker, "t", 0, b0)
    assert again.error_code == 0 and again.base_offset == 1
    again = await produce(broker, "t", 0, b1, acks=-1)
    assert again.error_code == 0 and again.base_offset == 3
    assert log_of(broker).log_end_offset == 4


async def test_sequence_gap_and_stale_epoch(broker):
    await produce(broker, "t", 0, batch([b"a"], pid=3, epoch=1, seq=0))
    r = await produce(broker, "t", 0, batch([b"b"], pid=3, epoch=1, seq=5))
    assert r.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    r = await produce(broker, "t", 0, batch([b"b"], pid=3, epoch=0, seq=1))
    assert r.error_code == E.INVALID_PRODUCER_EPOCH
    r = await produce(broker, "t", 0, batch([b"b"], pid=3, epoch=2, seq=3))
    assert r.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    r = await produce(broker, "t", 0, batch([b"b"], pid=3, epoch=2, seq=0))
    assert r.error_code == 0 and r.base_offset == 1
    assert log_of(broker).log_end_offset == 2


async def test_sequences_are_per_partition(broker):
    assert (await produce(broker, "t", 0, batch([b"a"], pid=3, epoch=0, seq=0))).error_code == 0
    assert (await produce(broker, "t", 1, batch([b"a"], pid=3, epoch=0, seq=0))).error_code == 0
    assert (await produce(broker, "t", 1, batch([b"a"], pid=3, epoch=0, seq=1))).error_code == 0


async def test_duplicates_are_caught_after_a_restart(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 1, {})
    b0 = batch([b"a", b"b"], pid=11, epoch=0, seq=0)
    await produce(b, "t", 0, b0)
    await produce(b, "t", 0, batch([b"c"], pid=11, epoch=0, seq=2))
    await b.stop()
    b = await make_broker(tmp_path)
    try:
        r = await produce(b, "t", 0, b0)
        assert r.error_code == 0 and r.base_offset == 0
        assert b.logs.get("t", 0).log_end_offset == 3
        r = await produce(b, "t", 0, batch([b"d"], pid=11, epoch=0, seq=4))
        assert r.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert (await produce(b, "t", 0, batch([b"d"], pid=11, epoch=0, seq=3))).base_offset == 3
    finally:
        await b.stop()


async def test_producer_with_a_sequence_but_no_producer_id_field_is_invalid(broker):
    data = batch([b"a"], pid=5, epoch=0, seq=-1)
    assert (await produce(broker, "t", 0, data)).error_code == E.INVALID_RECORD


async def test_request_timeout_for_a_flush_is_request_timed_out(broker, monkeypatch):
    import asyncio

    import kcoord.server.handlers.produce as produce_mod

    async def slow_sync(log, offset):
        await asyncio.sleep(10)

    monkeypatch.setattr(produce_mod, "sync", slow_sync)
    broker.create_topic("f1", 1, {"flush.messages": "1"})
    resp = await call(broker, ApiKey.PRODUCE, produce_req("f1", 0, batch([b"a"]), acks=-1, timeout_ms=50), 9)
    assert resp.responses[0].partition_responses[0].error_code == E.REQUEST_TIMED_OUT
