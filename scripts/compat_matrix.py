#!/usr/bin/env python3
"""Rewrite the client compatibility matrix of docs/compatibility.md from the last test run.

tests/conftest.py writes .cache/compat-results.json at the end of a pytest session that ran at
least one test marked `@pytest.mark.compat(client, *features)`. Every cell of the table comes
from those results: "yes" when all its tests passed, "FAILED" when any failed, "—" when no test
for it ran. The section between the page's compat-matrix markers is replaced; nothing else.

    python -m pytest -q tests/integration && python scripts/compat_matrix.py   # or: make compat
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / ".cache" / "compat-results.json"
DOC = ROOT / "docs" / "compatibility.md"
START, END = "<!-- compat-matrix:start -->", "<!-- compat-matrix:end -->"

# (marker name, row label)
CLIENTS = [
    ("java", "Java kafka-clients 3.9"),
    ("java4", "Java kafka-clients 4.3"),
    ("confluent-kafka", "confluent-kafka (librdkafka)"),
    ("kcat", "kcat (librdkafka 2.0)"),
    ("kafka-python", "kafka-python 3"),
    ("aiokafka", "aiokafka"),
    ("kafkajs", "kafkajs"),
    ("sarama", "sarama 1.22 (Go, Debian)"),
]
FEATURES = ["bootstrap", "group join", "static membership", "rebalance on leave", "commit/fetch", "consume",
            "restart resume", "read __consumer_offsets", "transactions", "consumer protocol (KIP-848)",
            "online migration (KIP-848)", "SASL and TLS", "share groups"]

# Why a cell has no test; printed only for cells that come out "—".
NOT_TESTED_WHY = {
    ("kafkajs", "static membership"): "kafkajs 2.2.4 has no group.instance.id",
    ("kcat", "transactions"): "kcat has no transactional producer",
    ("java", "consumer protocol (KIP-848)"): "the 3.9 client's group.protocol=consumer predates the "
                                             "protocol's final form (Kafka 4.0); the 4.3 row has it",
    ("java4", "read __consumer_offsets"): "no 4.3 test: the 3.9 row's reader covers it",
    ("java4", "SASL and TLS"): "no 4.3 test: the 3.9 row's clients cover it",
    ("kcat", "consumer protocol (KIP-848)"): "librdkafka 2.0 predates KIP-848",
    ("kafka-python", "consumer protocol (KIP-848)"): "kafka-python 3 speaks only the classic protocol",
    ("aiokafka", "consumer protocol (KIP-848)"): "aiokafka speaks only the classic protocol",
    ("kafkajs", "consumer protocol (KIP-848)"): "kafkajs 2.2.4 speaks only the classic protocol",
    ("java", "online migration (KIP-848)"): "no test: the 3.9 client's group.protocol=consumer predates the "
                                            "protocol's final form",
    ("java4", "online migration (KIP-848)"): "no test: confluent-kafka's row switches protocols, with "
                                             "kafka-python and aiokafka members staying classic",
    ("kcat", "online migration (KIP-848)"): "librdkafka 2.0 predates KIP-848",
    ("kafkajs", "online migration (KIP-848)"): "no kafkajs test: a classic member's part, as kafka-python's",
    ("sarama", "static membership"): "sarama 1.22 has no group.instance.id",
    ("sarama", "transactions"): "sarama 1.22 has no transactional producer",
    ("sarama", "consumer protocol (KIP-848)"): "sarama speaks only the classic protocol",
    ("sarama", "online migration (KIP-848)"): "no sarama test: the migration test counts a record read twice "
                                               "only after a failed synchronous commit, and sarama 1.22 commits "
                                               "in the background",
    ("java", "share groups"): "kafka-clients 3.9 has no share consumer (KafkaShareConsumer came in 4.0)",
    ("kcat", "share groups"): "kcat and librdkafka 2.0 have no share consumer",
    ("kafka-python", "share groups"): "kafka-python 3 has no share consumer",
    ("aiokafka", "share groups"): "aiokafka has no share consumer",
    ("kafkajs", "share groups"): "kafkajs 2.2.4 has no share consumer",
    ("sarama", "share groups"): "sarama has no share consumer",
}


def cells(results: list[dict]) -> dict[tuple[str, str], list[str]]:
    known_clients = {c for c, _ in CLIENTS}
    out: dict[tuple[str, str], list[str]] = {}
    for r in results:
        if r["client"] not in known_clients:
            raise SystemExit(f"{r['nodeid']}: unknown client {r['client']!r} (known: {sorted(known_clients)})")
        for f in r["features"]:
            if f not in FEATURES:
                raise SystemExit(f"{r['nodeid']}: unknown feature {f!r} (known: {FEATURES})")
            out.setdefault((r["client"], f), []).append(r["outcome"])
    return out


def cell_text(outcomes: list[str] | None) -> str:
    if not outcomes:
        return "—"
    return "FAILED" if "failed" in outcomes else "yes"


def render(data: dict) -> str:
    got = cells(data["results"])
    lines = ["| client | " + " | ".join(FEATURES) + " |", "|---" * (len(FEATURES) + 1) + "|"]
    for client, label in CLIENTS:
        lines.append(f"| {label} | " + " | ".join(cell_text(got.get((client, f))) for f in FEATURES) + " |")
    tests = {r["nodeid"]: r["outcome"] for r in data["results"]}
    failed = sum(1 for o in tests.values() if o == "failed")
    lines += ["", f"Generated by `scripts/compat_matrix.py` from `{data['command']}` on {data['generated'][:10]}: "
              f"{len(tests)} marked tests, {len(tests) - failed} passed, {failed} failed. "
              "yes = every test of that cell passed, FAILED = one failed, — = no test ran for it."]
    missing = [(c, label, f) for c, label in CLIENTS for f in FEATURES if not got.get((c, f))]
    if missing:
        lines += ["", "Not tested:"]
        for c, label, f in missing:
            why = NOT_TESTED_WHY.get((c, f))
            lines.append(f"- {label}, {f}" + (f": {why}." if why else "."))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--doc", type=Path, default=DOC, help="the page holding the matrix")
    ap.add_argument("--check", action="store_true", help="exit 1 if the page's section differs, write nothing")
    args = ap.parse_args(argv)
    if not args.results.exists():
        print(f"{args.results} not found: run `python -m pytest -q tests/integration` first", file=sys.stderr)
        return 2
    data = json.loads(args.results.read_text())
    text = args.doc.read_text()
    if text.count(START) != 1 or text.count(END) != 1 or text.index(START) > text.index(END):
        print(f"{args.doc}: needs exactly one {START} ... {END} section", file=sys.stderr)
        return 2
    head, rest = text.split(START)
    _, tail = rest.split(END)
    table = render(data)
    new = f"{head}{START}\n{table}\n{END}{tail}"
    print(table)
    if args.check:
        return 0 if new == text else 1
    if new != text:
        args.doc.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
