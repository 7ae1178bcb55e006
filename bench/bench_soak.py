"""Soak: consumer groups joining, leaving, committing and being SIGKILLed at random against one
server for a long time (not CI; 30 minutes by default). Every minute it prints the server's
RSS and open descriptors, the latency of a probe's durable OffsetCommit and of ApiVersions,
the churn of that minute, and the commits lost so far; at the end, whether memory and
descriptors stayed flat and whether any acknowledged commit was lost.

    python bench/bench_soak.py [--minutes 30] [--groups 20] [--seed 1]

Members are tests/clientlib.py's group members (confluent-kafka and aiokafka, roundrobin):
each commits synchronously after every batch and prints each acknowledged commit. All groups
read one topic fed by a confluent-kafka producer. A commit is lost when an offset a member was
told is committed is later above what OffsetFetch returns for its group and partition (every
group's offsets only move forward here: a stale member's commit is refused, not applied).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from pathlib import Path

from _util import ROOT, start_kcoord, stop

sys.path.insert(0, str(ROOT / "tests"))

from clientlib import Background, python_member  # noqa: E402
from conftest import call  # noqa: E402
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest  # noqa: E402
from kafka.protocol.metadata import ApiVersionsRequest  # noqa: E402

TOPIC, PARTITIONS = "soak", 4
MIN_MEMBERS, MAX_MEMBERS = 1, 3
LIBS = ("confluent", "confluent", "aiokafka")
T = OffsetCommitRequest.OffsetCommitRequestTopic
P = T.OffsetCommitRequestPartition


def proc_figures(pid: int) -> tuple[float, int]:
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(list(Path(f"/proc/{pid}/fd").iterdir()))


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class Probe(threading.Thread):
    """A durable OffsetCommit and an ApiVersions every 100 ms, each timed (ms)."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.commit_ms: list[float] = []
        self.api_ms: list[float] = []
        self.failures = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop_event.is_set():
            n += 1
            try:
                t0 = time.perf_counter()
                call(self.bootstrap, ApiVersionsRequest(client_software_name="soak", client_software_version="1"), 3)
                t1 = time.perf_counter()
                r = call(self.bootstrap, OffsetCommitRequest(
                    group_id="soak-probe", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                    topics=[T(name=TOPIC, partitions=[P(partition_index=0, committed_offset=n,
                                                        committed_metadata="")])]), 8)
                t2 = time.perf_counter()
                if r.topics[0].partitions[0].error_code:
                    self.failures += 1
                self.api_ms.append((t1 - t0) * 1000)
                self.commit_ms.append((t2 - t1) * 1000)
            except (OSError, AssertionError):
                self.failures += 1
            self.stop_event.wait(0.1)

    def take(self) -> tuple[list[float], list[float]]:
        c, a = self.commit_ms, self.api_ms
        self.commit_ms, self.api_ms = [], []
        return c, a


class Feeder(threading.Thread):
    def __init__(self, bootstrap: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.rate = bootstrap, rate
        self.stop_event = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "log_level": 3})
        i = 0
        while not self.stop_event.is_set():
            p.produce(TOPIC, key=b"s%d" % i, value=b"v%d" % i)
            i += 1
            p.poll(1 / self.rate)
        p.flush(30)


class Group:
    def __init__(self, bootstrap: str, gid: str, lib: str) -> None:
        self.bootstrap, self.gid, self.lib = bootstrap, gid, lib
        self.members: list[Background] = []
        self.retired: list[Background] = []
        self.n = 0

    def join(self) -> None:
        self.n += 1
        self.members.append(python_member(self.lib, self.bootstrap, TOPIC, self.gid, name=f"{self.gid}-m{self.n}",
                                          session_timeout_ms=10_000, deadline=7 * 24 * 3600))

    def remove(self, kill: bool) -> None:
        m = self.members.pop(random.randrange(len(self.members)))
        if kill:
            m.kill()
        else:
            try:
                m.close(60)
            except AssertionError:
                m.kill()
        self.retired.append(m)

    def acked(self) -> dict[int, int]:
        """partition -> the highest offset a member was told is committed."""
        out: dict[int, int] = {}
        for m in self.members + self.retired:
            for e in m.events("committed"):
                for p, o in e["offsets"].items():
                    out[int(p)] = max(out.get(int(p), 0), o)
        return out

    def commits(self) -> int:
        return sum(len(m.events("committed")) for m in self.members + self.retired)


def fetched(bootstrap: str, gid: str) -> dict[int, int]:
    r = call(bootstrap, OffsetFetchRequest(group_id=gid, topics=None, require_stable=False), 7)
    return {p.partition_index: p.committed_offset for t in r.topics if t.name == TOPIC for p in t.partitions}


def lost(groups: list[Group], bootstrap: str) -> int:
    """Acknowledged commits above what the server returns (acks read before the fetch)."""
    n = 0
    for g in groups:
        acked = g.acked()
        got = fetched(bootstrap, g.gid)
        n += sum(1 for p, o in acked.items() if got.get(p, -1) < o)
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=20.0, help="records produced per second")
    ap.add_argument("--churn", type=float, default=2.0, help="seconds between random actions")
    args = ap.parse_args()
    random.seed(args.seed)

    proc, port, log_dir = start_kcoord({"num.partitions": str(PARTITIONS)})
    bootstrap = f"127.0.0.1:{port}"
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    admin.close()
    feeder, probe = Feeder(bootstrap, args.rate), Probe(bootstrap)
    feeder.start()
    probe.start()
    groups = [Group(bootstrap, f"soak-g{i:02d}", LIBS[i % len(LIBS)]) for i in range(args.groups)]
    for g in groups:
        g.join()
    with open("/proc/loadavg") as f:
        load0 = f.read().split()[:3]
    print(f"soak: {args.groups} groups on one server (pid {proc.pid}), {args.minutes:g} min, seed {args.seed}; "
          f"load average at start {' '.join(load0)}", flush=True)
    header = ("| min | members | joins | leaves | kills | commits acked | lost | commit p50/p99/max ms | "
              "ApiVersions p50/p99 ms | RSS MB | open fds | load |")
    print(header + "\n|" + "---|" * 12, flush=True)
    rows: list[tuple[float, int]] = []
    end = time.monotonic() + args.minutes * 60
    minute, lost_total = 0, 0
    counts = {"join": 0, "leave": 0, "kill": 0}
    next_minute = time.monotonic() + 60
    commits_before = 0
    try:
        while time.monotonic() < end:
            time.sleep(args.churn)
            g = random.choice(groups)
            action = random.choice(("join", "leave", "kill"))
            if action == "join" and len(g.members) < MAX_MEMBERS:
                g.join()
                counts["join"] += 1
            elif action in ("leave", "kill") and len(g.members) > MIN_MEMBERS:
                g.remove(kill=action == "kill")
                counts[action] += 1
            if time.monotonic() >= next_minute or time.monotonic() >= end:
                next_minute += 60
                minute += 1
                lost_total = lost(groups, bootstrap)
                commits = sum(g.commits() for g in groups)
                rss, fds = proc_figures(proc.pid)
                rows.append((rss, fds))
                cms, ams = probe.take()
                with open("/proc/loadavg") as f:
                    load = f.read().split()[0]
                print(f"| {minute} | {sum(len(g.members) for g in groups)} | {counts['join']} | {counts['leave']} | "
                      f"{counts['kill']} | {commits - commits_before} | {lost_total} | "
                      f"{pct(cms, .5):.1f} / {pct(cms, .99):.1f} / {max(cms, default=float('nan')):.1f} | "
                      f"{pct(ams, .5):.1f} / {pct(ams, .99):.1f} | {rss:.0f} | {fds} | {load} |", flush=True)
                commits_before = commits
                counts = dict.fromkeys(counts, 0)
    finally:
        probe.stop_event.set()
        feeder.stop_event.set()
        for g in groups:
            for m in g.members:
                m.kill()
        time.sleep(1)
        final_lost = lost(groups, bootstrap) if proc.poll() is None else -1
        stop(proc)
    if rows:
        first, last = rows[0], rows[-1]
        peak = max(r[0] for r in rows)
        print(f"\nRSS {first[0]:.0f} MB after minute 1, {last[0]:.0f} MB at the end, peak {peak:.0f} MB; "
              f"open fds {first[1]} -> {last[1]}; probe failures {probe.failures}; "
              f"commits lost: {final_lost}; statistics of RSS: median {statistics.median(r[0] for r in rows):.0f} MB")
    return 0 if final_lost == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
