"""kafka-consumer-groups.sh: --list, --describe (--offsets with lag, --members [--verbose],
--state), --delete, --reset-offsets (--to-earliest, --to-latest, --to-offset, --shift-by,
--to-datetime, --by-duration, --to-current, --from-file; --dry-run, --execute, --export) and
--delete-offsets, with Kafka's ConsumerGroupCommand flags, checks and output. Its table layout
is Kafka 3.9's with the line breaks Kafka restored after 3.9 (KAFKA #17058: in 3.9 the rows of
--reset-offsets and --delete-offsets ran together on one line)."""
from __future__ import annotations

import re
import struct
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from kafka.protocol.admin.groups import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
)

from kcoord.server.kafkatools.options import ToolParser, check_invalid, check_required, given
from kcoord.server.kafkatools.topics import describe_topics
from kcoord.server.kafkatools.wire import Client, KafkaCallError, check

WHAT = ("This tool helps to list all consumer groups, describe a consumer group, delete consumer group info, or "
        "reset consumer group offsets.")
MISSING = "-"
STATES = ["PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning", "Reconciling"]
TYPES = ["Unknown", "Consumer", "Classic"]
SCENARIOS = ["to-offset", "shift-by", "to-datetime", "by-duration", "to-earliest", "to-latest", "to-current",
             "from-file"]
LATEST, EARLIEST = -1, -2


class UsageError(Exception):
    """IllegalArgumentException of the tool: answered with the message and the usage (exit 1)."""


def parser() -> ToolParser:
    p = ToolParser("kafka-consumer-groups.sh", WHAT)
    a = p.add_argument
    a("--bootstrap-server", metavar="server to connect to", help="REQUIRED: The server(s) to connect to.")
    a("--group", action="append", metavar="consumer group", help="The consumer group we wish to act on.")
    a("--topic", action="append", metavar="topic", help="The topic whose consumer group information should be "
                                                        "deleted or topic whose should be included in the reset "
                                                        "offset process (topic1:0,1,2 names partitions).")
    a("--all-topics", action="store_true", help="Consider all topics assigned to a group in the reset-offsets process.")
    a("--list", action="store_true", help="List all consumer groups.")
    a("--describe", action="store_true", help="Describe consumer group and list offset lag (number of messages not "
                                              "yet processed) related to given group.")
    a("--all-groups", action="store_true", help="Apply to all consumer groups.")
    a("--delete", action="store_true", help="Pass in groups to delete topic partition offsets and ownership "
                                            "information over the entire consumer group.")
    a("--timeout", type=int, default=5000, metavar="timeout (ms)", help="The timeout that can be set for some use "
                                                                         "cases (default: 5000).")
    a("--command-config", metavar="command config property file", help="Property file containing configs to be "
                                                                         "passed to Admin Client and Consumer.")
    a("--reset-offsets", action="store_true", help="Reset offsets of consumer group. Supports one consumer group at "
                                                   "the time, and instances should be inactive.")
    a("--delete-offsets", action="store_true", help="Delete offsets of consumer group. Supports one consumer group "
                                                    "at the time, and multiple topics.")
    a("--dry-run", action="store_true", help="Only show results without executing changes on Consumer Groups.")
    a("--execute", action="store_true", help="Execute operation.")
    a("--export", action="store_true", help="Export operation execution to a CSV file.")
    a("--to-offset", type=int, metavar="offset", help="Reset offsets to a specific offset.")
    a("--from-file", metavar="path to CSV file", help="Reset offsets to values defined in CSV file.")
    a("--to-datetime", metavar="datetime", help="Reset offsets to offset from datetime. Format: "
                                                "'YYYY-MM-DDTHH:mm:SS.sss'")
    a("--by-duration", metavar="duration", help="Reset offsets to offset by duration from current timestamp. "
                                                "Format: 'PnDTnHnMnS'")
    a("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    a("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    a("--to-current", action="store_true", help="Reset offsets to current offset.")
    a("--shift-by", type=int, metavar="number-of-offsets", help="Reset offsets shifting current offset by 'n', where "
                                                                "'n' can be positive or negative.")
    a("--members", action="store_true", help="Describe members of the group.")
    a("--verbose", action="store_true", help="Provide additional information, if any, when describing the group.")
    a("--offsets", action="store_true", help="Describe the group and list all topic partitions in the group along "
                                             "with their offset lag. This is the default sub-action.")
    a("--state", nargs="?", const="", metavar="state", help="When specified with '--describe', includes the state of "
                                                            "the group. With '--list', the state filter.")
    a("--type", nargs="?", const="", metavar="type", help="When specified with '--list', the group type filter.")
    return p


def check_args(p: ToolParser, o: Any) -> None:
    """ConsumerGroupCommandOptions.checkArgs and its availableIf rules."""
    actions = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
    if sum(given(o, a) for a in actions) != 1:
        p.usage_exit("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                     "--delete-offsets")
    for sub, allowed in (("members", ["describe"]), ("verbose", ["describe"]), ("offsets", ["describe"]),
                         ("state", ["describe", "list"]), ("type", ["list"])):
        if given(o, sub) and not any(given(o, a) for a in allowed):
            p.usage_exit(f"Option(s) {_opt(sub)} are unavailable given other options on the command line")
    check_required(p, o, "bootstrap-server")
    level = "[list], [describe], [delete], [reset-offsets]"
    scopes = "[group], [all-groups]"
    if o.describe:
        if not o.group and not o.all_groups:
            p.usage_exit(f"Option [describe] takes one of these options: {level}")
        if sum(given(o, x) for x in ("members", "offsets", "state")) > 1:
            p.usage_exit("Option [describe] takes at most one of these options: [members], [offsets], [state]")
        if o.state:
            p.usage_exit("Option [describe] does not take a value for [state]")
    if o.delete:
        if not o.group and not o.all_groups:
            p.usage_exit(f"Option [delete] takes one of these options: {scopes}")
        if o.topic:
            p.usage_exit("The consumer does not support topic-specific offset deletion from a consumer group.")
    if o.delete_offsets and (not o.group or not o.topic):
        p.usage_exit(f"Option [delete-offsets] takes the following options: {scopes}")
    if o.reset_offsets:
        if o.dry_run and o.execute:
            p.usage_exit("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not o.dry_run and not o.execute:
            print("WARN: No action will be performed as the --execute option is missing.In a future major release, "
                  "the default behavior of this command will be to prompt the user before executing the reset rather "
                  "than doing a dry run. You should add the --dry-run option explicitly if you are scripting this "
                  "command and want to keep the current default behavior without prompting.", file=sys.stderr)
        if not o.group and not o.all_groups:
            p.usage_exit(f"Option [reset-offsets] takes one of these options: {scopes}")
        for s in SCENARIOS:
            check_invalid(p, o, s, [x for x in SCENARIOS if x != s])
    check_invalid(p, o, "group", ["all-groups"])
    check_invalid(p, o, "group", ["list"])
    check_invalid(p, o, "topic", ["list", "describe"])


def _opt(name: str) -> str:
    return f"[{name}]"


def main(argv: list[str] | None = None) -> int:
    p = parser()
    o = p.parse(list(sys.argv[1:] if argv is None else argv), WHAT)
    check_args(p, o)
    try:
        from kcoord.server.kafkatools.options import load_properties

        props = load_properties(o.command_config) if o.command_config else {}
        client = Client(o.bootstrap_server, max(o.timeout, 1000) / 1000 * 6,
                        props.get("client.id", "kafka-consumer-groups"))
    except (OSError, KafkaCallError) as e:
        print_error(f"Executing consumer group command failed due to {e}")
        return 0
    service = Service(client, o)
    try:
        if o.list:
            service.list_groups()
        elif o.describe:
            service.describe()
        elif o.delete:
            service.delete_groups()
        elif o.reset_offsets:
            plan = service.reset_offsets()
            if o.export:
                print(export_csv(plan, len(o.group or []) == 1))
            else:
                print_reset_plan(plan)
        else:
            service.delete_offsets()
    except UsageError as e:
        p.usage_exit(str(e))
    except KafkaCallError as e:
        print_error(f"Executing consumer group command failed due to {e.java()}")
    except OSError as e:
        print_error(f"Executing consumer group command failed due to {e}")
    finally:
        client.close()
    return 0  # Kafka's tool exits 0 after the errors it reports itself


def print_error(msg: str) -> None:
    print("\nError: " + msg)


# ---------------------------------------------------------------------------- group data


@dataclass
class Member:
    consumer_id: str
    instance_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]


@dataclass
class Group:
    group_id: str
    state: str
    protocol: str
    coordinator: tuple[int, str, int]
    members: list[Member] = field(default_factory=list)


def parse_assignment(data: bytes | None) -> list[tuple[str, int]]:
    """ConsumerProtocol assignment (v0-v3): version, [topic, [partition]], user data."""
    if not data:
        return []
    out = []
    pos = 2
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    for _ in range(max(n, 0)):
        (ln,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2:pos + 2 + ln].decode()
        pos += 2 + ln
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(count, 0)):
            out.append((topic, struct.unpack_from(">i", data, pos)[0]))
            pos += 4
    return out


def state_name(raw: str) -> str:
    for s in STATES:
        if s.lower() == (raw or "").lower():
            return s
    return "Unknown"


class Service:
    def __init__(self, client: Client, o: Any) -> None:
        self.client = client
        self.o = o

    # ---- list ----

    def list_groups(self) -> None:
        o = self.o
        include_type, include_state = o.type is not None, o.state is not None
        states = self._parse_list(o.state, STATES, "state", "Valid states are: ") if o.state else []
        types = self._parse_list(o.type, TYPES[1:], "types", "Valid types are: ") if o.type else []
        v = self.client.version(ListGroupsRequest)
        resp = self.client.send(ListGroupsRequest, version=v, states_filter=states,
                                types_filter=[t.lower() for t in types])
        check(resp.error_code)
        groups = [g for g in resp.groups if g.protocol_type in ("consumer", "")]
        if states and v < 4:
            groups = [g for g in groups if state_name(getattr(g, "group_state", "")) in states]
        if not include_type and not include_state:
            for g in groups:
                print(g.group_id)
            return
        width = max([max(15, len(g.group_id)) for g in groups], default=15) + 10
        fmt = [f"{{:<{width}}}"]
        header = ["GROUP"]
        if include_type:
            fmt.append("{:<20}")
            header.append("TYPE")
        if include_state:
            fmt.append("{:<20}")
            header.append("STATE")
        line = " ".join(fmt)
        print(line.format(*header))
        for g in groups:
            row = [g.group_id]
            if include_type:
                gt = (getattr(g, "group_type", "") or "")
                row.append(next((t for t in TYPES if t.lower() == gt.lower()), "Classic" if v >= 5 else "Unknown"))
            if include_state:
                row.append(state_name(getattr(g, "group_state", "")))
            print(line.format(*row))

    @staticmethod
    def _parse_list(raw: str, valid: list[str], what: str, lead: str) -> list[str]:
        out = []
        for s in raw.split(","):
            match = next((x for x in valid if x.lower() == s.strip().lower()), None)
            if match is None:
                raise UsageError(f"Invalid {what} list '{raw}'. {lead}{', '.join(valid)}")
            out.append(match)
        return out

    def all_group_ids(self) -> list[str]:
        resp = self.client.send(ListGroupsRequest, states_filter=[], types_filter=[])
        check(resp.error_code)
        return [g.group_id for g in resp.groups if g.protocol_type in ("consumer", "")]

    def group_ids(self) -> list[str]:
        return self.all_group_ids() if self.o.all_groups else list(self.o.group)

    # ---- reading a group ----

    def describe_group(self, group: str) -> Group:
        coordinator = self.client.coordinator(group)
        resp = self.client.to_coordinator(group, DescribeGroupsRequest, groups=[group],
                                          include_authorized_operations=False)
        g = resp.groups[0]
        check(g.error_code, getattr(g, "error_message", None) or (f"Group {group} not found." if g.error_code == 69
                                                                  else None))
        if g.protocol_type not in ("consumer", ""):
            raise KafkaCallError(-1, f"Group {group} is not a consumer group.")
        members = [Member(m.member_id, m.group_instance_id or "", m.client_id, m.client_host,
                          parse_assignment(m.member_assignment)) for m in g.members]
        return Group(group, state_name(g.group_state), g.protocol_data or "", coordinator, members)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        v = self.client.version(OffsetFetchRequest)
        if v >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            resp = self.client.to_coordinator(group, OffsetFetchRequest, require_stable=False,
                                              groups=[G(group_id=group, topics=None)])
            g = resp.groups[0]
            check(g.error_code)
            topics = g.topics
        else:
            resp = self.client.to_coordinator(group, OffsetFetchRequest, group_id=group, topics=None,
                                              require_stable=False)
            check(getattr(resp, "error_code", 0))
            topics = resp.topics
        out = {}
        for t in topics:
            for p in t.partitions:
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out

    def log_offsets(self, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        """ListOffsets to each partition's leader; partitions without an answer are left out."""
        if not partitions:
            return {}
        leaders: dict[int, list[tuple[str, int]]] = {}
        meta = self.client.metadata(sorted({t for t, _ in partitions}))
        for t, p in partitions:
            info = meta.get(t)
            part = next((x for x in info.partitions if x.partition == p), None) if info else None
            if part is not None and part.leader >= 0:
                leaders.setdefault(part.leader, []).append((t, p))
        out = {}
        T = ListOffsetsRequest.ListOffsetsTopic
        for leader, tps in leaders.items():
            by_topic: dict[str, list[int]] = {}
            for t, p in tps:
                by_topic.setdefault(t, []).append(p)
            resp = self.client.send(ListOffsetsRequest, node=leader, replica_id=-1, isolation_level=0, timeout_ms=0,
                                    topics=[T(name=t, partitions=[T.ListOffsetsPartition(
                                        partition_index=p, current_leader_epoch=-1, timestamp=timestamp,
                                        max_num_offsets=1) for p in ps]) for t, ps in by_topic.items()])
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code == 0:
                        offset = p.offset if p.offset is not None and p.offset >= 0 or not p.old_style_offsets \
                            else p.old_style_offsets[0]
                        out[(t.name, p.partition_index)] = offset
        return out

    # ---- describe ----

    def describe(self) -> None:
        o = self.o
        groups = sorted(self.group_ids())
        if o.members:
            for gid in groups:
                self._print_members(self.describe_group(gid), o.verbose)
        elif o.state is not None:
            for gid in groups:
                self._print_state(self.describe_group(gid))
        else:
            for gid in groups:
                self._print_offsets(self.describe_group(gid))

    def _should_print(self, g: Group, rows: int) -> bool:
        """ConsumerGroupService.shouldPrintMemberState."""
        if g.state == "Dead":
            print_error(f"Consumer group '{g.group_id}' does not exist.")
        elif g.state == "Empty":
            print(f"\nConsumer group '{g.group_id}' has no active members.", file=sys.stderr)
        elif g.state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
            print(f"\nWarning: Consumer group '{g.group_id}' is rebalancing.", file=sys.stderr)
        return g.state != "Dead" and rows > 0

    def _print_offsets(self, g: Group) -> None:
        committed = self.committed(g.group_id)
        rows: list[list[str]] = []
        assigned: set[tuple[str, int]] = set()
        members = [m for m in g.members if m.assignment]
        members.sort(key=lambda m: -len(m.assignment))
        ends = self.log_offsets(sorted({tp for m in members for tp in m.assignment} | set(committed)), LATEST)

        def row(tp: tuple[str, int], consumer: str, host: str, client: str) -> list[str]:
            off = committed.get(tp)
            end = ends.get(tp)
            lag = str(end - off) if off is not None and end is not None else MISSING
            return [g.group_id, tp[0], str(tp[1]), MISSING if off is None else str(off),
                    MISSING if end is None else str(end), lag, consumer, host, client]

        for m in members:
            for tp in sorted(m.assignment, key=lambda x: (x[1], x[0])):
                assigned.add(tp)
                rows.append(row(tp, m.consumer_id, m.host, m.client_id))
        for tp in sorted(t for t in committed if t not in assigned):
            rows.append(row(tp, MISSING, MISSING, MISSING))
        if not self._should_print(g, len(rows)):
            return
        widths = [max([15] + [len(r[i]) for r in rows]) for i in (0, 1, 6, 7)]
        fmt = (f"\n{{:<{widths[0]}}} {{:<{widths[1]}}} {{:<10}} {{:<15}} {{:<15}} {{:<15}} {{:<{widths[2]}}} "
               f"{{:<{widths[3]}}} {{}}")
        out = fmt.format("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                         "HOST", "CLIENT-ID")
        out += "".join(fmt.format(*r) for r in rows)
        print(out)

    def _print_members(self, g: Group, verbose: bool) -> None:
        ms = g.members
        show = self._should_print(g, len(ms))
        wg, wc, wi, wh, wcl = 15, 15, 17, 15, 15
        with_instance = False
        if show:
            for m in ms:
                wg, wc = max(wg, len(g.group_id)), max(wc, len(m.consumer_id))
                wi, wh, wcl = max(wi, len(m.instance_id)), max(wh, len(m.host)), max(wcl, len(m.client_id))
                with_instance = with_instance or bool(m.instance_id)
        if with_instance:
            fmt = f"{{:<{wg}}} {{:<{wc}}} {{:<{wi}}} {{:<{wh}}} {{:<{wcl}}} {{:<15}} "
            header = fmt.format("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
        else:
            fmt = f"{{:<{wg}}} {{:<{wc}}} {{:<{wh}}} {{:<{wcl}}} {{:<15}} "
            header = fmt.format("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
        print("\n" + header + ("ASSIGNMENT" if verbose else ""))
        for m in ms:
            cols = [g.group_id, m.consumer_id] + ([m.instance_id] if with_instance else []) + [
                m.host, m.client_id, str(len(m.assignment))]
            line = fmt.format(*cols)
            if verbose:
                by_topic: dict[str, list[int]] = {}
                for t, p in m.assignment:
                    by_topic.setdefault(t, []).append(p)
                parts = sorted("(" + ",".join(sorted(str(p) for p in ps)) + ")" for ps in by_topic.values())
                line += ", ".join(parts) if parts else MISSING
            print(line)

    def _print_state(self, g: Group) -> None:
        if not self._should_print(g, 1):
            return
        node, host, port = g.coordinator
        coordinator = f"{host}:{port}  ({node})"
        width = max(25, len(coordinator))
        fmt = f"\n{{:<{width}}} {{:<25}} {{:<20}} {{:<15}} {{}}"
        print(fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
              + fmt.format(g.group_id, coordinator, g.protocol, g.state, len(g.members)))

    # ---- delete ----

    def delete_groups(self) -> None:
        success, failed = [], {}
        for gid in self.group_ids():
            resp = self.client.to_coordinator(gid, DeleteGroupsRequest, groups_names=[gid])
            r = resp.results[0]
            if r.error_code:
                failed[gid] = KafkaCallError(r.error_code).java()
            else:
                success.append(gid)
        if not failed:
            print(f"Deletion of requested consumer groups ('{', '.join(success)}') was successful.")
            return
        print_error("Deletion of some consumer groups failed:")
        for gid, err in failed.items():
            print(f"* Group '{gid}' could not be deleted due to: java.util.concurrent.ExecutionException: {err}")
        if success:
            print("\nThese consumer groups were deleted successfully: '" + "'".join(success) + "', '")

    def delete_offsets(self) -> None:
        gid = self.o.group[0]
        topics = self.o.topic
        results: dict[tuple[str, int], str | None] = {}
        partitions: list[tuple[str, int]] = []
        plain = [t for t in topics if ":" not in t]
        for t in topics:
            if ":" in t:
                partitions += parse_topic_partitions(t)
        if plain:
            meta = self.client.metadata(plain)
            for t in plain:
                info = meta.get(t)
                if info is None or info.error:
                    results[(t, -1)] = KafkaCallError(info.error if info else 3).java()
                else:
                    partitions += [(t, p.partition) for p in info.partitions]
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        resp = self.client.to_coordinator(gid, OffsetDeleteRequest, group_id=gid, topics=[
            T(name=t, partitions=[T.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for t, ps in by_topic.items()])
        top = resp.error_code
        errors = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
        for tp in partitions:
            code = top or errors.get(tp, 0)
            results[tp] = KafkaCallError(code).java() if code else None
        if not top and any(results.values()):
            top = next(e for e in errors.values() if e) if any(errors.values()) else 3
        messages = {0: f"Request succeed for deleting offsets with topic {', '.join(topics)} group {gid}",
                    24: f"'{gid}' is not valid.", 69: f"'{gid}' does not exist.",
                    30: f"Access to '{gid}' is not authorized.",
                    68: f"Deleting offsets of a consumer group '{gid}' is forbidden if the group is not empty."}
        if top == 0:
            print(messages[0])
        elif top in messages:
            print_error(messages[top])
        elif top in (86, 29, 3):
            print_error("Encounter some partition level error, see the follow-up details:")
        else:
            print_error(f"Encounter some unknown error: {KafkaCallError(top).java_name}")
        fmt = "\n{:<30} {:<15} {:<15}"
        out = fmt.format("TOPIC", "PARTITION", "STATUS")
        for (t, p), err in sorted(results.items(), key=lambda kv: kv[0][0] + str(kv[0][1])):
            out += fmt.format(t, str(p) if p >= 0 else "Not Provided",
                              f"Error: :{err}" if err else "Successful")
        print(out)

    # ---- reset ----

    def reset_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        o = self.o
        result: dict[str, dict[tuple[str, int], int]] = {}
        for gid in self.group_ids():
            g = self.describe_group(gid)
            if g.state not in ("Empty", "Dead"):
                print_error(f"Assignments can only be reset if the group '{gid}' is inactive, but the current state "
                            f"is {g.state}.")
                result[gid] = {}
                continue
            plan = self._prepare(gid, self._partitions_to_reset(gid))
            if o.execute:
                self._commit(gid, plan)
            result[gid] = plan
        return result

    def _partitions_to_reset(self, gid: str) -> list[tuple[str, int]]:
        o = self.o
        if o.all_topics:
            return sorted(self.committed(gid))
        if o.topic:
            out = []
            plain = [t for t in o.topic if ":" not in t]
            for t in o.topic:
                if ":" in t:
                    out += parse_topic_partitions(t)
            if plain:
                for info in describe_topics(self.client, plain, 2000):
                    out += [(info.name, p.partition) for p in info.partitions]
            return out
        if o.from_file is None:
            raise UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
        return []

    def _prepare(self, gid: str, parts: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        o = self.o
        if o.to_offset is not None:
            return self._in_range({tp: o.to_offset for tp in parts})
        if o.to_earliest or o.to_latest:
            spec = EARLIEST if o.to_earliest else LATEST
            offsets = self.log_offsets(parts, spec)
            for tp in parts:
                if tp not in offsets:
                    what = "starting" if o.to_earliest else "ending"
                    raise UsageError(f"Error getting {what} offset of topic partition: {tp[0]}-{tp[1]}")
            return {tp: offsets[tp] for tp in parts}
        if o.shift_by is not None:
            current = self.committed(gid)
            requested = {}
            for tp in parts:
                if tp not in current:
                    raise UsageError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is no current "
                                     "committed offset")
                requested[tp] = current[tp] + o.shift_by
            return self._in_range(requested)
        if o.to_datetime is not None or o.by_duration is not None:
            ts = parse_datetime(o.to_datetime) if o.to_datetime is not None else \
                int(time.time() * 1000) - parse_duration_ms(o.by_duration)
            found = self.log_offsets(parts, ts)
            missing = [tp for tp in parts if tp not in found or found[tp] < 0]
            for tp in missing:
                print(f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling back to latest known offset.")
            found.update(self.log_offsets(missing, LATEST))
            return {tp: found[tp] for tp in parts}
        if o.from_file is not None:
            plan = parse_reset_plan(open(o.from_file).read(), gid if len(o.group or []) == 1 else None)
            if gid not in plan:
                print_error(f"No reset plan for group {gid} found")
                return {}
            return self._in_range(plan[gid])
        if o.to_current:
            current = self.committed(gid)
            out = {tp: current[tp] for tp in parts if tp in current}
            out.update(self.log_offsets([tp for tp in parts if tp not in current], LATEST))
            return out
        raise UsageError("Option '[reset-offsets]' requires one of the following scenarios: "
                         "[to-offset, shift-by, to-datetime, by-duration, to-earliest, to-latest, to-current, "
                         "from-file]")

    def _in_range(self, requested: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """checkOffsetsRange: clamp into [log start, log end], with Kafka's warnings."""
        starts = self.log_offsets(list(requested), EARLIEST)
        ends = self.log_offsets(list(requested), LATEST)
        out = {}
        for tp, off in requested.items():
            if tp in ends and off > ends[tp]:
                print(f"WARN New offset ({off}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. "
                      f"Value will be set to {ends[tp]}", file=sys.stderr)
                off = ends[tp]
            elif tp in starts and off < starts[tp]:
                print(f"WARN New offset ({off}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. "
                      f"Value will be set to {starts[tp]}", file=sys.stderr)
                off = starts[tp]
            out[tp] = off
        return out

    def _commit(self, gid: str, plan: dict[tuple[str, int], int]) -> None:
        """Admin.alterConsumerGroupOffsets: an OffsetCommit outside any generation."""
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), off in sorted(plan.items()):
            by_topic.setdefault(t, []).append((p, off))
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        resp = self.client.to_coordinator(
            gid, OffsetCommitRequest, group_id=gid, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, retention_time_ms=-1,
            topics=[T(name=t, partitions=[T.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=off, committed_leader_epoch=-1, commit_timestamp=-1,
                committed_metadata="") for p, off in ps]) for t, ps in by_topic.items()])
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code)


# ---------------------------------------------------------------------------- parsing and printing


def parse_topic_partitions(arg: str) -> list[tuple[str, int]]:
    parts = arg.split(":")
    if len(parts) != 2:
        raise UsageError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    out = []
    for p in parts[1].split(","):
        try:
            out.append((parts[0], int(p)))
        except ValueError:
            raise UsageError(f"Invalid partition '{p}' specified in topic arg '{arg}''") from None
    return out


def parse_datetime(text: str) -> int:
    """Utils.getDateTime: yyyy-MM-dd'T'HH:mm:ss.SSS with an optional zone (UTC without one)."""
    if "T" not in text:
        raise UsageError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    date, _, clock = text.partition("T")
    if not any(c in clock for c in "+-Z"):
        text += "Z"
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})(Z|[+-]\d{2}(?::?\d{2})?)", text)
    if m is None:
        raise UsageError(f'Unparseable date: "{text}"')
    zone = m.group(6)
    if zone == "Z":
        tz = UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0)))
    dt = datetime.strptime(f"{m.group(1)} {m.group(2)}:{m.group(3)}:{m.group(4)}", "%Y-%m-%d %H:%M:%S")
    return int(dt.replace(tzinfo=tz).timestamp() * 1000) + int(m.group(5))


def parse_duration_ms(text: str) -> int:
    """java.time.Duration.parse: PnDTnHnMn.nS."""
    m = re.fullmatch(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
                     text.strip(), re.IGNORECASE)
    if m is None or text.strip().upper().endswith("T") or not any(m.group(i) for i in (2, 3, 4, 5)):
        raise UsageError(f"Text cannot be parsed to a Duration: {text}")
    days, hours, minutes, secs = (int(m.group(i) or 0) for i in (2, 3, 4, 5))
    frac = int((m.group(6) or "0").ljust(3, "0")[:3])
    ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + secs * 1000 + (frac if secs >= 0 else -frac)
    return -ms if m.group(1) == "-" else ms


def parse_reset_plan(text: str, single_group: str | None) -> dict[str, dict[tuple[str, int], int]]:
    out: dict[str, dict[tuple[str, int], int]] = {}
    for line in filter(None, (x.strip() for x in text.split("\n"))):
        cols = line.split(",")
        if single_group is not None and len(cols) == 3:
            group, topic, part, off = single_group, *cols
        elif len(cols) == 4:
            group, topic, part, off = cols
        else:
            raise UsageError(f"Invalid reset plan line: {line}")
        out.setdefault(group, {})[(topic, int(part))] = int(off)
    return out


def export_csv(plan: dict[str, dict[tuple[str, int], int]], single: bool) -> str:
    lines = []
    for gid, offsets in plan.items():
        for (t, p), off in sorted(offsets.items()):
            lines.append(f"{t},{p},{off}" if single else f"{gid},{t},{p},{off}")
    return "".join(line + "\n" for line in lines)


def print_reset_plan(plan: dict[str, dict[tuple[str, int], int]]) -> None:
    fmt = "\n{:<30} {:<30} {:<10} {:<15}"
    if not plan:
        return
    out = fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
    for gid, offsets in plan.items():
        for (t, p), off in sorted(offsets.items()):
            out += fmt.format(gid, t, str(p), str(off))
    print(out)


if __name__ == "__main__":
    sys.exit(main())
