"""The glue between the cluster layer and the group coordinator (server/cluster/coordinators.py):
the __consumer_offsets partitions this node leads are loaded, the others unloaded, by leader
epoch; a suspended or lost ZooKeeper session unloads everything, the same session back loads
again what the node still leads. A real runtime over real logs; the node is reduced to what
the glue reads of it (its id, whether it is fenced, its session events)."""
from __future__ import annotations

from typing import Any

from kazoo.protocol.states import KazooState
from test_coordinator_immigration import GROUP, N, P, answer, commit, commit_error, fetch, runtime

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.cluster.coordinators import CoordinatorsFollowLeadership
from kcoord.server.cluster.partition_state import PartitionState

ME = 1


class Replicas:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def apply(self, states, endpoints) -> None:
        self.calls.append(("apply", [(s.topic, s.partition) for s in states]))

    def stop_replicas(self, tps, delete) -> None:
        self.calls.append(("stop", list(tps), delete))


class Node:
    def __init__(self) -> None:
        self.broker_id = ME
        self.fenced = False
        self.listeners: list[Any] = []
        self.zk = self

    def on_state(self, fn) -> None:
        self.listeners.append(fn)

    def leads_anything(self) -> bool:
        return not self.fenced

    def session(self, state: str) -> None:
        self.fenced = state != KazooState.CONNECTED
        for fn in self.listeners:
            fn(state)


def state(partition: int, leader: int, epoch: int, topic: str = OFFSETS_TOPIC) -> PartitionState:
    return PartitionState(topic, partition, leader, epoch, (1, 2, 3), (1, 2, 3), 1, epoch)


async def settle(rt) -> None:
    for p in range(N):
        task = rt._loads.get(p)
        if task is not None:
            await task


async def test_leadership_loads_and_unloads_partitions_by_epoch(tmp_path):
    rt, logs = runtime(tmp_path)
    replicas, node = Replicas(), Node()
    glue = CoordinatorsFollowLeadership(replicas, [(OFFSETS_TOPIC, lambda: rt)], node)
    assert fetch(rt)[0] == E.NOT_COORDINATOR  # managed from the start: nothing led yet
    glue.apply([state(p, ME if p == P else 2, 0) for p in range(N)] + [state(0, ME, 0, "data")], {})
    assert replicas.calls[0][0] == "apply"  # the replica manager first: the log exists before loading
    await settle(rt)
    assert [rt.state(p)[0] for p in range(N)] == ["unloaded", "active", "unloaded", "unloaded"]
    assert commit_error(await answer(commit(rt, 3))) == E.NONE
    glue.apply([state(P, 2, 1)], {})  # another node leads it now
    assert rt.state(P) == ("unloaded", 1) and fetch(rt)[0] == E.NOT_COORDINATOR
    glue.apply([state(P, ME, 2)], {})  # and back here
    assert fetch(rt)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await settle(rt)
    assert fetch(rt) == (E.NONE, 3)  # replayed from the log
    glue.stop_replicas([(OFFSETS_TOPIC, P)], delete=False)
    assert rt.state(P)[0] == "unloaded" and replicas.calls[-1] == ("stop", [(OFFSETS_TOPIC, P)], False)
    logs.close()


async def test_a_suspended_session_unloads_and_the_same_session_back_reloads(tmp_path):
    rt, logs = runtime(tmp_path)
    node = Node()
    glue = CoordinatorsFollowLeadership(Replicas(), [(OFFSETS_TOPIC, lambda: rt)], node)
    glue.apply([state(P, ME, 4), state(0, 2, 4)], {})
    await settle(rt)
    assert commit_error(await answer(commit(rt, 8))) == E.NONE
    node.session(KazooState.SUSPENDED)
    assert fetch(rt)[0] == E.NOT_COORDINATOR and rt.shard.group(GROUP) is None
    node.session(KazooState.CONNECTED)
    await settle(rt)
    assert fetch(rt) == (E.NONE, 8) and rt.state(0)[0] == "unloaded"
    node.session(KazooState.LOST)
    assert fetch(rt)[0] == E.NOT_COORDINATOR
    node.fenced = True  # a new session: the node is fenced until it has read every state again
    for fn in node.listeners:
        fn(KazooState.CONNECTED)
    assert fetch(rt)[0] == E.NOT_COORDINATOR
    glue.apply([state(P, 3, 5)], {})  # what the node reads then: another leads it
    assert fetch(rt)[0] == E.NOT_COORDINATOR
    logs.close()


def txn_runtime(tmp_path):
    """The transaction coordinator on its runtime over N __transaction_state partitions."""
    from kcoord.protocol.partitioner import partition_for
    from kcoord.protocol.topics import TXN_TOPIC
    from kcoord.server.clock import FakeClock
    from kcoord.server.coordinator.runtime import CoordinatorRuntime
    from kcoord.server.txn.coordinator import TransactionCoordinator
    from kcoord.server.txn.metadata import TxnConfig
    from kcoord.server.txn.shard import TxnRecords
    from kcoord.storage.log_manager import LogManager

    logs = LogManager(str(tmp_path))
    for p in range(N):
        logs.create(TXN_TOPIC, p)
    ids = iter(range(1000))
    rt = CoordinatorRuntime(
        lambda rt: TransactionCoordinator(TxnConfig(900000, 604800000, 2), FakeClock(), N, lambda: next(ids),
                                          rt.committed),
        TxnRecords(lambda tid: partition_for(tid, N)), logs, FakeClock(), 5000, 1048588)
    return rt, logs


async def test_each_coordinator_follows_the_leadership_of_its_own_topic(tmp_path):
    from kcoord.protocol.topics import TXN_TOPIC

    groups, group_logs = runtime(tmp_path / "groups")
    txns, txn_logs = txn_runtime(tmp_path / "txns")
    node = Node()
    glue = CoordinatorsFollowLeadership(Replicas(), [(OFFSETS_TOPIC, lambda: groups), (TXN_TOPIC, lambda: txns)],
                                        node)
    coordinator = txns.shard
    tid = next(f"tx-{i}" for i in range(1000) if coordinator.partition_of(f"tx-{i}") == P)
    other = next(f"tx-{i}" for i in range(1000) if coordinator.partition_of(f"tx-{i}") != P)
    # managed from the start: no partition loaded yet, as before __transaction_state exists
    assert coordinator.init_producer_id(tid, 60000).response[0] == E.COORDINATOR_NOT_AVAILABLE
    glue.apply([state(p, ME if p == P else 2, 3, TXN_TOPIC) for p in range(N)], {})
    await settle(txns)
    assert [txns.state(p)[0] for p in range(N)] == ["unloaded", "active", "unloaded", "unloaded"]
    assert [groups.state(p)[0] for p in range(N)] == ["unloaded"] * N  # only its own topic moves it
    assert (await answer(txns.submit(coordinator.init_producer_id(tid, 60000))))[0] == E.NONE
    assert coordinator.init_producer_id(other, 60000).response[0] == E.NOT_COORDINATOR
    glue.apply([state(P, 2, 4, TXN_TOPIC)], {})  # another node leads it now
    assert txns.state(P) == ("unloaded", 4) and coordinator.get(tid) is None
    assert coordinator.init_producer_id(tid, 60000).response[0] == E.NOT_COORDINATOR
    glue.apply([state(P, ME, 5, TXN_TOPIC), state(0, ME, 5)], {})  # both back here
    assert coordinator.init_producer_id(tid, 60000).response[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await settle(txns)
    await settle(groups)
    assert coordinator.get(tid).producer_id == 0  # replayed from its log
    node.session(KazooState.SUSPENDED)  # fenced: both coordinators unload
    assert txns.state(P)[0] == "unloaded" and groups.state(0)[0] == "unloaded"
    node.session(KazooState.CONNECTED)
    await settle(txns)
    await settle(groups)
    assert txns.state(P)[0] == "active" and groups.state(0)[0] == "active"
    group_logs.close()
    txn_logs.close()
