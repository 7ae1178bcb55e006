"""The hand-written Produce and Fetch response encoders (protocol/data_fastpath.py) write the
same bytes as kafka-python's generic classes, on every version kcoord serves."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceResponse

from kcoord.protocol.data_fastpath import encode_fetch_response, encode_produce_response

PT = ProduceResponse.TopicProduceResponse
PP = PT.PartitionProduceResponse
RE = PP.BatchIndexAndErrorMessage
FT = FetchResponse.FetchableTopicResponse
FP = FT.PartitionData
AB = FP.AbortedTransaction

PRODUCE = [
    ("t", [(0, 0, 5, -1, 0, [], None), (3, 87, -1, -1, -1, [(0, "no key"), (2, None)], "records rejected")]),
    ("\u00e9t\u00e9-" + "x" * 200, [(1, 0, 2**40, 1700000000000, 7, [], None)]),
    ("empty", []),
]


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_response_bytes_match_kafka_python(version):
    reference = ProduceResponse(version=version, throttle_time_ms=0, responses=[
        PT(name=name, partition_responses=[
            PP(index=i, error_code=e, base_offset=b, log_append_time_ms=t, log_start_offset=s,
               record_errors=[RE(batch_index=bi, batch_index_error_message=m) for bi, m in errs], error_message=msg)
            for i, e, b, t, s, errs, msg in parts])
        for name, parts in PRODUCE])
    assert encode_produce_response(version, PRODUCE) == bytes(reference.encode(version=version))


@pytest.mark.parametrize("version", range(4, 18))
@pytest.mark.parametrize("error_code", [0, 70])
def test_fetch_response_bytes_match_kafka_python(version, error_code):
    records = bytes(range(256)) * 3
    tid = uuid.UUID("0123456789abcdef0123456789abcdef")
    topics = [
        (tid if version >= 13 else "t", [(0, 0, 10, 10, 0, None, records), (1, 1, -1, -1, -1, None, b""),
                                         (2, 0, 9, 4, 0, [(1000, 4), (1001, 6)], records[:100]),
                                         (3, 0, 9, 4, 0, [], None)]),
        (uuid.uuid4() if version >= 13 else "u" * 300, []),
    ]
    reference = FetchResponse(version=version, throttle_time_ms=0, error_code=error_code, session_id=0, responses=[
        FT(partitions=[
            FP(partition_index=i, error_code=e, high_watermark=hw, last_stable_offset=lso, log_start_offset=ls,
               aborted_transactions=None if ab is None else [AB(producer_id=p, first_offset=f) for p, f in ab],
               preferred_read_replica=-1, records=rec)
            for i, e, hw, lso, ls, ab, rec in parts], **({"topic_id": t} if version >= 13 else {"topic": t}))
        for t, parts in topics])
    assert encode_fetch_response(version, error_code, 0, topics) == bytes(reference.encode(version=version))


def test_a_fetch_topic_without_an_id_is_answered_with_the_zero_uuid():
    """A Fetch v13+ whose topic id decoded as null (fuzzed input) is echoed as kafka-python
    encodes a null uuid: 16 zero bytes, not an internal error."""
    from kafka.protocol.consumer import FetchResponse

    from kcoord.protocol.data_fastpath import encode_fetch_response

    body = encode_fetch_response(13, 0, 0, [(None, [(0, 3, -1, -1, -1, None, b"")])])
    resp = FetchResponse.decode(body, version=13)
    assert resp.responses[0].topic_id is None  # kafka-python reads the zero uuid back as null
    assert body[11:27] == bytes(16)  # after throttle, error, session id and the topics count
    assert resp.responses[0].partitions[0].error_code == 3
