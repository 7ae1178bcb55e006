"""kafka-share-groups.sh's offsets actions, as Kafka's ShareGroupCommand: --describe --offsets
(DescribeShareGroupOffsets: each share partition's start offset and lag), --reset-offsets
(--to-earliest / --to-latest / --to-datetime; a dry run unless --execute; AlterShareGroupOffsets),
--delete (DeleteGroups) and --delete-offsets --topic (DeleteShareGroupOffsets)."""
from __future__ import annotations

import sys
from typing import Any

from kafka.protocol.admin.groups import DeleteGroupsRequest

from kcoord.protocol.share_messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
)
from kcoord.server.kafkatools.consumer_groups import Service, parse_datetime, print_reset_plan
from kcoord.server.kafkatools.wire import Client, KafkaCallError, check

EARLIEST, LATEST = -2, -1  # ListOffsets timestamps
_DG = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
_DT = _DG.DescribeShareGroupOffsetsRequestTopic
_AT = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
_AP = _AT.AlterShareGroupOffsetsRequestPartition
_XT = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic


def print_error(msg: str) -> None:
    print("\nError: " + msg)


def _members(client: Client, gid: str) -> int:
    """How many members the share group has (0 when the group coordinator does not know it: its
    offsets may still be set, which creates it)."""
    resp = client.to_coordinator(gid, ShareGroupDescribeRequest, group_ids=[gid], include_authorized_operations=False)
    g = resp.groups[0]
    if g.error_code == 69:
        return 0
    check(g.error_code, g.error_message)
    return len(g.members)


def share_offsets(client: Client, gid: str, topics: list[str] | None = None) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (start offset, leader epoch, lag) of the group's share partitions
    (all that have state, or the partitions of `topics`)."""
    req_topics = None
    if topics is not None:
        meta = client.metadata(topics)
        req_topics = [_DT(topic_name=t, partitions=[p.partition for p in meta[t].partitions] if t in meta else [])
                      for t in topics]
    resp = client.to_coordinator(gid, DescribeShareGroupOffsetsRequest, groups=[_DG(group_id=gid, topics=req_topics)])
    g = resp.groups[0]
    check(g.error_code, g.error_message)
    out = {}
    for t in g.topics:
        for p in t.partitions:
            check(p.error_code, p.error_message)
            out[(t.topic_name, p.partition_index)] = (p.start_offset, p.leader_epoch, getattr(p, "lag", -1))
    return out


def describe_offsets(client: Client, gid: str, verbose: bool) -> None:
    offsets = share_offsets(client, gid)
    if not offsets:
        print(f"\nShare group '{gid}' has no offset information.")
        return
    rows = []
    for (t, p), (start, epoch, lag) in sorted(offsets.items()):
        row = [gid, t, str(p)]
        if verbose:
            row.append(str(epoch) if epoch >= 0 else "-")
        row += [str(start) if start >= 0 else "-", str(lag) if lag >= 0 else "-"]
        rows.append(row)
    header = ["GROUP", "TOPIC", "PARTITION"] + (["LEADER-EPOCH"] if verbose else []) + ["START-OFFSET", "LAG"]
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]
    fmt = " ".join(f"{{:<{w}}}" for w in widths[:-1]) + " {}"
    print()
    print(fmt.format(*header))
    for r in rows:
        print(fmt.format(*r))


def reset_offsets(client: Client, o: Any, gid: str) -> dict[tuple[str, int], int]:
    """The plan for one group (printed by the caller); AlterShareGroupOffsets with --execute."""
    if _members(client, gid):
        print_error(f"Share group '{gid}' is not empty.")
        return {}
    if o.all_topics:
        parts = sorted(share_offsets(client, gid))
    else:
        parts = []
        meta = client.metadata(sorted({t.partition(":")[0] for t in o.topic}))
        for spec in o.topic:
            name, _, plist = spec.partition(":")
            if name not in meta or meta[name].error:
                raise KafkaCallError(meta[name].error if name in meta else 3)
            known = sorted(p.partition for p in meta[name].partitions)
            parts += [(name, int(x)) for x in plist.split(",")] if plist else [(name, p) for p in known]
    if o.to_earliest:
        ts = EARLIEST
    elif o.to_latest:
        ts = LATEST
    else:
        ts = parse_datetime(o.to_datetime)
    plan = Service(client, o).log_offsets(parts, ts)
    if o.to_datetime is not None:  # no record at or after the time: the log end
        missing = [tp for tp in parts if tp not in plan]
        plan.update(Service(client, o).log_offsets(missing, LATEST))
    if o.execute and plan:
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), off in sorted(plan.items()):
            by_topic.setdefault(t, []).append((p, off))
        resp = client.to_coordinator(gid, AlterShareGroupOffsetsRequest, group_id=gid, topics=[
            _AT(topic_name=t, partitions=[_AP(partition_index=p, start_offset=off) for p, off in ps])
            for t, ps in by_topic.items()])
        check(resp.error_code, resp.error_message)
        for t in resp.responses:
            for p in t.partitions:
                check(p.error_code, p.error_message)
    return plan


def run_reset(client: Client, o: Any, groups: list[str]) -> None:
    if not o.execute:
        print("WARN: No action will be performed as the --execute option is missing. Add --execute to reset "
              "the offsets. You can also use --dry-run to see the offsets that would be reset.", file=sys.stderr)
    plan = {}
    for gid in groups:
        got = reset_offsets(client, o, gid)
        if got:
            plan[gid] = got
    print_reset_plan(plan)


def delete_groups(client: Client, groups: list[str]) -> None:
    success, failed = [], {}
    for gid in groups:
        r = client.to_coordinator(gid, DeleteGroupsRequest, groups_names=[gid]).results[0]
        if r.error_code:
            failed[gid] = KafkaCallError(r.error_code).java()
        else:
            success.append(gid)
    if not failed:
        print("Deletion of requested share groups ('" + "', '".join(success) + "') was successful.")
        return
    print_error("Deletion of some share groups failed:")
    for gid, err in failed.items():
        print(f"* Share group '{gid}' could not be deleted due to: {err}")
    if success:
        print("\nThese share groups were deleted successfully: '" + "', '".join(success) + "'")


def delete_offsets(client: Client, gid: str, topics: list[str]) -> None:
    resp = client.to_coordinator(gid, DeleteShareGroupOffsetsRequest, group_id=gid,
                                 topics=[_XT(topic_name=t) for t in topics])
    if resp.error_code:
        print_error(f"Encounter some unknown error: {KafkaCallError(resp.error_code, resp.error_message).java()}")
        return
    results = {t.topic_name: t.error_code for t in resp.responses}
    if not any(results.values()):
        print(f"Request succeeded for deleting offsets from group {gid}.")
    else:
        print_error("Encounter some partition level error, see the follow-up details:")
    width = max([len(t) for t in results] + [5])
    fmt = f"\n{{:<{width}}} {{}}"
    out = fmt.format("TOPIC", "STATUS")
    for t, code in sorted(results.items()):
        out += fmt.format(t, f"Error: {KafkaCallError(code).java()}" if code else "Successful")
    print(out)
