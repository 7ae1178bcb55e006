"""The consumer group protocol (KIP-848).

1. Convergence: N members join one consumer group with ConsumerGroupHeartbeat (epoch 0) and
   keep heartbeating with what they own, as librdkafka does, until every member is at the
   target epoch with its target assignment (a topic of 2N partitions, the uniform assignor).
   Driven directly through GroupCoordinator with a FakeClock (records "appended" at once);
   prints members, coordinator CPU (time.process_time) and heartbeats needed.
   Target: 1,000 members converge within 100 ms of coordinator CPU; 10,000 reported.
2. Steady-state ConsumerGroupHeartbeat/s from 100 connections (the 100 members of one
   stable group, each keeping one keep-alive heartbeat outstanding) vs a bare uvloop server
   answering the same frames, measured alternately in the same run.
   Target: kcoord >= 50% of the ceiling.

Run: python bench/bench_consumer_group.py [--members N ...] [--connections 100]
"""
from __future__ import annotations

import gc
import time
import uuid

from _util import SyncClient, closed_loop_args, compare, encode_request, start_bare, start_kcoord, stop, table
from kafka.protocol.admin import CreateTopicsRequest

from kcoord.protocol.coordinator_records import TopicMetadata
from kcoord.protocol.messages import ConsumerGroupHeartbeatRequest as R
from kcoord.server.clock import FakeClock
from kcoord.server.deferred import Deferred
from kcoord.server.group.config import GroupConfig
from kcoord.server.group.coordinator import GroupCoordinator


class _Topics:
    def __init__(self, partitions: int) -> None:
        self.changes = 1
        self.t = TopicMetadata(uuid.uuid4(), "bench", partitions)

    def metadata(self, name: str):
        return self.t if name == "bench" else None

    def names(self):
        return ["bench"]

    def name_of(self, topic_id):
        return "bench"


class _Req:
    """What the coordinator reads of a heartbeat (building kafka-python objects is the
    client's cost, not the coordinator's)."""

    __slots__ = ("group_id", "member_id", "member_epoch", "instance_id", "rack_id", "rebalance_timeout_ms",
                 "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "topic_partitions")

    def __init__(self, member_id: str, epoch: int, topic_partitions, join: bool = False) -> None:
        self.group_id = "bench"
        self.member_id = member_id
        self.member_epoch = epoch
        self.instance_id = self.rack_id = self.subscribed_topic_regex = self.server_assignor = None
        self.rebalance_timeout_ms = 300000 if join else -1
        self.subscribed_topic_names = ["bench"] if join else None
        self.topic_partitions = topic_partitions


class _TP:
    __slots__ = ("topic_id", "partitions")

    def __init__(self, topic_id, partitions) -> None:
        self.topic_id = topic_id
        self.partitions = partitions


def _run(coord: GroupCoordinator, result):
    """The runtime's part, instantly: records are applied already; answer with on_appended."""
    if result.records:
        return result.on_appended(None)
    return result.response


def converge(n: int) -> tuple[float, int]:
    clock = FakeClock()
    coord = GroupCoordinator(GroupConfig(), clock)
    coord.set_topics(_Topics(2 * n))
    background = []
    coord.set_background_writer(background.append)
    joins = [_Req(f"member-{i}", 0, [], join=True) for i in range(n)]
    owned: list[list] = [[] for _ in range(n)]
    epochs = [0] * n
    gc.collect()
    t0 = time.process_time()

    def settle(answers):
        coord.run_end_of_turn()
        while background:
            _run(coord, background.pop(0))
        for i, a in answers:
            a = a.result() if isinstance(a, Deferred) else a
            assert a.error_code == 0, a
            epochs[i] = a.member_epoch
            if a.assignment is not None:
                owned[i] = [_TP(tp.topic_id, tp.partitions) for tp in a.assignment.topic_partitions]

    settle([(i, _run(coord, coord.consumer_group_heartbeat(j, 1, "c", "/h"))) for i, j in enumerate(joins)])
    beats = n
    group = coord.group("bench")
    while group.state_name() != "Stable":
        answers = []
        for i in range(n):
            req = _Req(f"member-{i}", epochs[i], owned[i])
            answers.append((i, _run(coord, coord.consumer_group_heartbeat(req, 1, "c", "/h"))))
        beats += n
        settle(answers)
    elapsed = time.process_time() - t0
    assert all(m.is_reconciled_to(group.assignment_epoch) for m in group.members.values())
    return elapsed, beats


def steady_state(connections: int, seconds: float, rounds: int) -> None:
    proc, port, _ = start_kcoord()
    bare, bare_port = start_bare("echo")
    try:
        c = SyncClient(port)
        T = CreateTopicsRequest.CreatableTopic
        c.call(CreateTopicsRequest(version=4, timeout_ms=5000, validate_only=False, topics=[
            T(name="bench-cg", num_partitions=connections, replication_factor=1, assignments=[], configs=[])]), 4)
        clients = [SyncClient(port) for _ in range(connections)]
        epochs = [0] * connections
        owned: list[list] = [[] for _ in range(connections)]
        for i, cl in enumerate(clients):
            r = cl.call(R(version=1, group_id="bench-cg", member_id=f"m-{i}", member_epoch=0, instance_id=None,
                          rack_id=None, rebalance_timeout_ms=300000, subscribed_topic_names=["bench-cg"],
                          subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]), 1)
            assert r.error_code == 0, r
            epochs[i] = r.member_epoch
        for _ in range(10):  # reconcile: everyone reports what it owns until all are stable
            for i, cl in enumerate(clients):
                r = cl.call(R(version=1, group_id="bench-cg", member_id=f"m-{i}", member_epoch=epochs[i],
                              instance_id=None, rack_id=None, rebalance_timeout_ms=-1, subscribed_topic_names=None,
                              subscribed_topic_regex=None, server_assignor=None, topic_partitions=owned[i]), 1)
                assert r.error_code == 0, r
                epochs[i] = r.member_epoch
                if r.assignment is not None:
                    owned[i] = [R.TopicPartitions(topic_id=tp.topic_id, partitions=tp.partitions)
                                for tp in r.assignment.topic_partitions]
        for cl in clients:
            cl.close()
        c.close()
        frames = [encode_request(R(version=1, group_id="bench-cg", member_id=f"m-{i}", member_epoch=epochs[i],
                                   instance_id=None, rack_id=None, rebalance_timeout_ms=-1,
                                   subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
                                   topic_partitions=None), 1, correlation_id=i)
                  for i in range(connections)]
        compare("ConsumerGroupHeartbeat v1 (keep-alive, one stable group)", "heartbeats", port, bare_port,
                "bare uvloop (ceiling)", frames, seconds, rounds)
    finally:
        stop(proc)
        stop(bare)


def main() -> None:
    ap = closed_loop_args()
    ap.add_argument("--members", type=int, nargs="*", default=[100, 1000, 10000])
    args = ap.parse_args()
    converge(100)  # warm up imports and caches
    rows = []
    for n in args.members:
        best, beats = min(converge(n) for _ in range(3 if n <= 1000 else 1))
        rows.append([n, 2 * n, best * 1000, best * 1e6 / n, beats])
    print("Convergence: N members join one consumer group (uniform assignor, 2N partitions), "
          "coordinator CPU until all are at the target epoch")
    print(table(["members", "partitions", "ms", "µs/member", "heartbeats"], rows))
    one_k = next((r for r in rows if r[0] == 1000), None)
    if one_k is not None:
        print(f"target: 1,000 members within 100 ms -> {'met' if one_k[2] <= 100 else 'NOT met'}")
    print()
    if args.connections:
        steady_state(args.connections, args.seconds, args.rounds)


if __name__ == "__main__":
    main()
