"""The control API's cost and its reset.

1. Heartbeat and durable OffsetCommit throughput from 100 connections with the control API
   on (kcoord.control.listener set, nothing injected) beside the same server with it off,
   measured alternately in one run (order swapped every round), with each server's CPU time
   per request (steadier than throughput on a shared machine). Target: within 3% (on >= 97%
   of off).
2. POST /reset of a server holding 100 topics and 100 groups with committed offsets, timed by
   the client (HTTP round trip included) and by the server's log line. Target: <= 50 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from urllib.request import Request, urlopen

from _util import SyncClient, closed_loop, encode_request, free_port, start_kcoord, stop, table
from bench_commit import commit_frame
from bench_heartbeat import join
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import HeartbeatRequest, OffsetCommitRequest

COMMIT_TOPIC = "bench-commit-topic"  # bench_commit's frames name it


def create_topics(port: int, names: list[str], partitions: int) -> None:
    c = SyncClient(port)
    CT = CreateTopicsRequest.CreatableTopic
    r = c.call(CreateTopicsRequest(topics=[CT(name=n, num_partitions=partitions, replication_factor=1,
                                              assignments=[], configs=[]) for n in names],
                                   timeout_ms=5000, validate_only=False), 5)
    assert all(t.error_code == 0 for t in r.topics), r
    c.close()


def heartbeat_frames(port: int, n: int) -> list[bytes]:
    frames = []
    for i in range(n):
        group = f"bench-ctl-hb-{i}"
        member, gen = join(port, group)
        req = HeartbeatRequest(group_id=group, generation_id=gen, member_id=member, group_instance_id=None)
        frames.append(encode_request(req, 4, correlation_id=i))
    return frames


def post(url: str) -> dict:
    with urlopen(Request(url, data=b"", method="POST"), timeout=60) as r:
        return json.loads(r.read())


_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
WARMUP_S = 1.0  # closed_loop's


def cpu_s(pid: int) -> float:
    """The server's user + system CPU time so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


def compare_on_off(ports: dict[str, int], pids: dict[str, int], frames: dict[str, list[bytes]], what: str,
                   seconds: float, rounds: int) -> list:
    """Throughput, and the server's CPU per request (what a busy machine disturbs least)."""
    samples: dict[str, list[float]] = {"off": [], "on": []}
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    for i in range(rounds):
        for which in (("off", "on") if i % 2 == 0 else ("on", "off")):
            before = cpu_s(pids[which])
            rate = closed_loop(ports[which], frames[which], seconds)
            samples[which].append(rate)
            cpu[which].append((cpu_s(pids[which]) - before) / (rate * (seconds + WARMUP_S)) * 1e6)
    mid = rounds // 2
    off, on = sorted(samples["off"])[mid], sorted(samples["on"])[mid]
    off_cpu, on_cpu = sorted(cpu["off"])[mid], sorted(cpu["on"])[mid]
    return [what, off, on, f"{100 * on / off:.1f}%", f"{off_cpu:.1f} / {on_cpu:.1f}",
            f"{100 * off_cpu / on_cpu:.1f}%",
            " / ".join(" ".join(f"{x:,.0f}" for x in samples[k]) for k in ("off", "on"))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--resets", type=int, default=7)
    args = ap.parse_args()

    control_port = free_port()
    off, off_port, _ = start_kcoord()
    on, on_port, _ = start_kcoord({"kcoord.control.listener": f"http://127.0.0.1:{control_port}"})
    ports = {"off": off_port, "on": on_port}
    try:
        hb = {k: heartbeat_frames(p, args.connections) for k, p in ports.items()}
        for p in ports.values():
            create_topics(p, [COMMIT_TOPIC], args.connections)
        commits = [commit_frame(i, 1000 + i) for i in range(args.connections)]
        pids = {"off": off.pid, "on": on.pid}
        rows = [
            compare_on_off(ports, pids, hb, "Heartbeat v4", args.seconds, args.rounds),
            compare_on_off(ports, pids, {"off": commits, "on": commits}, "OffsetCommit v8 (durable)", args.seconds,
                           args.rounds),
        ]
        print(f"Control API on (nothing injected) vs off: {args.connections} connections, one request "
              f"outstanding each, {args.rounds} alternating runs of {args.seconds:g} s, medians "
              "(requests/s; server CPU microseconds per request)")
        print(table(["workload", "off", "on", "on / off", "CPU us off / on", "CPU off / on", "samples off / on"],
                    rows))
        worst = min(float(r[3].rstrip("%")) for r in rows)
        worst_cpu = min(float(r[5].rstrip("%")) for r in rows)
        print(f"target: on >= 97% of off -> throughput {'met' if worst >= 97.0 else 'NOT met'}, "
              f"CPU per request {'met' if worst_cpu >= 97.0 else 'NOT met'}")

        post(f"http://127.0.0.1:{control_port}/reset")  # the throughput runs' groups and topic go first
        client_ms, server_ms = [], []
        for r in range(args.resets):
            names = [f"reset-{r}-topic-{i}" for i in range(100)]
            create_topics(on_port, names, 1)
            c = SyncClient(on_port)
            T = OffsetCommitRequest.OffsetCommitRequestTopic
            P = T.OffsetCommitRequestPartition
            for g in range(100):
                req = OffsetCommitRequest(group_id=f"reset-group-{g}", generation_id_or_member_epoch=-1,
                                          member_id="", group_instance_id=None,
                                          topics=[T(name=names[g], partitions=[P(partition_index=0, committed_offset=g,
                                                                                 committed_leader_epoch=-1,
                                                                                 committed_metadata="")])])
                resp = c.call(req, 8)
                assert resp.topics[0].partitions[0].error_code == 0, resp
            c.close()
            status = json.loads(urlopen(f"http://127.0.0.1:{control_port}/status", timeout=30).read())
            assert len(status["topics"]) == 100 and len(status["groups"]) == 100, status
            t0 = time.perf_counter()
            answer = post(f"http://127.0.0.1:{control_port}/reset")
            client_ms.append((time.perf_counter() - t0) * 1000)
            assert answer["dropped"]["topics"] == 100 and answer["dropped"]["groups"] == 100, answer
            server_ms.append(answer["took_ms"])
        client_ms.sort()
        server_ms.sort()
        mid = args.resets // 2
        print()
        print(f"POST /reset with 100 topics and 100 groups (committed offsets), {args.resets} runs (ms)")
        print(table(["measure", "median", "min", "max"], [
            ["server (reset itself)", server_ms[mid], server_ms[0], server_ms[-1]],
            ["client (HTTP round trip)", client_ms[mid], client_ms[0], client_ms[-1]],
        ]))
        print(f"target: reset <= 50 ms -> {'met' if client_ms[mid] <= 50 else 'NOT met'}")
    finally:
        stop(off)
        stop(on)


if __name__ == "__main__":
    main()
