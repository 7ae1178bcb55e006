"""kcoord.storage.batch, and a hand-checked byte fixture of one __consumer_offsets batch on disk."""
from __future__ import annotations

import os
import struct

import pytest

from kcoord.protocol.coordinator_codec import decode_record, encode_key, encode_value
from kcoord.protocol.coordinator_records import OffsetKey, OffsetValue
from kcoord.storage.batch import (
    HEADER_SIZE,
    CorruptBatchError,
    build_batch,
    client_batch_problem,
    crc_ok,
    iter_batch_records,
    parse_header,
    set_base_offset,
    set_leader_epoch,
    set_log_append_time,
    split_batches,
)
from kcoord.storage.log import PartitionLog


def crc32c_bitwise(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time: slow but
    obviously the textbook algorithm, independent of aiokafka's C implementation."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def test_crc32c_reference_check_value():
    # The standard check value of CRC-32C over "123456789".
    assert crc32c_bitwise(b"123456789") == 0xE3069283


# ---------------------------------------------------------------------------------------
# One OffsetCommit record: group "g", topic "t", partition 0, offset 42, metadata "",
# commitTimestamp 1700000000000 (0x0000018BCFE56800), leaderEpoch -1, written at log
# offset 0 by append_records with CreateTime 1700000000000. Every byte is spelled out.

KEY_BYTES = bytes.fromhex(
    "0001"          # OffsetCommitKey version 1
    "0001" "67"     # group: int16 length 1, "g"
    "0001" "74"     # topic: int16 length 1, "t"
    "00000000"      # partition 0
)  # 12 bytes
VALUE_BYTES = bytes.fromhex(
    "0003"              # OffsetCommitValue version 3
    "000000000000002a"  # offset 42
    "ffffffff"          # leaderEpoch -1
    "0000"              # metadata: int16 length 0
    "0000018bcfe56800"  # commitTimestamp 1700000000000
)  # 24 bytes
RECORD_BYTES = bytes.fromhex(
    "54"    # record length varint: 42 bytes follow -> zigzag 84 = 0x54
    "00"    # record attributes (unused)
    "00"    # timestampDelta varlong 0
    "00"    # offsetDelta varint 0
    "18"    # key length varint 12 -> zigzag 24
) + KEY_BYTES + bytes.fromhex(
    "30"    # value length varint 24 -> zigzag 48
) + VALUE_BYTES + bytes.fromhex(
    "00"    # headers count varint 0
)  # 1 + 42 = 43 bytes
CRC_COVERED = bytes.fromhex(
    "0000"              # attributes: no compression, CreateTime, not transactional
    "00000000"          # lastOffsetDelta 0
    "0000018bcfe56800"  # baseTimestamp
    "0000018bcfe56800"  # maxTimestamp
    "ffffffffffffffff"  # producerId -1
    "ffff"              # producerEpoch -1
    "ffffffff"          # baseSequence -1
    "00000001"          # records count 1
) + RECORD_BYTES
EXPECTED_CRC = 0xE43B34A3  # crc32c_bitwise(CRC_COVERED); asserted below
EXPECTED_BATCH = bytes.fromhex(
    "0000000000000000"  # baseOffset 0
    "0000005c"          # batchLength 92 = 104 total - 12 (baseOffset + batchLength)
    "00000000"          # partitionLeaderEpoch 0 (the log's default leader epoch)
    "02"                # magic 2
    "e43b34a3"          # CRC32C of everything from attributes on
) + CRC_COVERED


def test_fixture_is_self_consistent():
    assert len(RECORD_BYTES) == 43
    assert len(EXPECTED_BATCH) == HEADER_SIZE + 43 == 104
    assert crc32c_bitwise(CRC_COVERED) == EXPECTED_CRC


def test_append_records_writes_exactly_the_fixture(tmp_path):
    key = encode_key(OffsetKey("g", "t", 0))
    value = encode_value(OffsetValue(offset=42, metadata="", commit_timestamp=1700000000000,
                                     leader_epoch=-1))
    assert key == KEY_BYTES and value == VALUE_BYTES
    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"))
    assert log.append_records([(key, value)], 1700000000000) == (0, 0)
    log.close()
    on_disk = (tmp_path / "__consumer_offsets-0" / "00000000000000000000.log").read_bytes()
    assert on_disk == EXPECTED_BATCH


def test_fixture_reads_back():
    [h] = split_batches(EXPECTED_BATCH)
    assert crc_ok(EXPECTED_BATCH, h)
    [(offset, ts, k, v)] = list(iter_batch_records(EXPECTED_BATCH))
    assert (offset, ts) == (0, 1700000000000)
    rec = decode_record(k, v)
    assert rec.key == OffsetKey("g", "t", 0) and rec.value.offset == 42


# --------------------------------------------------------------------------------------- helpers


def three_records() -> bytearray:
    return build_batch([(b"k0", b"v0", 1000), (b"k1", None, 1005), (None, b"v2", 1002)])


def test_parse_header_fields():
    buf = three_records()
    h = parse_header(buf)
    assert (h.base_offset, h.magic, h.last_offset_delta, h.record_count) == (0, 2, 2, 3)
    assert (h.base_timestamp, h.max_timestamp) == (1000, 1005)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert h.partition_leader_epoch == -1
    assert h.size == len(buf) and h.next_offset == 3 and h.last_offset == 2
    assert not h.is_log_append_time and not h.is_control and not h.is_transactional
    assert h.compression == 0
    assert client_batch_problem(h) is None


def test_build_batch_records_round_trip():
    assert list(iter_batch_records(bytes(three_records()))) == [
        (0, 1000, b"k0", b"v0"), (1, 1005, b"k1", None), (2, 1002, None, b"v2")]


def test_split_several_batches_and_patch_offsets():
    a, b = three_records(), build_batch([(b"x", b"y", 7)])
    buf = bytearray(a + b)
    hs = split_batches(buf)
    assert [h.position for h in hs] == [0, len(a)]
    set_base_offset(buf, hs[0], 100)
    set_base_offset(buf, hs[1], 103)
    set_leader_epoch(buf, hs[1], 5)
    # The CRC does not cover baseOffset and partitionLeaderEpoch.
    assert all(crc_ok(buf, h) for h in split_batches(buf))
    again = split_batches(buf)
    assert [(h.base_offset, h.partition_leader_epoch) for h in again] == [(100, -1), (103, 5)]
    assert [r[0] for r in iter_batch_records(bytes(buf[len(a):]))] == [103]


def test_log_append_time_recomputes_crc():
    buf = three_records()
    h = parse_header(buf)
    set_log_append_time(buf, h, 5555)
    h2 = parse_header(buf)
    assert h2.is_log_append_time and h2.max_timestamp == 5555 and h2.base_timestamp == 1000
    assert crc_ok(buf, h2)
    assert crc32c_bitwise(bytes(buf[21:])) == h2.crc
    # Consumers see every record at the append time.
    assert [r[1] for r in iter_batch_records(bytes(buf))] == [5555, 5555, 5555]


def test_crc_detects_a_flipped_byte():
    buf = three_records()
    buf[-3] ^= 0x40
    assert not crc_ok(buf, parse_header(buf))


@pytest.mark.parametrize("mutate", [
    lambda b: b[:30],                                   # short header
    lambda b: b[:-1],                                   # short batch
    lambda b: b + b"\x00" * 5,                          # trailing bytes
    lambda b: b[:16] + b"\x01" + b[17:],                # magic 1
    lambda b: b[:8] + struct.pack(">i", 10) + b[12:],  # absurd length
    lambda b: b"",                                      # nothing
])
def test_split_rejects_malformed(mutate):
    with pytest.raises(CorruptBatchError):
        split_batches(mutate(bytes(three_records())))


def test_client_batch_problems():
    buf = three_records()
    struct.pack_into(">i", buf, 57, 2)  # record count no longer matches lastOffsetDelta
    assert "does not match" in client_batch_problem(parse_header(buf))
    buf = three_records()
    struct.pack_into(">h", buf, 21, 0x20)  # control bit
    assert "control" in client_batch_problem(parse_header(buf))
    buf = three_records()
    struct.pack_into(">q", buf, 43, 77)  # producer id without a sequence
    assert "sequence" in client_batch_problem(parse_header(buf))


def test_compressed_batches_iterate():
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(2, 1, 0, -1, -1, -1, 2**31 - 1)  # gzip
    for i in range(50):
        b.append(i, 1000 + i, b"k%d" % i, os.urandom(8), [])
    buf = b.build()
    h = parse_header(buf)
    assert h.compression == 1 and crc_ok(buf, h)
    assert [r[0] for r in iter_batch_records(bytes(buf))] == list(range(50))
