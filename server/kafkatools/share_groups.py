"""kafka-share-groups.sh: --list (with --state), --describe (the group's --state, or its
--members, [--verbose]) with Kafka's ShareGroupCommand flags and table layout, over ListGroups
(type share) and ShareGroupDescribe. The offsets flags (--offsets, --reset-offsets,
--delete-offsets) and --delete come with the share-group offset APIs (issue 25)."""
from __future__ import annotations

import sys
from typing import Any

from kafka.protocol.admin.groups import ListGroupsRequest

from kcoord.protocol.share_messages import ShareGroupDescribeRequest
from kcoord.server.kafkatools import share_group_offsets as offsets
from kcoord.server.kafkatools.consumer_groups import UsageError
from kcoord.server.kafkatools.options import ToolParser, check_required
from kcoord.server.kafkatools.wire import Client, KafkaCallError, check

WHAT = "This tool helps to list, describe, reset and delete share groups."
STATES = ["Stable", "Dead", "Empty"]


def parser() -> ToolParser:
    p = ToolParser("kafka-share-groups.sh", WHAT)
    a = p.add_argument
    a("--bootstrap-server", metavar="server to connect to", help="REQUIRED: The server(s) to connect to.")
    a("--group", action="append", metavar="share group", help="The share group we wish to act on.")
    a("--all-groups", action="store_true", help="Apply to all share groups.")
    a("--list", action="store_true", help="List all share groups.")
    a("--describe", action="store_true", help="Describe share group, members and offset information.")
    a("--members", action="store_true", help="Describe members of the group. This option may be used with the "
                                             "'--describe' option only.")
    a("--state", nargs="?", const="", default=None, metavar="String",
      help="When specified with '--describe', includes the state of the group. When specified with '--list', "
           "it displays the state of all groups. It can also be used to list groups with specific states.")
    a("--offsets", action="store_true", help="Describe the group and list all topic partitions in the group "
                                             "along with their offset information. This is the default sub-action "
                                             "and may be used with the '--describe' option only.")
    a("--reset-offsets", action="store_true", help="Reset offsets of share group. Supports one share group at the "
                                                   "time, and instances must be inactive.")
    a("--delete", action="store_true", help="Pass in groups to delete topic partition offsets and ownership "
                                            "information over the entire share group.")
    a("--delete-offsets", action="store_true", help="Delete offsets of share group. Supports one share group at "
                                                    "the time, and multiple topics.")
    a("--topic", action="append", metavar="topic",
      help="The topic whose share group information should be deleted or topic which should be included in the "
           "reset offset process.")
    a("--all-topics", action="store_true", help="Consider all topics assigned to a share group in the "
                                                "'reset-offsets' process.")
    a("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    a("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    a("--to-datetime", metavar="datetime", help="Reset offsets to offset from datetime. Format: "
                                                "'YYYY-MM-DDTHH:mm:SS.sss'")
    a("--dry-run", action="store_true", help="Only show results without executing changes on share groups.")
    a("--execute", action="store_true", help="Execute operation. Supported operations: reset-offsets.")
    a("--verbose", action="store_true", help="Provide additional information, if any, when describing the group.")
    a("--timeout", type=int, default=5000, metavar="timeout (ms)",
      help="The timeout that can be set for some use cases (default: 5000).")
    a("--command-config", metavar="command config property file",
      help="Property file containing configs to be passed to Admin Client.")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    o = p.parse(list(sys.argv[1:] if argv is None else argv), WHAT)
    check_required(p, o, "bootstrap_server")
    actions = (o.list, o.describe, o.reset_offsets, o.delete, o.delete_offsets)
    if sum(bool(x) for x in actions) != 1:
        p.usage_exit("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                     "--delete-offsets")
    for name, on in (("describe", o.describe), ("delete", o.delete), ("reset-offsets", o.reset_offsets)):
        if on and not (o.group or o.all_groups):
            p.usage_exit(f"Option [{name}] takes one of these options: [all-groups], [group]")
    if o.members and not o.describe:
        p.usage_exit("Option [members] can be used only with the [describe] action")
    if o.offsets and not o.describe:
        p.usage_exit("Option [offsets] can be used only with the [describe] action")
    if o.delete_offsets and (not o.group or not o.topic):
        p.usage_exit("Option [delete-offsets] takes the following options: [group], [topic]")
    if o.reset_offsets:
        if o.dry_run and o.execute:
            p.usage_exit("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if sum(bool(x) for x in (o.to_earliest, o.to_latest, o.to_datetime)) != 1:
            p.usage_exit("Option [reset-offsets] takes exactly one of [to-datetime], [to-earliest], [to-latest]")
        if bool(o.topic) == bool(o.all_topics):
            p.usage_exit("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
    try:
        from kcoord.server.kafkatools.options import load_properties

        props = load_properties(o.command_config) if o.command_config else {}
        client = Client(o.bootstrap_server, max(o.timeout, 1000) / 1000 * 6,
                        props.get("client.id", "kafka-share-groups"))
    except (OSError, KafkaCallError) as e:
        print(f"\nError: Executing share group command failed due to {e}")
        return 0
    try:
        groups = (all_groups(client) if o.all_groups else o.group) or []
        if o.list:
            list_groups(client, o)
        elif o.reset_offsets:
            offsets.run_reset(client, o, groups)
        elif o.delete:
            offsets.delete_groups(client, groups)
        elif o.delete_offsets:
            offsets.delete_offsets(client, o.group[0], o.topic)
        else:
            for gid in groups:
                describe(client, o, gid)
    except KafkaCallError as e:
        print(f"\nError: Executing share group command failed due to {e.java()}")
    except UsageError as e:
        print(f"\nError: {e}")
    except OSError as e:
        print(f"\nError: Executing share group command failed due to {e}")
    finally:
        client.close()
    return 0


def _listed(client: Client, states: list[str]) -> list[Any]:
    resp = client.send(ListGroupsRequest, version=5, states_filter=states, types_filter=["share"])
    check(resp.error_code)
    return sorted(resp.groups, key=lambda g: g.group_id)


def all_groups(client: Client) -> list[str]:
    return [g.group_id for g in _listed(client, [])]


def list_groups(client: Client, o: Any) -> None:
    states = []
    if o.state:
        for s in o.state.split(","):
            match = next((x for x in STATES if x.lower() == s.strip().lower()), None)
            if match is None:
                raise SystemExit(f"Invalid state list '{o.state}'. Valid states are: {', '.join(STATES)}")
            states.append(match)
    groups = _listed(client, states)
    if o.state is None:
        for g in groups:
            print(g.group_id)
        return
    width = max([max(15, len(g.group_id)) for g in groups], default=15) + 10
    line = f"{{:<{width}}} {{}}"
    print(line.format("GROUP", "STATE"))
    for g in groups:
        print(line.format(g.group_id, g.group_state))


def describe(client: Client, o: Any, gid: str) -> None:
    if not o.members and o.state is None:  # --offsets, the default sub-action
        offsets.describe_offsets(client, gid, o.verbose)
        return
    node, host, port = client.coordinator(gid)
    resp = client.to_coordinator(gid, ShareGroupDescribeRequest, group_ids=[gid], include_authorized_operations=False)
    g = resp.groups[0]
    check(g.error_code, g.error_message or (f"Group {gid} not found." if g.error_code == 69 else None))
    if o.members:
        _print_members(g, o.verbose)
    else:
        _print_state(g, f"{host}:{port}  ({node})", o.verbose)


def _print_state(g: Any, coordinator: str, verbose: bool) -> None:
    width = max(15, len(g.group_id))
    cols = [("GROUP", g.group_id, width), ("COORDINATOR (ID)", coordinator, max(25, len(coordinator)))]
    if verbose:
        cols += [("ASSIGNMENT-STRATEGY", g.assignor_name, 20)]
    cols += [("STATE", g.group_state, 15)]
    if verbose:
        cols += [("GROUP-EPOCH", str(g.group_epoch), 12), ("ASSIGNMENT-EPOCH", str(g.assignment_epoch), 17)]
    cols += [("#MEMBERS", str(len(g.members)), 0)]
    fmt = " ".join(f"{{:<{w}}}" if w else "{}" for _, _, w in cols)
    print()
    print(fmt.format(*(c[0] for c in cols)))
    print(fmt.format(*(c[1] for c in cols)))


def _print_members(g: Any, verbose: bool) -> None:
    if not g.members:
        print(f"\nShare group '{g.group_id}' has no active members.")
        return
    rows = []
    for m in g.members:
        parts = [(tp.topic_name, p) for tp in m.assignment.topic_partitions for p in sorted(tp.partitions)]
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(parts):
            by_topic.setdefault(t, []).append(p)
        assignment = ",".join(f"{t}:{','.join(str(p) for p in ps)}" for t, ps in by_topic.items()) or "-"
        row = [g.group_id, m.member_id, m.client_host, m.client_id]
        if verbose:
            row.append(str(m.member_epoch))
        row += [str(len(parts)), assignment]
        rows.append(row)
    header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID"] + (["MEMBER-EPOCH"] if verbose else []) + \
        ["#PARTITIONS", "ASSIGNMENT"]
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]
    fmt = " ".join(f"{{:<{w}}}" for w in widths[:-1]) + " {}"
    print()
    print(fmt.format(*header))
    for r in rows:
        print(fmt.format(*r))
