"""The replica manager's fencing (server/replication/replica_manager.py `fence` / `unfence`,
driven by the node's ZooKeeper connection through server/cluster/replicas.py): a parked acks=all
produce is answered NOT_LEADER_OR_FOLLOWER at the fence, not at its timeout; parked consumer
fetches are woken; the replicas answer as not leading until unfence, then serve again. Real
logs in tmp_path; the purgatory on a FakeClock that never advances (so no timeout answers)."""
from __future__ import annotations

from types import SimpleNamespace

from kazoo.protocol.states import KazooState

from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.clock import FakeClock
from kcoord.server.cluster.partition_state import PartitionState
from kcoord.server.cluster.replicas import ReplicatedReplicas
from kcoord.server.replication import delayed_produce
from kcoord.server.replication.replica_manager import DataHooks, ReplicaManager
from kcoord.storage.log_manager import LogManager

STATE = PartitionState("t", 0, 1, 3, (1, 2), (1, 2), 1, 0)


class _Result:
    error = E.NONE
    message = ""


def manager(tmp_path):
    logs = LogManager(str(tmp_path))
    logs.create("t", 0)
    woken: list[tuple[str, int]] = []

    async def alter_isr(state, isr):
        return None

    hooks = DataHooks(log_for=lambda t, p: logs.get(t, p), woken=lambda t, p: woken.append((t, p)),
                      truncated=lambda t, p: None, replicated=lambda *a: None)
    rm = ReplicaManager(1, FakeClock(), alter_isr, hooks)
    assert not rm.apply([STATE], {})
    return rm, logs, woken


def park(rm) -> tuple[_Result, list]:
    """An acks=all produce of one record at offset 0, waiting for follower 2."""
    r = rm.get("t", 0)
    r.plog.append_batches(_batch(), None, r.leader_epoch)
    rm.leader_appended(r, 0)
    result, done = _Result(), []
    delayed_produce.watch(rm.produce_purgatory, 30000, [delayed_produce.Waiting(result, r, 1, 2)]).add_callback(
        done.append)
    assert not done and rm.produce_purgatory.watched(("t", 0)) == 1
    return result, done


def _batch() -> bytes:
    import time

    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    b.append(0, int(time.time() * 1000), b"k", b"v", [])
    return bytes(b.build())


def test_fencing_answers_a_parked_produce_and_wakes_parked_fetches(tmp_path):
    rm, logs, woken = manager(tmp_path)
    try:
        result, done = park(rm)
        rm.fence()
        assert done and result.error == E.NOT_LEADER_OR_FOLLOWER
        assert ("t", 0) in woken
        r = rm.get("t", 0)
        assert r.stopped and r.is_leader  # answers as not leading; still the leader of its state
        assert r.replicated(1, 1) == (True, E.NOT_LEADER_OR_FOLLOWER)
        rm.unfence()
        assert not r.stopped
        rm.follower_fetched(r, 2, r.log_end_offset)  # serving again: the high watermark moves
        assert r.hw == 1 and r.replicated(1, 2) == (True, E.NONE)
    finally:
        logs.close()


async def test_becoming_a_follower_answers_a_parked_produce(tmp_path):
    rm, logs, woken = manager(tmp_path)
    try:
        result, done = park(rm)
        woken.clear()
        rm.apply([PartitionState("t", 0, 2, 4, (2,), (1, 2), 1, 1)], {})
        assert done and result.error == E.NOT_LEADER_OR_FOLLOWER
        assert ("t", 0) in woken  # parked consumer fetches answer now
    finally:
        await rm.stop()  # its fetcher of leader 2
        logs.close()


def test_the_zookeeper_connection_state_fences_and_unfences(tmp_path):
    rm, logs, _ = manager(tmp_path)
    listeners = []
    node = SimpleNamespace(zk=SimpleNamespace(on_state=listeners.append))
    try:
        from kcoord.server.cluster.replicas import replicated_replicas

        replicas = replicated_replicas(node, SimpleNamespace(), lambda alter_isr: rm)
        assert isinstance(replicas, ReplicatedReplicas) and len(listeners) == 1
        result, done = park(rm)
        listeners[0](KazooState.SUSPENDED)
        assert done and result.error == E.NOT_LEADER_OR_FOLLOWER and rm.get("t", 0).stopped
        listeners[0](KazooState.CONNECTED)
        assert not rm.get("t", 0).stopped
        listeners[0](KazooState.LOST)
        assert rm.get("t", 0).stopped
    finally:
        logs.close()
