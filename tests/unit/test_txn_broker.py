"""Transactions through the real handlers of an in-process broker with real logs: produce,
offsets and markers, read_committed, fencing, bad input, and a crash after each persisted step
of a transaction's end (the broker stopped mid-way and started again on the same files)."""
from __future__ import annotations

import asyncio

import pytest
from test_produce_helpers import make_broker
from txn_client import TxnClient

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.txn.state import TxnState
from kcoord.storage.segment import scan_batches
from kcoord.storage.transactions import control_type
from kcoord.storage.txn_index import read_entries, txn_index_path

G = "group"


async def boot(tmp_path, **overrides):
    b = await make_broker(tmp_path, offsets_topic_num_partitions=2, transaction_state_log_num_partitions=2,
                          **overrides)
    b.start_background()
    await asyncio.wait_for(b._background[0], 20)
    if b.topics.get("t") is None:
        b.create_topic("t", 2, {})
        b.create_topic("in", 1, {})
    return b


async def loaded(b) -> None:
    for _ in range(2000):
        if not b.parts.txn.get().coordinator.is_loading():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("__transaction_state did not load")


async def until(cond, what: str) -> None:
    for _ in range(2000):
        if cond():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(what)


def values(data: bytes) -> list[bytes | None]:
    """The values of the data records in fetched bytes (markers carry none)."""
    from kcoord.storage.batch import iter_batch_records, split_batches

    if not data:
        return []
    return [v for h in split_batches(data) for _, _, _, v in
            iter_batch_records(memoryview(data)[h.position:h.position + h.size])]


def markers(b, topic: str, p: int) -> list[tuple[int, int, int]]:
    """(offset, producer id, type) of every control batch of a partition."""
    plog = b.logs.get(topic, p)
    return [(h.base_offset, h.producer_id, control_type(body)) for seg in plog.segments
            for h, body in scan_batches(seg.fd, 0, seg.size) if h.is_control]


@pytest.fixture
async def broker(tmp_path):
    b = await boot(tmp_path)
    yield b
    await b.stop()


async def begin(c: TxnClient, tid: str = "tx") -> tuple[int, int]:
    assert (await c.find(tid)).error_code == 0
    r = await c.init(tid)
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


async def test_commit_makes_records_and_offsets_visible(broker):
    c = TxnClient(broker)
    pid, epoch = await begin(c)
    assert await c.add("tx", pid, epoch, {"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}
    assert (await c.produce("tx", "t", 0, [b"a", b"b"], pid, epoch)).error_code == 0
    assert (await c.produce("tx", "t", 1, [b"c"], pid, epoch)).error_code == 0
    p = await c.fetch("t", 0)
    assert (p.high_watermark, p.last_stable_offset, p.records) == (2, 0, b"")  # nothing committed yet
    assert (await c.fetch("t", 0, isolation=0)).last_stable_offset == 0
    assert await c.add_offsets("tx", pid, epoch, G) == 0
    assert await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 42}) == {("in", 0): 0}
    assert await c.offsets(G, {"in": [0]}) == {("in", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    assert await c.offsets(G, {"in": [0]}, require_stable=False) == {("in", 0): (-1, 0)}
    r = await c.end("tx", pid, epoch, commit=True)
    assert r.error_code == 0
    assert await c.offsets(G, {"in": [0]}) == {("in", 0): (42, 0)}
    p = await c.fetch("t", 0)
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (3, 3, [])
    assert values(p.records) == [b"a", b"b"]
    assert [m[1:] for m in markers(broker, "t", 0)] == [(pid, 1)]
    gp = broker.parts.coordinator.get().partition_of(G)
    assert [m[1:] for m in markers(broker, OFFSETS_TOPIC, gp)] == [(pid, 1)]
    assert broker.parts.txn.get().coordinator.get("tx").state is TxnState.COMPLETE_COMMIT


async def test_abort_discards_offsets_and_indexes_the_aborted_transaction(broker):
    c = TxnClient(broker)
    pid, epoch = await begin(c)
    await c.add("tx", pid, epoch, {"t": [0]})
    await c.produce("tx", "t", 0, [b"x", b"y"], pid, epoch)
    await c.add_offsets("tx", pid, epoch, G)
    await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 7})
    assert (await c.end("tx", pid, epoch, commit=False)).error_code == 0
    assert await c.offsets(G, {"in": [0]}) == {("in", 0): (-1, 0)}
    p = await c.fetch("t", 0)
    assert p.last_stable_offset == 3
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
    plog = broker.logs.get("t", 0)
    entries = read_entries(txn_index_path(plog.path, 0))
    assert [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries] == [(pid, 0, 2, 3)]
    # the next transaction of the same producer commits normally; a read from its offset on
    # reports no aborted transaction
    await c.add("tx", pid, epoch, {"t": [0]})
    await c.produce("tx", "t", 0, [b"z"], pid, epoch)
    await c.end("tx", pid, epoch, commit=True)
    p = await c.fetch("t", 0, offset=3)
    assert p.aborted_transactions == [] and values(p.records) == [b"z"]
    p = await c.fetch("t", 0, offset=0, isolation=0)
    assert p.aborted_transactions is None


async def test_lso_stops_at_the_oldest_open_transaction(broker):
    c = TxnClient(broker)
    a_pid, a_epoch = await begin(c, "a")
    b_pid, b_epoch = await begin(c, "b")
    await c.add("a", a_pid, a_epoch, {"t": [0]})
    await c.add("b", b_pid, b_epoch, {"t": [0]})
    await c.produce("a", "t", 0, [b"a1"], a_pid, a_epoch)
    await c.produce("b", "t", 0, [b"b1"], b_pid, b_epoch)
    await c.produce(None, "t", 0, [b"plain"], -1, -1, transactional=False)
    assert (await c.fetch("t", 0)).last_stable_offset == 0
    await c.end("b", b_pid, b_epoch, commit=True)
    assert (await c.fetch("t", 0)).last_stable_offset == 0  # a is still open
    await c.end("a", a_pid, a_epoch, commit=False)
    p = await c.fetch("t", 0)
    assert p.last_stable_offset == 5
    assert [(x.producer_id, x.first_offset) for x in p.aborted_transactions] == [(a_pid, 0)]


async def test_transactional_produce_must_be_verified(broker):
    c = TxnClient(broker)
    pid, epoch = await begin(c)
    # not added to the transaction: INVALID_TXN_STATE before Produce v11, TRANSACTION_ABORTABLE from v11
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch, version=9)).error_code == E.INVALID_TXN_STATE
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch, version=11)).error_code == E.TRANSACTION_ABORTABLE
    await c.add("tx", pid, epoch, {"t": [0]})
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch + 1)).error_code == E.INVALID_PRODUCER_EPOCH
    assert (await c.produce("other", "t", 0, [b"a"], pid, epoch)).error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch)).error_code == 0
    # a non-transactional write of a producer with an open transaction
    r = await c.produce(None, "t", 0, [b"b"], pid, epoch, transactional=False)
    assert r.error_code == E.INVALID_TXN_STATE
    assert broker.logs.get("t", 0).log_end_offset == 1


async def test_zombie_is_fenced_everywhere(broker):
    c = TxnClient(broker)
    pid, epoch = await begin(c)
    await c.add("tx", pid, epoch, {"t": [0]})
    await c.produce("tx", "t", 0, [b"zombie"], pid, epoch)
    # a new instance: its InitProducerId aborts the open transaction (retry until complete)
    r = await c.init("tx")
    assert r.error_code == E.CONCURRENT_TRANSACTIONS
    await until(lambda: broker.parts.txn.get().coordinator.get("tx").state is TxnState.COMPLETE_ABORT, "abort completed")
    r = await c.init("tx")
    # the fence aborted with epoch + 2 (transaction.version 2, Kafka 4's default), then + 1
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 3)
    assert (await c.produce("tx", "t", 0, [b"late"], pid, epoch)).error_code == E.INVALID_PRODUCER_EPOCH
    assert await c.add("tx", pid, epoch, {"t": [1]}) == {("t", 1): E.PRODUCER_FENCED}
    assert await c.add("tx", pid, epoch, {"t": [1]}, version=1) == {("t", 1): E.INVALID_PRODUCER_EPOCH}
    assert (await c.end("tx", pid, epoch, commit=True)).error_code == E.PRODUCER_FENCED
    assert (await c.init("tx", pid=pid, epoch=epoch)).error_code == E.PRODUCER_FENCED
    assert (await c.init("tx", pid=pid, epoch=epoch, version=3)).error_code == E.INVALID_PRODUCER_EPOCH
    assert await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 1}) == {("in", 0): E.INVALID_PRODUCER_EPOCH}
    p = await c.fetch("t", 0)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]


async def test_bad_input(broker):
    c = TxnClient(broker)
    pid, epoch = await begin(c)
    assert (await c.init("tx", timeout=0)).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert (await c.init("tx", timeout=900_001)).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert (await c.init("")).error_code == E.INVALID_REQUEST
    assert await c.add("tx", pid, epoch, {"nope": [0], "t": [0]}) == {
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 0): E.OPERATION_NOT_ATTEMPTED}
    assert await c.add("tx", pid, epoch, {"t": [9]}) == {("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert await c.add("tx", pid, epoch, {OFFSETS_TOPIC: [0]}) == {(OFFSETS_TOPIC, 0): E.TOPIC_AUTHORIZATION_FAILED}
    assert await c.add("nobody", pid, epoch, {"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert await c.add("tx", pid + 1, epoch, {"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert await c.add_offsets("nobody", pid, epoch, G) == E.INVALID_PRODUCER_ID_MAPPING
    assert (await c.end("tx", pid, epoch, commit=True)).error_code == E.INVALID_TXN_STATE  # Empty
    assert (await c.end("nobody", pid, epoch, commit=True)).error_code == E.INVALID_PRODUCER_ID_MAPPING
    # offsets before AddOffsetsToTxn: the offsets partition is not in the transaction
    assert await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 1}) == {("in", 0): E.INVALID_TXN_STATE}
    assert await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 1}, version=4) == {
        ("in", 0): E.TRANSACTION_ABORTABLE}
    assert await c.commit_offsets("tx", pid, epoch, G, {("gone", 0): 1}) == {("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert await c.commit_offsets("tx", pid, epoch, "", {("in", 0): 1}) == {("in", 0): E.INVALID_GROUP_ID}
    await c.add_offsets("tx", pid, epoch, G)
    assert await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 1}, generation=3, member_id="m") == {
        ("in", 0): E.ILLEGAL_GENERATION}
    assert broker.logs.get("t", 0).log_end_offset == 0
    assert await c.offsets(G, {"in": [0]}) == {("in", 0): (-1, 0)}


# ---------------------------------------------------------------- crashes


async def _crash_test(tmp_path, commit: bool, written: int | None) -> None:
    """Stop the broker after PrepareX and `written` markers (None: after CompleteX too)."""
    b = await boot(tmp_path)
    c = TxnClient(b)
    pid, epoch = await begin(c)
    await c.add("tx", pid, epoch, {"t": [0, 1]})
    await c.produce("tx", "t", 0, [b"a"], pid, epoch)
    await c.produce("tx", "t", 1, [b"b"], pid, epoch)
    await c.add_offsets("tx", pid, epoch, G)
    await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 9})
    gp = b.parts.coordinator.get().partition_of(G)
    if written is not None:
        real = b.parts.txn.get().markers.write_markers
        all_parts = sorted([("t", 0), ("t", 1), (OFFSETS_TOPIC, gp)])

        async def crash_mid_way(job):
            from dataclasses import replace
            await real(replace(job, partitions=frozenset(all_parts[:written])))
            await asyncio.Event().wait()  # the crash: nothing after this runs

        b.parts.txn.get().markers.write_markers = crash_mid_way
        pending = asyncio.ensure_future(c.end("tx", pid, epoch, commit=commit))
        await until(lambda: b.parts.txn.get().coordinator.get("tx").state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT),
                    "prepared")
        await asyncio.sleep(0.05)
        pending.cancel()
    else:
        assert (await c.end("tx", pid, epoch, commit=commit)).error_code == 0
    await b.stop()

    b = await boot(tmp_path)
    try:
        await loaded(b)
        await until(lambda: b.parts.txn.get().coordinator.get("tx").state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT),
                    "recovery completes the transaction")
        want = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        assert b.parts.txn.get().coordinator.get("tx").state is want
        c = TxnClient(b)
        for p in (0, 1):
            kinds = {m[2] for m in markers(b, "t", p)}
            assert kinds == {1 if commit else 0}
            got = await c.fetch("t", p)
            assert got.last_stable_offset == b.logs.get("t", p).log_end_offset
            if commit:
                assert got.aborted_transactions == [] and len(values(got.records)) == 1
            else:
                # a marker written again by the recovery adds an empty aborted transaction, as in Kafka
                assert {a.producer_id for a in got.aborted_transactions} == {pid}
                assert got.aborted_transactions[0].first_offset == 0
        assert await c.offsets(G, {"in": [0]}) == {("in", 0): (9 if commit else -1, 0)}
        # the producer carries on after the restart
        r = await c.init("tx", pid=pid, epoch=epoch)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    finally:
        await b.stop()


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
@pytest.mark.parametrize("written", [0, 1, 2, 3, None], ids=["prepared", "1-marker", "2-markers", "all-markers",
                                                             "complete"])
async def test_crash_after_each_persisted_step(tmp_path, commit, written):
    await _crash_test(tmp_path, commit, written)


async def test_open_transactional_offsets_survive_a_restart(tmp_path):
    b = await boot(tmp_path)
    c = TxnClient(b)
    pid, epoch = await begin(c)
    await c.add_offsets("tx", pid, epoch, G)
    await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 5})
    await b.stop()
    b = await boot(tmp_path)
    try:
        await loaded(b)
        c = TxnClient(b)
        assert await c.offsets(G, {"in": [0]}) == {("in", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
        assert (await c.end("tx", pid, epoch, commit=True)).error_code == 0
        assert await c.offsets(G, {"in": [0]}) == {("in", 0): (5, 0)}
    finally:
        await b.stop()


async def test_describe_list_and_describe_producers(broker):
    c = TxnClient(broker)
    assert (await c.list()).error_code == E.COORDINATOR_NOT_AVAILABLE  # no __transaction_state yet
    pid, epoch = await begin(c, "a")
    await begin(c, "b")
    await c.add("a", pid, epoch, {"t": [1, 0]})
    await c.produce("a", "t", 0, [b"x", b"y"], pid, epoch)
    d = await c.describe("a", "b", "nope", "")
    a = d["a"]
    assert (a.error_code, a.transaction_state, a.producer_id, a.producer_epoch, a.transaction_timeout_ms) == (
        0, "Ongoing", pid, epoch, 60000)
    assert a.transaction_start_time_ms == broker.clock.now_ms()
    assert [(t.topic, t.partitions) for t in a.topics] == [("t", [0, 1])]
    assert (d["b"].error_code, d["b"].transaction_state, d["b"].topics) == (0, "Empty", [])
    assert d["nope"].error_code == E.TRANSACTIONAL_ID_NOT_FOUND and d[""].error_code == E.INVALID_REQUEST
    r = await c.list()
    assert r.error_code == 0 and sorted((s.transactional_id, s.transaction_state) for s in r.transaction_states) == [
        ("a", "Ongoing"), ("b", "Empty")]
    r = await c.list(states=["Ongoing", "Nope"])
    assert [s.transactional_id for s in r.transaction_states] == ["a"] and r.unknown_state_filters == ["Nope"]
    assert [s.transactional_id for s in (await c.list(pids=[pid])).transaction_states] == ["a"]
    broker.clock.advance(10_000)
    assert [s.transactional_id for s in (await c.list(states=["Ongoing"], duration=9_999)).transaction_states] == ["a"]
    assert (await c.list(states=["Ongoing"], duration=10_000)).transaction_states == []
    assert len((await c.list(duration=10_000, version=0)).transaction_states) == 2  # v0 has no duration
    ps = await c.producers("t", 0, 1, 7)
    (p0,) = ps[0].active_producers
    assert (p0.producer_id, p0.producer_epoch, p0.last_sequence, p0.current_txn_start_offset,
            p0.coordinator_epoch) == (pid, epoch, 1, 0, -1)
    assert ps[1].active_producers == [] and ps[7].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    await c.end("a", pid, epoch, commit=True)
    (p0,) = (await c.producers("t", 0))[0].active_producers
    assert (p0.current_txn_start_offset, p0.coordinator_epoch) == (-1, 0)
    assert (await c.describe("a"))["a"].transaction_state == "CompleteCommit"


async def test_retention_drops_aborted_transactions_below_the_log_start(tmp_path):
    from kcoord.server.node import run_topic_retention

    b = await boot(tmp_path)
    try:
        b.create_topic("r", 1, {"segment.bytes": "200", "retention.bytes": "1"})
        c = TxnClient(b)
        pid, epoch = await begin(c)
        for _ in range(3):
            await c.add("tx", pid, epoch, {"r": [0]})
            await c.produce("tx", "r", 0, [b"x" * 100], pid, epoch)
            await c.end("tx", pid, epoch, commit=False)
        txns = b.parts.data_plane.get().txns.loaded("r", 0)
        assert len(txns.aborted) == 3
        run_topic_retention(b)
        plog = b.logs.get("r", 0)
        assert plog.log_start_offset > 0
        assert all(e.last_offset >= plog.log_start_offset for e in txns.aborted) and len(txns.aborted) < 3
    finally:
        await b.stop()
