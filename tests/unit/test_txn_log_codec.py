"""__transaction_state records, byte for byte as Kafka's generated TransactionLogKey /
TransactionLogValue serializers lay them out (schemas in Kafka's
transaction-coordinator/src/main/resources/common/message/)."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.protocol.txn_log import (
    TxnCodecError,
    TxnKey,
    TxnRecord,
    TxnValue,
    decode_txn_key,
    decode_txn_record,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)

T_UPDATE, T_START = 1_700_000_000_123, 1_700_000_000_000
ONGOING = TxnValue(producer_id=1000, producer_epoch=5, timeout_ms=60000, state=1, partitions={"out": [0, 1]},
                   last_update_ms=T_UPDATE, start_ms=T_START)


def test_key_v0() -> None:
    assert encode_txn_key(TxnKey("tx")) == bytes.fromhex("0000" "0002" "7478")
    assert decode_txn_key(bytes.fromhex("000000027478")) == TxnKey("tx")
    assert encode_txn_key(TxnKey("é")) == b"\x00\x00\x00\x02\xc3\xa9"  # length in UTF-8 bytes


def test_value_v0_layout() -> None:
    want = (bytes.fromhex("0000" "00000000000003e8" "0005" "0000ea60" "01")
            + bytes.fromhex("00000001" "0003") + b"out" + bytes.fromhex("00000002" "00000000" "00000001")
            + struct.pack(">qq", T_UPDATE, T_START))
    assert encode_txn_value(ONGOING, version=0) == want
    assert decode_txn_value(want) == ONGOING


def test_value_v1_layout_with_tagged_fields() -> None:
    v = TxnValue(**{**_fields(ONGOING), "previous_producer_id": 999, "client_transaction_version": 2})
    want = (bytes.fromhex("0001" "00000000000003e8" "0005" "0000ea60" "01")
            + bytes.fromhex("02" "04") + b"out" + bytes.fromhex("03" "00000000" "00000001" "00")
            + struct.pack(">qq", T_UPDATE, T_START)
            + bytes.fromhex("02" "00" "08" "00000000000003e7" "02" "02" "0002"))
    assert encode_txn_value(v) == want
    assert decode_txn_value(want) == v


def test_defaults_are_not_written_as_tags() -> None:
    b = encode_txn_value(ONGOING)
    assert b.endswith(struct.pack(">qq", T_UPDATE, T_START) + b"\x00")  # no tagged fields
    nxt = TxnValue(**{**_fields(ONGOING), "next_producer_id": 7})
    assert encode_txn_value(nxt).endswith(bytes.fromhex("01" "01" "08" "0000000000000007"))


def test_empty_writes_null_partitions() -> None:
    empty = TxnValue(producer_id=1, producer_epoch=0, timeout_ms=1000, state=0, last_update_ms=5, start_ms=-1)
    v0 = encode_txn_value(empty, version=0)
    assert v0[17:21] == b"\xff\xff\xff\xff"  # a null array
    v1 = encode_txn_value(empty)
    assert v1[17:18] == b"\x00"  # a null compact array
    assert decode_txn_value(v0) == decode_txn_value(v1) == empty


def test_partitions_are_grouped_by_topic_and_sorted() -> None:
    v = TxnValue(**{**_fields(ONGOING), "partitions": {"b": [3, 1], "a": [2]}})
    back = decode_txn_value(encode_txn_value(v))
    assert back is not None and list(back.partitions.items()) == [("a", [2]), ("b", [1, 3])]


def test_last_producer_epoch_is_memory_only() -> None:
    v = TxnValue(**{**_fields(ONGOING), "last_producer_epoch": 4})
    back = decode_txn_value(encode_txn_value(v))
    assert back == v and back is not None and back.last_producer_epoch == -1


def test_tombstone_and_records() -> None:
    assert encode_txn_value(None) is None
    key = encode_txn_key(TxnKey("x"))
    assert decode_txn_record(key, None) == TxnRecord(TxnKey("x"), None)
    assert decode_txn_record(key, encode_txn_value(ONGOING)) == TxnRecord(TxnKey("x"), ONGOING)


def test_unknown_key_versions_are_skipped() -> None:
    assert decode_txn_key(b"\x00\x01\x00\x01x") is None
    assert decode_txn_record(b"\x00\x05\x00\x01x", b"whatever") is None


_V1 = encode_txn_value(ONGOING)


@pytest.mark.parametrize("bad", [
    b"",
    b"\x00",
    b"\x00\x02" + _V1[2:],  # an unknown value version
    encode_txn_value(ONGOING, version=0)[:-1],  # truncated
    _V1 + b"\x00",  # trailing bytes
    _V1[:18] + b"\x09" + _V1[19:],  # a state id that does not exist
    _V1[:19] + b"\x80\x80\x80\x80\x80\x01",  # a varint longer than 5 bytes
])
def test_malformed_values_raise(bad: bytes) -> None:
    with pytest.raises(TxnCodecError):
        decode_txn_value(bad)


@pytest.mark.parametrize("bad", [b"", b"\x00", b"\x00\x00\x00\x05ab", b"\x00\x00\x00\x01ab", b"\x00\x00\x00\x01\xff"])
def test_malformed_keys_raise(bad: bytes) -> None:
    with pytest.raises(TxnCodecError):
        decode_txn_key(bad)


def test_a_record_without_key_raises() -> None:
    with pytest.raises(TxnCodecError):
        decode_txn_record(None, b"")


_ids = st.integers(-1, 2**63 - 1)
_values = st.builds(
    TxnValue,
    producer_id=_ids,
    producer_epoch=st.integers(-1, 2**15 - 1),
    timeout_ms=st.integers(0, 2**31 - 1),
    state=st.integers(1, 7),
    partitions=st.dictionaries(st.text(min_size=1, max_size=20),
                               st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=5, unique=True).map(sorted),
                               max_size=4),
    last_update_ms=st.integers(-1, 2**62),
    start_ms=st.integers(-1, 2**62),
    previous_producer_id=_ids,
    next_producer_id=_ids,
    client_transaction_version=st.integers(0, 2),
)


@given(_values, st.sampled_from([0, 1]))
def test_roundtrip(v: TxnValue, version: int) -> None:
    back = decode_txn_value(encode_txn_value(v, version=version))
    if version == 0:  # v0 has no tagged fields
        v = TxnValue(**{**_fields(v), "previous_producer_id": -1, "next_producer_id": -1,
                        "client_transaction_version": 0})
    assert back == v


def _fields(v: TxnValue) -> dict:
    return {name: getattr(v, name) for name in TxnValue.__slots__}
