"""Whose markers a prepared transaction's job writes (server/txn/markers.py): a job retrying
its markers goes on when its __transaction_state partition gets a new leader epoch that keeps
it on this node (an ISR change), and stops once the partition is unloaded (another node leads
it: that node's load starts its own job). The runtime is managed as on a cluster node, through
the real handlers of an in-process broker."""
from __future__ import annotations

import asyncio

import pytest
from test_txn_broker import boot, until
from txn_client import TxnClient

from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.txn import markers
from kcoord.server.txn.state import TxnState


@pytest.fixture
async def broker(tmp_path, monkeypatch):
    monkeypatch.setattr(markers, "RETRY_BACKOFF_S", 0.2)
    b = await boot(tmp_path)
    yield b
    await b.stop()


async def prepared_with_a_failed_first_attempt(broker):
    """A transaction whose markers fail once: (runtime, partition, calls of write_markers)."""
    c = TxnClient(broker)
    assert (await c.find("tx")).error_code == 0
    txn = broker.parts.txn.get()
    rt, coordinator = txn.runtime, txn.coordinator
    p = coordinator.partition_of("tx")
    rt.managed()  # as on a cluster node: this node leads the id's partition at epoch 0
    await rt.load(p, 0)
    r = await c.init("tx")
    pid, epoch = r.producer_id, r.producer_epoch
    assert await c.add("tx", pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert (await c.produce("tx", "t", 0, [b"a"], pid, epoch)).error_code == 0
    real = txn.markers.write_markers
    calls: list[int] = []

    async def failing_once(job):
        calls.append(1)
        if len(calls) == 1:
            raise markers.MarkersNotWritten(E.NOT_LEADER_OR_FOLLOWER, {("t", 0): E.NOT_LEADER_OR_FOLLOWER})
        await real(job)

    txn.markers.write_markers = failing_once
    assert (await c.end("tx", pid, epoch, commit=True, until_complete=False)).error_code == 0
    await until(lambda: calls, "the first attempt")
    return rt, p, calls


async def test_a_new_leader_epoch_that_keeps_the_partition_here_does_not_stop_the_markers(broker):
    rt, p, calls = await prepared_with_a_failed_first_attempt(broker)
    rt.load(p, 1)  # the controller bumped the epoch (a follower left the ISR): still led here
    assert rt.state(p) == ("active", 1)
    coordinator = broker.parts.txn.get().coordinator
    await until(lambda: coordinator.get("tx").state is TxnState.COMPLETE_COMMIT, "the transaction completed")
    assert len(calls) == 2


async def test_an_unloaded_partition_leaves_its_markers_to_the_next_coordinator(broker):
    rt, p, calls = await prepared_with_a_failed_first_attempt(broker)
    rt.unload(p, 1)  # another node leads it now
    coordinator = broker.parts.txn.get().coordinator
    await asyncio.sleep(3 * markers.RETRY_BACKOFF_S)
    assert len(calls) == 1 and coordinator.get("tx") is None
    assert not broker.parts.txn.get().markers.in_flight
    # led here again: the load finds the prepared transaction and writes its markers
    await rt.load(p, 2)
    await until(lambda: (m := coordinator.get("tx")) is not None and m.state is TxnState.COMPLETE_COMMIT,
                "the transaction completed by the new load")
