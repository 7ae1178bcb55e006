"""EndTxn answered once PrepareCommit / PrepareAbort is durable (Kafka's answer, the default),
and the next transaction's requests meeting the markers still being written: they wait for the
completion and are then served (server/txn/settling.py), or, past settling.MAX_WAIT_S, answer
CONCURRENT_TRANSACTIONS as Kafka does. Through the real handlers of an in-process broker."""
from __future__ import annotations

import asyncio

import pytest
from test_txn_broker import G, begin, boot, until
from txn_client import TxnClient

from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.txn import settling
from kcoord.server.txn.state import TxnState


@pytest.fixture
async def broker(tmp_path):
    b = await boot(tmp_path)
    yield b
    await b.stop()


def gate_markers(broker) -> asyncio.Event:
    """Hold the marker writer until the returned Event is set."""
    real = broker.parts.txn.get().markers.write_markers
    gate = asyncio.Event()

    async def slow(job):
        await gate.wait()
        await real(job)

    broker.parts.txn.get().markers.write_markers = slow
    return gate


async def one_transaction(c: TxnClient, pid: int, epoch: int, value: bytes, offset: int) -> None:
    assert await c.add("tx", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert (await c.produce("tx", "t", 0, [value], pid, epoch)).error_code == 0
    assert await c.add_offsets("tx", pid, epoch, G) == 0
    await c.commit_offsets("tx", pid, epoch, G, {("in", 0): offset})


async def test_end_txn_is_answered_once_prepared_and_the_next_transaction_waits(broker):
    c = TxnClient(broker)
    pid, epoch = await begin(c)
    await one_transaction(c, pid, epoch, b"a", 1)
    gate = gate_markers(broker)
    assert (await c.end("tx", pid, epoch, commit=True, until_complete=False)).error_code == 0
    coordinator = broker.parts.txn.get().coordinator
    assert coordinator.get("tx").state is TxnState.PREPARE_COMMIT
    assert await c.offsets(G, {"in": [0]}) == {("in", 0): (-1, E.UNSTABLE_OFFSET_COMMIT)}
    # the client begins its next transaction at once: AddPartitionsToTxn meets the markers
    adding = asyncio.ensure_future(c.add("tx", pid, epoch, {"t": [1]}))
    await until(lambda: coordinator.waiting_requests == 1, "AddPartitionsToTxn waits")
    assert not adding.done()
    gate.set()
    assert await adding == {("t", 1): 0}
    meta = coordinator.get("tx")
    assert (meta.state, meta.partitions) == (TxnState.ONGOING, {("t", 1)})
    assert await c.offsets(G, {"in": [0]}) == {("in", 0): (1, 0)}
    assert coordinator.completing("tx") is None and coordinator.waiting_requests == 0


@pytest.mark.parametrize("api", ["add_offsets", "end", "init"])
async def test_other_requests_wait_too(broker, api):
    c = TxnClient(broker)
    pid, epoch = await begin(c)
    await one_transaction(c, pid, epoch, b"a", 1)
    gate = gate_markers(broker)
    assert (await c.end("tx", pid, epoch, commit=True, until_complete=False)).error_code == 0
    coordinator = broker.parts.txn.get().coordinator
    if api == "add_offsets":
        asking = asyncio.ensure_future(c.add_offsets("tx", pid, epoch, G))
    elif api == "end":  # a retry of the EndTxn: the transaction it committed is complete
        asking = asyncio.ensure_future(c.end("tx", pid, epoch, commit=True, until_complete=False))
    else:  # a new instance: no transaction to abort once the commit is complete
        asking = asyncio.ensure_future(c.init("tx"))
    await until(lambda: coordinator.waiting_requests == 1, f"{api} waits")
    gate.set()
    r = await asking
    assert (r if api == "add_offsets" else r.error_code) == 0
    meta = coordinator.get("tx")
    if api == "add_offsets":
        assert meta.state is TxnState.ONGOING
    elif api == "end":
        assert meta.state is TxnState.COMPLETE_COMMIT
    else:
        assert (meta.state, r.producer_epoch) == (TxnState.EMPTY, epoch + 1)


async def test_past_the_wait_the_answer_is_concurrent_transactions(broker, monkeypatch):
    monkeypatch.setattr(settling, "MAX_WAIT_S", 0.01)
    c = TxnClient(broker)
    pid, epoch = await begin(c)
    await one_transaction(c, pid, epoch, b"a", 1)
    gate = gate_markers(broker)
    assert (await c.end("tx", pid, epoch, commit=True, until_complete=False)).error_code == 0
    assert await c.add("tx", pid, epoch, {"t": [1]}) == {("t", 1): E.CONCURRENT_TRANSACTIONS}
    assert await c.add_offsets("tx", pid, epoch, G) == E.CONCURRENT_TRANSACTIONS
    assert broker.parts.txn.get().coordinator.waiting_requests == 0
    gate.set()
    await until(lambda: broker.parts.txn.get().coordinator.get("tx").state is TxnState.COMPLETE_COMMIT, "complete")
    assert await c.add("tx", pid, epoch, {"t": [1]}) == {("t", 1): 0}


async def test_answer_once_complete_when_configured(tmp_path):
    b = await boot(tmp_path, kcoord_transaction_end_answer_on_prepare=False)
    try:
        c = TxnClient(b)
        pid, epoch = await begin(c)
        await one_transaction(c, pid, epoch, b"a", 1)
        gate = gate_markers(b)
        ending = asyncio.ensure_future(c.end("tx", pid, epoch, commit=True, until_complete=False))
        await until(lambda: b.parts.txn.get().coordinator.completing("tx") is not None, "prepared, markers being written")
        assert not ending.done()
        gate.set()
        assert (await ending).error_code == 0
        assert b.parts.txn.get().coordinator.get("tx").state is TxnState.COMPLETE_COMMIT
    finally:
        await b.stop()
