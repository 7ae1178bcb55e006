"""The checker: what a history and the cluster's final state must satisfy.

| check | anomaly |
|---|---|
| every acknowledged send is in its partition's final log | lost |
| no record is in the logs twice (the idempotent producer) | duplicate |
| a partition's records are in the order they were sent | out-of-order |
| every record in the logs was sent | phantom |
| every acknowledged commit is the group's final committed offset, or a commit not known to have ended before it set a value at least as high | lost-commit |
| no acknowledged commit is lower than one acknowledged before it was invoked | stale-commit |
| one leader per partition per leader epoch, over every observation | split-leader |
| one coordinator per group per epoch of its __consumer_offsets partition | split-coordinator |
| at the end every partition's ISR is all its replicas | isr-not-full |
| a graceful stop (SIGTERM) ends the process by itself (the nemesis SIGKILLs it after a deadline: exit -9) | stop-hung |
| the transactional copy (read_committed) holds each input record below the copier's committed offsets exactly once, and nothing else | txn-lost, txn-duplicate, txn-extra |

Sends are values "P:SEQ" (partition P, SEQ increasing per partition in send order); a commit's
value is {"group": G, "offsets": {partition: offset}}; observations are
leader (topic, partition, epoch, leader) and coordinator (group, epoch, node).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from kcoord.testing.jepsen.history import History, Op

CLIENT_OPS = ("send", "commit", "txn")
FAULTS = ("kill", "stop", "cut-off")  # a nemesis operation that begins a fault (start, heal end one)


@dataclass(frozen=True)
class Anomaly:
    kind: str
    detail: str


@dataclass
class Final:
    """The cluster's state read after the run."""
    reads: dict[int, list[str]]                                 # the produced topic: partition -> values by offset
    committed: dict[str, dict[int, int]] = field(default_factory=dict)   # group -> partition -> offset
    isr: dict[tuple[str, int], tuple[list[int], list[int]]] = field(default_factory=dict)  # -> (replicas, isr)
    txn_committed: dict[int, int] | None = None                 # the copier group's offsets on the input
    txn_output: list[str] | None = None                         # read_committed copy: "copy-" + input value


@dataclass
class Report:
    counts: dict[str, int]
    anomalies: list[Anomaly]

    @property
    def valid(self) -> bool:
        return not self.anomalies

    def of(self, kind: str) -> list[Anomaly]:
        return [a for a in self.anomalies if a.kind == kind]

    def summary(self) -> str:
        lines = ["jepsen: " + ", ".join(f"{k} = {v}" for k, v in self.counts.items())]
        by_kind = Counter(a.kind for a in self.anomalies)
        lines.append("anomalies: " + (", ".join(f"{k} = {n}" for k, n in sorted(by_kind.items())) or "none"))
        lines += [f"  {a.kind}: {a.detail}" for a in self.anomalies[:40]]
        return "\n".join(lines)


def _seq(value: str) -> tuple[int, int]:
    p, s = value.split(":")
    return int(p), int(s)


def check_writes(history: History, reads: dict[int, list[str]]) -> tuple[list[Anomaly], dict[str, int]]:
    out: list[Anomaly] = []
    sends = history.pairs("send")
    invoked = {i.value for i, _ in sends}
    acked = [i.value for i, c in sends if c is not None and c.type == "ok"]
    present: Counter[str] = Counter(v for values in reads.values() for v in values)
    lost = [v for v in acked if _seq(v)[0] not in reads or present[v] == 0]
    for v in lost:
        out.append(Anomaly("lost", f"acknowledged record {v} is not in partition {_seq(v)[0]}"))
    dups = sorted(v for v, n in present.items() if n > 1)
    for v in dups:
        out.append(Anomaly("duplicate", f"record {v} is in the log {present[v]} times"))
    for p, values in sorted(reads.items()):
        last = None
        for off, v in enumerate(values):
            if v not in invoked:
                out.append(Anomaly("phantom", f"partition {p} offset {off}: {v!r} was never sent"))
                continue
            vp, s = _seq(v)
            if vp != p:
                out.append(Anomaly("phantom", f"partition {p} offset {off}: {v} was sent to partition {vp}"))
            elif last is not None and s <= last:
                out.append(Anomaly("out-of-order", f"partition {p} offset {off}: {v} after {p}:{last}"))
            last = s if last is None else max(last, s)
    return out, {"acknowledged": len(acked), "lost": len(lost), "duplicates": len(dups),
                 "unknown sends": sum(1 for _, c in sends if c is None or c.type == "info")}


def check_commits(history: History, committed: dict[str, dict[int, int]]) -> tuple[list[Anomaly], int]:
    out: list[Anomaly] = []
    # per (group, partition): (invoke time, completion time or None, type, offset)
    commits: dict[tuple[str, int], list[tuple[float, float | None, str, int]]] = defaultdict(list)
    ok = 0
    for inv, comp in history.pairs("commit"):
        kind = comp.type if comp is not None else "info"
        ok += kind == "ok"
        for p, o in inv.value["offsets"].items():
            commits[(inv.value["group"], int(p))].append(
                (inv.time, comp.time if comp is not None and kind != "info" else None, kind, int(o)))
    for (group, p), ops in sorted(commits.items()):
        acked = [c for c in ops if c[2] == "ok"]
        # stale: in invocation order, against the highest offset acknowledged before each invocation
        done = sorted((c[1], c[3]) for c in acked if c[1] is not None)
        high, j = -1, 0
        for t_inv, _, _, o in sorted(acked):
            while j < len(done) and done[j][0] < t_inv:
                high = max(high, done[j][1])
                j += 1
            if o < high:
                out.append(Anomaly("stale-commit", f"group {group} partition {p}: commit of {o} invoked at "
                                                   f"{t_inv:.2f}s acknowledged after {high} was"))
        final = committed.get(group, {}).get(p, -1)
        # the last moment a commit that may have set the final offset ended (inf: unknown)
        setters = [c[1] if c[1] is not None else float("inf") for c in ops if c[2] != "fail" and c[3] == final]
        last_set = max(setters, default=float("-inf"))
        for t_inv, _, _, o in acked:
            if final == o:
                continue
            if final < o or last_set < t_inv:
                out.append(Anomaly("lost-commit", f"group {group} partition {p}: acknowledged commit of {o} "
                                                  f"(invoked {t_inv:.2f}s) but the committed offset is {final}"))
                break
    return out, ok


def check_epochs(history: History) -> list[Anomaly]:
    out: list[Anomaly] = []
    leaders: dict[tuple[str, int, int], set[int]] = defaultdict(set)
    coordinators: dict[tuple[str, int], set[int]] = defaultdict(set)
    for op in history.ops:
        if op.type != "ok":
            continue
        if op.f == "leader":
            topic, p, epoch, leader = op.value
            if leader >= 0:
                leaders[(topic, p, epoch)].add(leader)
        elif op.f == "coordinator":
            group, epoch, node = op.value
            coordinators[(group, epoch)].add(node)
    for (topic, p, epoch), who in sorted(leaders.items()):
        if len(who) > 1:
            out.append(Anomaly("split-leader", f"{topic}-{p} leader epoch {epoch}: led by {sorted(who)}"))
    for (group, epoch), who in sorted(coordinators.items()):
        if len(who) > 1:
            out.append(Anomaly("split-coordinator", f"group {group} epoch {epoch}: coordinated by {sorted(who)}"))
    return out


def check_isr(isr: dict[tuple[str, int], tuple[list[int], list[int]]]) -> list[Anomaly]:
    return [Anomaly("isr-not-full", f"{t}-{p}: ISR {sorted(i)} of replicas {sorted(r)}")
            for (t, p), (r, i) in sorted(isr.items()) if set(i) != set(r)]


def check_stops(history: History) -> list[Anomaly]:
    return [Anomaly("stop-hung", f"node {op.value['node']} did not exit after SIGTERM (exit {op.value['exit']}) "
                                 f"at {op.time:.1f}s") for op in history.ops
            if op.type == "ok" and op.f == "stop" and isinstance(op.value, dict) and op.value.get("exit", 0) != 0]


def check_txn(reads: dict[int, list[str]], committed: dict[int, int], output: list[str]) -> tuple[list[Anomaly], int]:
    out: list[Anomaly] = []
    expected = {v for p, values in reads.items() for v in values[:max(committed.get(p, 0), 0)]}
    copies = Counter(v[len("copy-"):] if v.startswith("copy-") else v for v in output)
    for v in sorted(expected - set(copies)):
        out.append(Anomaly("txn-lost", f"input {v} is below the copier's committed offset but not in the output"))
    for v, n in sorted(copies.items()):
        if n > 1:
            out.append(Anomaly("txn-duplicate", f"input {v} copied {n} times"))
        if v not in expected:
            out.append(Anomaly("txn-extra", f"{v} is in the output but not below the copier's committed offsets"))
    return out, len(expected)


def check(history: History, final: Final) -> Report:
    anomalies, counts = check_writes(history, final.reads)
    commit_anomalies, commits_ok = check_commits(history, final.committed)
    anomalies += commit_anomalies + check_epochs(history) + check_isr(final.isr) + check_stops(history)
    ops: list[Op] = history.ops
    result = {
        "operations": sum(1 for op in ops if op.type == "invoke" and op.f in CLIENT_OPS),
        "faults": sum(1 for op in ops if op.type == "ok" and op.f in FAULTS),
        **counts,
        "commits acknowledged": commits_ok,
        "observations": sum(1 for op in ops if op.type == "ok" and op.f in ("leader", "coordinator")),
    }
    if final.txn_output is not None:
        txn_anomalies, copied = check_txn(final.reads, final.txn_committed or {}, final.txn_output)
        anomalies += txn_anomalies
        result["transactional copies"] = copied
        result["transactions acknowledged"] = sum(1 for _, c in history.pairs("txn") if c is not None and c.type == "ok")
    return Report(result, anomalies)
