"""Idempotent producer state (server/producers.py): sequences, epochs, duplicates, ids."""
from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.producers import (
    INT32_MAX,
    PartitionProducerState,
    ProducerIdManager,
    ProducerStates,
    decrement_sequence,
    in_sequence,
    increment_sequence,
)
from kcoord.storage.batch import split_batches
from kcoord.storage.log import PartitionLog


def header(pid: int, epoch: int, seq: int, count: int = 1, ts: int = 1000):
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=2**31 - 1)
    for i in range(count):
        b.append(i, ts, b"k", b"v", [])
    buf = b.build()
    return split_batches(buf)[0], buf


def test_sequence_arithmetic_wraps_at_int32_max():
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert decrement_sequence(8, 3) == 5
    assert in_sequence(INT32_MAX, 0)
    assert in_sequence(4, 5)
    assert not in_sequence(4, 6)
    assert not in_sequence(INT32_MAX, 1)


def test_in_order_batches_are_accepted_and_recorded():
    st = PartitionProducerState("t", 0)
    h, _ = header(7, 0, 0, count=3)
    assert st.check(h) is None
    st.update(h, 10)
    h2, _ = header(7, 0, 3, count=2)
    assert st.check(h2) is None
    st.update(h2, 13)
    e = st.entries[7]
    assert e.last_seq == 4 and e.last_data_offset == 14


def test_duplicate_of_any_of_the_last_five_batches_returns_its_offsets():
    st = PartitionProducerState("t", 0)
    seq, off = 0, 0
    for _ in range(6):
        h, _ = header(7, 0, seq, count=2)
        st.update(h, off)
        seq, off = seq + 2, off + 2
    # batch 0 (seq 0-1) fell out of the 5 retained; batches 1..5 are remembered
    for i in range(1, 6):
        h, _ = header(7, 0, 2 * i, count=2)
        dup = st.check(h)
        assert dup is not None and dup.first_offset == 2 * i and dup.last_offset == 2 * i + 1
    h, _ = header(7, 0, 0, count=2)
    with pytest.raises(KafkaError) as e:
        st.check(h)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_is_out_of_order():
    st = PartitionProducerState("t", 0)
    h, _ = header(7, 0, 0)
    st.update(h, 0)
    h, _ = header(7, 0, 2)
    with pytest.raises(KafkaError) as e:
        st.check(h)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_stale_epoch_is_fenced_and_new_epoch_must_start_at_zero():
    st = PartitionProducerState("t", 0)
    h, _ = header(7, 3, 0)
    st.update(h, 0)
    h, _ = header(7, 2, 1)
    with pytest.raises(KafkaError) as e:
        st.check(h)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    h, _ = header(7, 4, 5)
    with pytest.raises(KafkaError) as e:
        st.check(h)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    h, _ = header(7, 4, 0)
    assert st.check(h) is None


def test_unknown_producer_accepts_any_sequence_like_kafka():
    st = PartitionProducerState("t", 0)
    h, _ = header(99, 0, 42)
    assert st.check(h) is None


def test_wraparound_sequence():
    st = PartitionProducerState("t", 0)
    h, _ = header(7, 0, INT32_MAX - 1, count=2)  # seqs MAX-1, MAX
    assert st.check(h) is None
    st.update(h, 0)
    h2, _ = header(7, 0, 0, count=2)
    assert st.check(h2) is None
    st.update(h2, 2)
    # a batch that itself wraps: MAX-1 .. 0
    st3 = PartitionProducerState("t", 0)
    h3, _ = header(8, 0, INT32_MAX - 1, count=3)
    st3.update(h3, 0)
    assert st3.entries[8].last_seq == 0
    dup = st3.check(h3)
    assert dup is not None and dup.first_seq == INT32_MAX - 1
    h4, _ = header(8, 0, 1)
    assert st3.check(h4) is None


def test_state_is_rebuilt_from_the_log(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    now = 1_700_000_000_000
    for seq in (0, 2, 4):
        _, buf = header(5, 1, seq, count=2, ts=now)
        plog.append_batches(buf)
    _, buf = header(-1, -1, -1, ts=now)
    plog.append_batches(buf)
    plog.close()
    plog = PartitionLog(str(tmp_path / "t-0"))
    ids = ProducerIdManager(tmp_path)
    states = ProducerStates(ids)
    st = states.get("t", 0, plog, now)
    h, _ = header(5, 1, 2, count=2)
    dup = st.check(h)
    assert dup is not None and (dup.first_offset, dup.last_offset) == (2, 3)
    h, _ = header(5, 1, 6)
    assert st.check(h) is None
    assert ids.next_id == 6  # never hands out an id found in the logs
    # expired producers are not loaded
    st2 = PartitionProducerState("t", 0)
    st2.load(plog, now + 2 * 86_400_000)
    assert not st2.entries
    plog.close()


def test_evict_before_log_start():
    st = PartitionProducerState("t", 0)
    h, _ = header(1, 0, 0)
    st.update(h, 5)
    h, _ = header(2, 0, 0)
    st.update(h, 20)
    assert st.evict_before(10) == 1
    assert set(st.entries) == {2}


def test_producer_ids_are_never_reused_across_restarts(tmp_path):
    m = ProducerIdManager(tmp_path, block_size=10)
    got = [m.generate() for _ in range(3)]
    assert got == [0, 1, 2]
    m2 = ProducerIdManager(tmp_path, block_size=10)  # "restart": the rest of the block is skipped
    assert m2.generate() == 10
    for _ in range(10):
        m2.generate()
    m3 = ProducerIdManager(tmp_path, block_size=10)
    assert m3.generate() == 30


def test_init_producer_bumps_the_epoch_of_a_known_producer(tmp_path):
    m = ProducerIdManager(tmp_path)
    pid, epoch = m.init_producer(-1, -1)
    assert epoch == 0
    assert m.init_producer(pid, 0) == (pid, 1)
    assert m.init_producer(pid, 1) == (pid, 2)
    # a stale epoch, an id we never issued, or an exhausted epoch: a fresh id
    other, e = m.init_producer(pid, 0)
    assert other != pid and e == 0
    new, e = m.init_producer(12345, 3)
    assert new not in (pid, other, 12345) and e == 0
    m.epochs[new] = 32766  # Short.MAX - 1: no room to bump
    last, e = m.init_producer(new, 32766)
    assert last != new and e == 0


# ------------------------------------------------------------------ InitProducerId handler


async def test_init_producer_id_handler(tmp_path):
    from kafka.protocol.producer import InitProducerIdRequest
    from test_produce_helpers import call, make_broker, settle

    from kcoord.protocol.api import ApiKey

    def req(version, tid=None, pid=-1, epoch=-1):
        return InitProducerIdRequest(version=version, transactional_id=tid, transaction_timeout_ms=60000,
                                     producer_id=pid, producer_epoch=epoch)

    b = await make_broker(tmp_path)
    try:
        r0 = await call(b, ApiKey.INIT_PRODUCER_ID, req(0), 0)
        r1 = await call(b, ApiKey.INIT_PRODUCER_ID, req(2), 2)
        assert (r0.error_code, r0.producer_epoch) == (0, 0) and r1.producer_id == r0.producer_id + 1
        bumped = await call(b, ApiKey.INIT_PRODUCER_ID, req(4, pid=r1.producer_id, epoch=0), 4)
        assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, r1.producer_id, 1)
        bad = await call(b, ApiKey.INIT_PRODUCER_ID, req(5, pid=r1.producer_id, epoch=-1), 5)
        assert bad.error_code == ErrorCode.INVALID_REQUEST
        # a transactional id goes to the transaction coordinator, from the same id blocks
        tx = await settle(await call(b, ApiKey.INIT_PRODUCER_ID, req(5, tid="my-tx"), 5))
        assert (tx.error_code, tx.producer_epoch) == (0, 0) and tx.producer_id > r1.producer_id
        empty = await call(b, ApiKey.INIT_PRODUCER_ID, req(1, tid=""), 1)
        assert empty.error_code == ErrorCode.INVALID_REQUEST
    finally:
        await b.stop()
    b = await make_broker(tmp_path)  # restart: the next id is past the persisted block
    try:
        r = await call(b, ApiKey.INIT_PRODUCER_ID, req(0), 0)
        assert r.producer_id > r1.producer_id
    finally:
        await b.stop()
