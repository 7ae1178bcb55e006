"""The control API's cost and its reset.

1. Heartbeat and durable OffsetCommit from 100 connections (one request outstanding each) on
   three servers in one run: the bare uvloop ceiling (bench/_bare_server.py: echo for
   Heartbeat, append + group-committed fdatasync for OffsetCommit), kcoord with the control
   API off, and kcoord with it on (kcoord.control.listener set, nothing injected). Each
   server's connections are made once and kept; many short windows load one server at a
   time, the order alternated every round (off and on always back to back, swapped each
   round; the ceiling first or last), and for each window both the throughput and the
   server process's own CPU time per request (all its threads, from the scheduler's
   nanosecond counters): on a shared machine the wall-clock throughput follows whatever else
   runs, the CPU a request costs the server far less. The on/off comparison is made per round
   (adjacent windows), and printed as the median of those ratios with a distribution-free
   95% confidence interval of that median. Target: on within 3% of off.
2. POST /reset of a server holding 100 topics and 100 groups with committed offsets, timed by
   the client (HTTP round trip included) and by the server's log line. Target: <= 50 ms.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import statistics
import tempfile
import time
from urllib.request import Request, urlopen

from _util import (
    SyncClient,
    encode_request,
    free_port,
    process_cpu_s,
    start_bare,
    start_kcoord,
    stop,
    table,
    take_frames,
)
from bench_commit import commit_frame
from bench_heartbeat import join
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import HeartbeatRequest, OffsetCommitRequest

COMMIT_TOPIC = "bench-commit-topic"  # bench_commit's frames name it
SERVERS = ("ceiling", "off", "on")


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


def machine_busy_s() -> float:
    """CPU seconds every process on the machine has used so far (/proc/stat, all cores)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # all but idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def median_ci(xs: list[float]) -> tuple[float, float, float]:
    """The median and a distribution-free 95% confidence interval of it (order statistics
    of the binomial(n, 1/2)); the interval is the whole range when n is below 6."""
    s, n = sorted(xs), len(xs)
    k = 0  # the largest k with P(Binomial(n, 1/2) < k) <= 2.5%
    while sum(math.comb(n, i) for i in range(k + 1)) / 2**n <= 0.025:
        k += 1
    return statistics.median(s), s[k - 1] if k else s[0], s[n - k] if k else s[-1]


def iqr_pct(xs: list[float]) -> float:
    """The interquartile range as a percentage of the median: the spread of the samples."""
    if len(xs) < 4:
        return float("nan")
    q = statistics.quantiles(xs, n=4)
    return 100 * (q[2] - q[0]) / statistics.median(xs)


def orders(rounds: int) -> list[tuple[str, ...]]:
    """Every round measures all three servers; off and on are back to back and swap places
    each round, the ceiling goes first or last every other pair of rounds."""
    out = []
    for i in range(rounds):
        pair = ("off", "on") if i % 2 == 0 else ("on", "off")
        out.append(("ceiling", *pair) if (i // 2) % 2 == 0 else (*pair, "ceiling"))
    return out


class _Conn(asyncio.Protocol):
    """One connection with one request outstanding while its target is in a window."""

    def __init__(self, frame: bytes, target: Target) -> None:
        self.frame = frame
        self.target = target
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.outstanding = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self) -> None:
        self.outstanding += 1
        self.target.outstanding += 1
        self.transport.write(self.frame)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        n = take_frames(self.buf)
        if not n:
            return
        t = self.target
        t.answered += n
        self.outstanding -= n
        t.outstanding -= n
        if t.active:
            self.outstanding += n
            t.outstanding += n
            self.transport.write(self.frame * n)  # type: ignore[union-attr]
        elif t.outstanding == 0 and t.drained is not None and not t.drained.done():
            t.drained.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.target.active:
            raise RuntimeError(f"the server closed a connection: {exc!r}")


class Target:
    """One server's connections, made once and kept: each window loads it alone, so the
    windows of different servers can follow each other closely (no connection set-up
    between them) and many of them fit in a run."""

    def __init__(self, port: int, pid: int, frames: list[bytes]) -> None:
        self.port, self.pid, self.frames = port, pid, frames
        self.conns: list[_Conn] = []
        self.active = False
        self.answered = 0
        self.outstanding = 0
        self.drained: asyncio.Future[None] | None = None

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        for f in self.frames:
            _, conn = await loop.create_connection(lambda f=f: _Conn(f, self), "127.0.0.1", self.port)
            self.conns.append(conn)

    def start(self) -> None:
        self.active = True
        for c in self.conns:
            c.send()

    def mark(self) -> tuple[int, float, float]:
        return self.answered, time.monotonic(), process_cpu_s(self.pid)

    async def stop(self) -> None:
        """Stop sending; returns once the last answers have landed."""
        self.active = False
        self.drained = asyncio.get_running_loop().create_future()
        if self.outstanding:
            await asyncio.wait_for(self.drained, 30)

    @staticmethod
    def rates(m0: tuple[int, float, float], m1: tuple[int, float, float]) -> tuple[float, float]:
        """(requests/s, server CPU microseconds per request) between two marks."""
        n = max(m1[0] - m0[0], 1)
        return n / (m1[1] - m0[1]), (m1[2] - m0[2]) / n * 1e6

    async def window(self, warmup: float, seconds: float) -> tuple[float, float]:
        """This server alone: (requests/s, server CPU microseconds per request) over `seconds`
        after `warmup`."""
        self.start()
        await asyncio.sleep(warmup)
        m0 = self.mark()
        await asyncio.sleep(seconds)
        m1 = self.mark()
        await self.stop()
        return self.rates(m0, m1)

    @staticmethod
    async def together(targets: list[Target], warmup: float, seconds: float) -> list[tuple[float, float]]:
        """The same, with these servers loaded at once (each with its own connections): they
        share whatever else the machine is doing at that moment."""
        for t in targets:
            t.start()
        await asyncio.sleep(warmup)
        m0 = [t.mark() for t in targets]
        await asyncio.sleep(seconds)
        m1 = [t.mark() for t in targets]
        for t in targets:
            await t.stop()
        return [t.rates(a, b) for t, a, b in zip(targets, m0, m1, strict=True)]

    def close(self) -> None:
        for c in self.conns:
            if c.transport is not None:
                c.transport.close()


async def _measure(ports: dict[str, int], pids: dict[str, int], frames: dict[str, list[bytes]],
                   seconds: float, warmup: float, rounds: int) -> dict[str, list[tuple[float, float]]]:
    targets = {k: Target(ports[k], pids[k], frames[k]) for k in SERVERS}
    for t in targets.values():
        await t.connect()
    try:
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in (*SERVERS, "off+", "on+")}
        for order in orders(rounds):
            for which in order:
                samples[which].append(await targets[which].window(warmup, seconds))
            pair = ("off", "on") if len(samples["off"]) % 2 else ("on", "off")  # which one starts first
            for which, sample in zip(pair, await Target.together([targets[k] for k in pair], warmup, seconds),
                                     strict=True):
                samples[which + "+"].append(sample)
        return samples
    finally:
        for t in targets.values():
            t.close()


def measure(what: str, ports: dict[str, int], pids: dict[str, int], frames: dict[str, list[bytes]],
            seconds: float, warmup: float, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(requests/s, server CPU microseconds per request) of every window, by server."""
    import uvloop

    load0, busy0 = loadavg(), machine_busy_s()
    own0 = time.process_time() + sum(process_cpu_s(p) for p in pids.values())
    t0 = time.monotonic()
    samples = uvloop.run(_measure(ports, pids, frames, seconds, warmup, rounds))
    wall = time.monotonic() - t0
    own = time.process_time() + sum(process_cpu_s(p) for p in pids.values()) - own0
    others = (machine_busy_s() - busy0 - own) / wall
    print(f"{what}: load average {load0} before, {loadavg()} after; other processes used "
          f"{max(others, 0):.2f} of {os.cpu_count()} cores meanwhile ({wall:.0f} s)")
    return samples


NAMES = {"ceiling": "bare uvloop (ceiling)", "off": "kcoord, control API off", "on": "kcoord, control API on",
         "off+": "off, side by side with on", "on+": "on, side by side with off"}


def report(samples: dict[str, list[tuple[float, float]]]) -> list[tuple[str, float, float, float, float]]:
    """Prints the table and the per-round on/off ratios; returns, for each way of pairing
    them, the throughput ratio's median and lower CI bound and the CPU-per-request ratio's
    median and upper CI bound (percent)."""
    med = {k: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v)) for k, v in samples.items()}
    rows = []
    for k in NAMES:
        rates = [r for r, _ in samples[k]]
        cpus = [c for _, c in samples[k]]
        rows.append([NAMES[k], med[k][0], f"{iqr_pct(rates):.1f}%", f"{100 * med[k][0] / med['ceiling'][0]:.1f}%",
                     med[k][1], f"{iqr_pct(cpus):.1f}%", f"{100 * med[k][1] / med['ceiling'][1]:.1f}%"])
    print(table(["server (windows)", "req/s", "spread (IQR)", "% of ceiling", "CPU us/req", "spread (IQR)",
                 "% of ceiling"], rows))
    out = []
    for how, off_key, on_key in (("alternating", "off", "on"), ("side by side", "off+", "on+")):
        pairs = list(zip(samples[off_key], samples[on_key], strict=True))
        rate_ratio = [100 * on[0] / off[0] for off, on in pairs]
        cpu_ratio = [100 * on[1] / off[1] for off, on in pairs]
        r_med, r_lo, r_hi = median_ci(rate_ratio)
        c_med, c_lo, c_hi = median_ci(cpu_ratio)
        print(f"on / off, {how}, per round: median [95% CI of the median] throughput {r_med:.1f}% "
              f"[{r_lo:.1f}, {r_hi:.1f}], CPU per request {c_med:.1f}% [{c_lo:.1f}, {c_hi:.1f}], "
              f"spread (IQR) {iqr_pct(rate_ratio):.1f}% / {iqr_pct(cpu_ratio):.1f}%")
        print("  throughput: " + " ".join(f"{x:.0f}" for x in rate_ratio))
        print("  CPU/req:    " + " ".join(f"{x:.0f}" for x in cpu_ratio))
        out.append((how, r_med, r_lo, c_med, c_hi))
    print()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=1.0, help="each measured window")
    ap.add_argument("--warmup", type=float, default=0.25, help="load before each window is measured")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--resets", type=int, default=9)
    args = ap.parse_args()

    control_port = free_port()
    off, off_port, _ = start_kcoord()
    on, on_port, _ = start_kcoord({"kcoord.control.listener": f"http://127.0.0.1:{control_port}"})
    workdir = tempfile.mkdtemp(prefix="bare-control-")
    echo, echo_port = start_bare("echo")
    append, append_port = start_bare("append", workdir)
    try:
        hb = {k: heartbeat_frames(p, args.connections) for k, p in (("off", off_port), ("on", on_port))}
        hb["ceiling"] = hb["off"]
        for p in (off_port, on_port):
            create_topics(p, [COMMIT_TOPIC], args.connections)
        commits = [commit_frame(i, 1000 + i) for i in range(args.connections)]
        print(f"Control API on (nothing injected) vs off, beside the bare uvloop ceiling: {args.connections} "
              f"connections, one request outstanding each, {args.rounds} rounds of {args.seconds:g} s windows "
              f"(after {args.warmup:g} s of warm-up each), order alternated every round; medians over the rounds, "
              "spread = interquartile range / median; CPU = the server process's own CPU time (all threads) "
              "per request answered in the window")
        print()
        verdicts: list[tuple[str, str, float, float, float, float]] = []
        for what, ports, frames in (
            ("Heartbeat v4", {"ceiling": echo_port, "off": off_port, "on": on_port}, hb),
            ("OffsetCommit v8 (durable, one __consumer_offsets partition)",
             {"ceiling": append_port, "off": off_port, "on": on_port}, {k: commits for k in SERVERS}),
        ):
            pids = {"ceiling": (echo if ports["ceiling"] == echo_port else append).pid, "off": off.pid, "on": on.pid}
            samples = measure(what, ports, pids, frames, args.seconds, args.warmup, args.rounds)
            verdicts += [(what, *v) for v in report(samples)]
        for what, how, r_med, r_lo, c_med, c_hi in verdicts:
            print(f"target: on within 3% of off -> {what}, {how}: throughput {'met' if r_med >= 97.0 else 'NOT met'} "
                  f"(median {r_med:.1f}%, {'resolved' if r_lo >= 97.0 else 'not resolved from noise'} at 95%); "
                  f"CPU per request {'met' if c_med <= 103.0 else 'NOT met'} "
                  f"(median {c_med:.1f}%, {'resolved' if c_hi <= 103.0 else 'not resolved from noise'} at 95%)")
        print()

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
        for proc in (off, on, echo, append):
            stop(proc)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
