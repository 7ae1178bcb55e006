"""`kcoord groups` and `kcoord offsets`: the coordinator's state rebuilt from the log.

Reads __consumer_offsets segments read-only (safe beside a running server) and replays them
through the same GroupCoordinator.replay the server uses at start-up, then prints the groups
(like kafka-consumer-groups --describe --state/--members) or the committed offsets.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from kcoord.protocol.coordinator_codec import CodecError, decode_record
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.clock import FakeClock
from kcoord.server.group.config import GroupConfig
from kcoord.server.group.coordinator import GroupCoordinator
from kcoord.storage.dump import read_records


def rebuild(log_dir: str) -> GroupCoordinator:
    parts = sorted(
        int(n.rpartition("-")[2])
        for n in os.listdir(log_dir)
        if n.startswith(OFFSETS_TOPIC + "-") and n.rpartition("-")[2].isdigit()
    )
    num = max(parts, default=49) + 1
    coordinator = GroupCoordinator(GroupConfig(), FakeClock(int(time.time() * 1000)), max(num, 1))
    for p in parts:
        coordinator.begin_loading(p)
        for _seg, _offset, kb, vb in read_records(os.path.join(log_dir, f"{OFFSETS_TOPIC}-{p}"), sys.stderr):
            if kb is None:
                continue
            try:
                record = decode_record(kb, vb)
            except CodecError as e:
                print(f"{_seg}: offset {_offset}: {e}", file=sys.stderr)
                continue
            if record is not None:
                coordinator.replay(record)
        coordinator.end_loading(p)
    return coordinator


def _group_row(coordinator: GroupCoordinator, g: Any) -> dict[str, Any]:
    """One group as `kcoord groups` shows it: a classic group's generation, protocol and leader;
    a consumer group's (KIP-848) or share group's (KIP-932) epochs, assignor and each member's
    epoch and partitions."""
    offsets = coordinator.offset_manager.count(g.group_id)
    if g.TYPE == "consumer":
        names = {m.topic_id: m.name for m in g.subscription_metadata.values()}

        def parts(a: dict) -> dict[str, list[int]]:
            return {names.get(t, str(t)): sorted(ps) for t, ps in a.items()}

        return {
            "group": g.group_id, "type": "consumer", "state": g.state_name(), "protocol_type": "consumer",
            "protocol": g.preferred_assignor() or "", "generation": g.group_epoch,
            "assignment_epoch": g.assignment_epoch, "leader": "",
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                 "client_host": m.client_host, "member_epoch": m.member_epoch, "state": m.state.name,
                 "subscribed_topics": list(m.subscribed_topic_names), "subscribed_regex": m.subscribed_topic_regex,
                 "assigned": parts(m.assigned), "target": parts(g.target_assignment.get(mid, {}))}
                for mid, m in g.members.items()
            ],
            "offsets": offsets,
        }
    if g.TYPE == "share":
        share_names = {tid: name for name, (tid, _) in g.subscription_metadata.items()}

        def share_parts(a: dict) -> dict[str, list[int]]:
            return {share_names.get(t, str(t)): sorted(ps) for t, ps in a.items()}

        return {
            "group": g.group_id, "type": "share", "state": g.state_name(), "protocol_type": "share",
            "protocol": "simple", "generation": g.group_epoch, "assignment_epoch": g.assignment_epoch, "leader": "",
            "members": [
                {"member_id": m.member_id, "group_instance_id": None, "client_id": m.client_id,
                 "client_host": m.client_host, "member_epoch": m.member_epoch,
                 "subscribed_topics": list(m.subscribed_topic_names), "assigned": share_parts(m.assigned),
                 "target": share_parts(g.target_assignment.get(mid, {}))}
                for mid, m in g.members.items()
            ],
            "offsets": offsets,
        }
    return {
        "group": g.group_id, "type": "classic", "state": g.state.value, "protocol_type": g.protocol_type or "",
        "protocol": g.protocol_name or "", "generation": g.generation_id, "leader": g.leader_id or "",
        "members": [
            {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
             "client_id": m.client_id, "client_host": m.client_host}
            for m in g.members.values()
        ],
        "offsets": offsets,
    }


def _ts(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "-"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _print_table(rows: list[list[Any]], headers: list[str]) -> None:
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def main(argv: list[str]) -> int:
    command, rest = argv[0], argv[1:]
    p = argparse.ArgumentParser(prog=f"kcoord {command}", description=__doc__.splitlines()[0])
    p.add_argument("--log-dir", default="./data", help="the server's log.dirs (default ./data)")
    p.add_argument("--group", action="append", help="only these groups")
    p.add_argument("--json", action="store_true", help="JSON lines")
    args = p.parse_args(rest)
    if not os.path.isdir(args.log_dir):
        print(f"kcoord {command}: {args.log_dir}: no such directory", file=sys.stderr)
        return 1
    import logging

    logging.disable(logging.INFO)  # the coordinator's loading chatter is not the output
    coordinator = rebuild(args.log_dir)
    groups = sorted(coordinator.groups(), key=lambda g: g.group_id)
    if args.group:
        groups = [g for g in groups if g.group_id in set(args.group)]
    if command == "groups":
        rows = []
        for g in groups:
            row = _group_row(coordinator, g)
            if args.json:
                print(json.dumps(row))
            else:
                rows.append([row["group"], row["state"], row["protocol_type"] or "-", row["protocol"] or "-",
                             row["generation"], len(row["members"]), row["offsets"], row["leader"] or "-"])
        if not args.json:
            _print_table(rows, ["GROUP", "STATE", "PROTOCOL-TYPE", "PROTOCOL", "GENERATION", "MEMBERS",
                                "OFFSETS", "LEADER"])
        return 0
    rows = []
    for g in groups:
        for topic, partition, v in sorted(coordinator.committed_offsets(g.group_id), key=lambda x: (x[0], x[1])):
            if args.json:
                print(json.dumps({"group": g.group_id, "topic": topic, "partition": partition,
                                  "offset": v.offset, "leader_epoch": v.leader_epoch,
                                  "metadata": v.metadata, "commit_timestamp": v.commit_timestamp,
                                  "expire_timestamp": v.expire_timestamp}))
            else:
                rows.append([g.group_id, topic, partition, v.offset, v.metadata or "-", _ts(v.commit_timestamp)])
    if not args.json:
        _print_table(rows, ["GROUP", "TOPIC", "PARTITION", "OFFSET", "METADATA", "COMMITTED"])
    return 0
