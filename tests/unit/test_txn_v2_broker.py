"""Transactions v2 through the real handlers of an in-process broker with real logs: Produce v12
adds its partitions implicitly, TxnOffsetCommit v5 the group's offsets partition, EndTxn v5
bumps the epoch (the next transaction's batches carry it, sequences from 0), and ApiVersions
advertises the transaction.version feature."""
from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.metadata import ApiVersionsRequest
from test_txn_broker import G, boot, markers, until, values
from txn_client import TxnClient

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.txn import settling
from kcoord.server.txn.state import TxnState
from kcoord.storage.batch import iter_batch_records
from kcoord.storage.segment import scan_batches


@pytest.fixture
async def broker(tmp_path):
    b = await boot(tmp_path)
    yield b
    await b.stop()


async def init(c: TxnClient, tid: str = "tx") -> tuple[int, int]:
    assert (await c.find(tid)).error_code == 0
    r = await c.init(tid)
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


async def test_produce_v12_adds_partitions_and_end_txn_v5_bumps_the_epoch(broker):
    c = TxnClient(broker)
    pid, epoch = await init(c)
    # no AddPartitionsToTxn: the first batch of each partition adds it
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch, version=12)).error_code == 0
    assert (await c.produce("tx", "t", 1, [b"b"], pid, epoch, version=12)).error_code == 0
    assert (await c.produce("tx", "t", 0, [b"c"], pid, epoch, version=12)).error_code == 0
    meta = broker.parts.txn.get().coordinator.get("tx")
    assert meta.state is TxnState.ONGOING and meta.partitions == {("t", 0), ("t", 1)}
    assert meta.client_transaction_version == 2
    assert (await c.fetch("t", 0)).last_stable_offset == 0
    assert await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 5}, version=5) == {("in", 0): 0}
    assert (OFFSETS_TOPIC, broker.parts.coordinator.get().partition_of(G)) in broker.parts.txn.get().coordinator.get("tx").partitions
    r = await c.end("tx", pid, epoch, commit=True, version=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    got = await c.fetch("t", 0)
    assert values(got.records) == [b"a", b"c"] and got.last_stable_offset == broker.logs.get("t", 0).log_end_offset
    assert await c.offsets(G, {"in": [0]}) == {("in", 0): (5, 0)}
    # the markers carry the bumped epoch; the next transaction's batches too, sequences from 0
    assert {m[1] for m in markers(broker, "t", 0)} == {pid}
    c.seq.clear()
    assert (await c.produce("tx", "t", 0, [b"d"], pid, epoch + 1, version=12)).error_code == 0
    r = await c.end("tx", pid, epoch + 1, commit=False, version=5)
    assert (r.error_code, r.producer_epoch) == (0, epoch + 2)
    got = await c.fetch("t", 0)
    assert values(got.records) == [b"a", b"c", b"d"]
    assert [a.producer_id for a in got.aborted_transactions] == [pid]
    # a retry of the EndTxn that succeeded, with the epoch it was sent with
    r = await c.end("tx", pid, epoch + 1, commit=False, version=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 2)


async def test_the_previous_epoch_is_fenced_everywhere(broker):
    c = TxnClient(broker)
    pid, epoch = await init(c)
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch, version=12)).error_code == 0
    assert (await c.end("tx", pid, epoch, commit=True, version=5)).error_code == 0
    # a zombie still at the old epoch: its produce is refused, nothing is added or appended
    end = broker.logs.get("t", 1).log_end_offset
    assert (await c.produce("tx", "t", 1, [b"z"], pid, epoch, version=12)).error_code == E.INVALID_PRODUCER_EPOCH
    assert broker.logs.get("t", 1).log_end_offset == end
    assert broker.parts.txn.get().coordinator.get("tx").state is TxnState.COMPLETE_COMMIT
    assert await c.commit_offsets("tx", pid, epoch, G, {("in", 0): 1}, version=5) == {
        ("in", 0): E.INVALID_PRODUCER_EPOCH}
    assert (await c.end("tx", pid, epoch - 1, commit=True, version=5)).error_code == E.PRODUCER_FENCED
    # a producer id the transactional id does not have
    assert (await c.produce("tx", "t", 1, [b"z"], pid + 5, 0, version=12)).error_code == \
        E.INVALID_PRODUCER_ID_MAPPING


async def test_a_v1_client_beside_is_unchanged(broker):
    """Produce v11 and EndTxn v4 still need AddPartitionsToTxn and keep the epoch."""
    c = TxnClient(broker)
    pid, epoch = await init(c)
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch, version=11)).error_code == E.TRANSACTION_ABORTABLE
    assert await c.add("tx", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch, version=11)).error_code == 0
    r = await c.end("tx", pid, epoch, commit=True, version=4)
    assert (r.error_code, r.producer_epoch) == (0, -1)
    assert broker.parts.txn.get().coordinator.get("tx").producer_epoch == epoch


def _gate_markers(broker):
    """Hold the marker writer until the returned Event is set."""
    real = broker.parts.txn.get().markers.write_markers
    gate = asyncio.Event()

    async def slow(job):
        await gate.wait()
        await real(job)

    broker.parts.txn.get().markers.write_markers = slow
    return gate


async def test_produce_v12_waits_for_the_previous_transactions_markers(broker):
    """A v2 producer's next batch may reach a partition before the previous transaction's
    marker: it waits for the transaction's completion (server/txn/settling.py), then starts
    the next transaction in the partition."""
    c = TxnClient(broker)
    pid, epoch = await init(c)
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch, version=12)).error_code == 0
    gate = _gate_markers(broker)
    r = await c.end("tx", pid, epoch, commit=True, version=5, until_complete=False)
    assert r.error_code == 0  # answered once PrepareCommit is durable, as Kafka answers
    assert broker.parts.txn.get().coordinator.get("tx").state is TxnState.PREPARE_COMMIT
    c.seq.clear()
    producing = asyncio.ensure_future(c.produce("tx", "t", 0, [b"next"], pid, epoch + 1, version=12))
    await until(lambda: broker.parts.txn.get().coordinator.waiting_requests == 1, "the produce waits")
    assert not producing.done()
    gate.set()
    assert (await producing).error_code == 0
    assert broker.parts.txn.get().coordinator.get("tx").partitions == {("t", 0)}
    assert (await c.end("tx", pid, epoch + 1, commit=False, version=5)).error_code == 0
    got = await c.fetch("t", 0)
    assert values(got.records) == [b"a", b"next"] and [a.producer_id for a in got.aborted_transactions] == [pid]


async def test_produce_v12_meeting_markers_past_the_wait_is_retriable(broker, monkeypatch):
    """Markers still not written after settling.MAX_WAIT_S: the batch is refused as Kafka
    refuses it (CONCURRENT_TRANSACTIONS, answered NOT_ENOUGH_REPLICAS), nothing appended."""
    monkeypatch.setattr(settling, "MAX_WAIT_S", 0.01)
    c = TxnClient(broker)
    pid, epoch = await init(c)
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch, version=12)).error_code == 0
    gate = _gate_markers(broker)
    assert (await c.end("tx", pid, epoch, commit=True, version=5, until_complete=False)).error_code == 0
    c.seq.clear()
    r = await c.produce("tx", "t", 0, [b"next"], pid, epoch + 1, version=12)
    assert r.error_code == E.NOT_ENOUGH_REPLICAS  # CONCURRENT_TRANSACTIONS, as Produce answers it
    assert broker.parts.txn.get().coordinator.waiting_requests == 0
    gate.set()
    await until(lambda: broker.parts.txn.get().coordinator.get("tx").state is TxnState.COMPLETE_COMMIT, "complete")
    assert (await c.produce("tx", "t", 0, [b"next"], pid, epoch + 1, version=12)).error_code == 0
    assert (await c.end("tx", pid, epoch + 1, commit=True, version=5)).error_code == 0
    assert values((await c.fetch("t", 0)).records) == [b"a", b"next"]


@pytest.mark.parametrize("version", [3, 4])
async def test_api_versions_advertises_the_transaction_version(broker, version):
    c = TxnClient(broker)
    r = await c.ask(ApiKey.API_VERSIONS, ApiVersionsRequest(version=version, client_software_name="t",
                                                            client_software_version="1"), version)
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    assert finalized["transaction.version"] == (2, 2) and finalized["metadata.version"] == (25, 25)
    assert r.finalized_features_epoch > 0
    keys = {k.api_key: k.max_version for k in r.api_keys}
    assert (keys[ApiKey.PRODUCE], keys[ApiKey.END_TXN], keys[ApiKey.TXN_OFFSET_COMMIT]) == (12, 5, 5)
    if version >= 4:
        assert supported["transaction.version"] == (0, 2)
    else:  # features whose minimum is 0 are left out below v4 (KAFKA-17492)
        assert "transaction.version" not in supported and supported["metadata.version"] == (7, 25)


async def test_transaction_version_1_is_advertised_and_written(tmp_path):
    b = await boot(tmp_path, kcoord_transaction_version=1)
    try:
        c = TxnClient(b)
        r = await c.ask(ApiKey.API_VERSIONS, ApiVersionsRequest(version=4, client_software_name="t",
                                                                client_software_version="1"), 4)
        assert {f.name: f.max_version_level for f in r.finalized_features}["transaction.version"] == 1
        b0 = await boot(tmp_path / "v0", kcoord_transaction_version=0)
        try:
            r = await TxnClient(b0).ask(ApiKey.API_VERSIONS, ApiVersionsRequest(
                version=4, client_software_name="t", client_software_version="1"), 4)
            assert "transaction.version" not in {f.name for f in r.finalized_features}
            pid, epoch = await init(TxnClient(b0))
            plog = b0.logs.get("__transaction_state", b0.parts.txn.get().coordinator.partition_of("tx"))
            seg = plog.segments[0]
            vals = [bytes(v) for _, body in scan_batches(seg.fd, 0, seg.size) for _, _, _, v in iter_batch_records(body)]
            assert vals and all(v[:2] == b"\x00\x00" for v in vals)  # TransactionLogValue v0
        finally:
            await b0.stop()
    finally:
        await b.stop()


@pytest.mark.parametrize("version", [4, 5])
async def test_add_partitions_to_txn_from_brokers(broker, version):
    """AddPartitionsToTxn v4-v5 (what a broker sends): a batch of transactions, each checked
    (verify_only) or added as transactions v2 adds them; unknown partitions refused."""
    from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest

    c = TxnClient(broker)
    pid, epoch = await init(c, "tx")
    pid2, epoch2 = await init(c, "tx2")
    X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
    T = X.AddPartitionsToTxnTopic

    async def ask(*txns):
        r = await c.ask(ApiKey.ADD_PARTITIONS_TO_TXN, AddPartitionsToTxnRequest(version=version, transactions=list(txns)),
                        version)
        assert r.error_code == 0
        return {x.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                     for t in x.topic_results for p in t.results_by_partition}
                for x in r.results_by_transaction}

    got = await ask(X(transactional_id="tx", producer_id=pid, producer_epoch=epoch, verify_only=True,
                      topics=[T(name="t", partitions=[0])]),
                    X(transactional_id="tx2", producer_id=pid2, producer_epoch=epoch2, verify_only=False,
                      topics=[T(name="t", partitions=[0, 1])]))
    assert got == {"tx": {("t", 0): E.TRANSACTION_ABORTABLE}, "tx2": {("t", 0): 0, ("t", 1): 0}}
    meta = broker.parts.txn.get().coordinator.get("tx2")
    assert meta.state is TxnState.ONGOING and meta.client_transaction_version == 2
    got = await ask(X(transactional_id="tx2", producer_id=pid2, producer_epoch=epoch2, verify_only=True,
                      topics=[T(name="t", partitions=[1, 5])]),
                    X(transactional_id="tx", producer_id=pid, producer_epoch=epoch + 1, verify_only=False,
                      topics=[T(name="t", partitions=[0])]))
    assert got == {"tx2": {("t", 1): E.OPERATION_NOT_ATTEMPTED, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION},
                   "tx": {("t", 0): E.PRODUCER_FENCED}}
