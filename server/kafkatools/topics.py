"""kafka-topics.sh: --create, --list, --describe, --alter (partitions), --delete, with Kafka's
TopicCommand flags, checks, output and exit codes."""
from __future__ import annotations

import base64
import re
import sys
import uuid
from typing import Any

from kafka.protocol.admin.configs import DescribeConfigsRequest
from kafka.protocol.admin.topics import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeTopicPartitionsRequest,
    ListPartitionReassignmentsRequest,
)

from kcoord.server.config_catalogue import TOPIC_CONFIGS, ConfigError, check_topic_configs
from kcoord.server.kafkatools.options import ToolParser, check_invalid, check_required, given, load_properties
from kcoord.server.kafkatools.wire import Client, KafkaCallError, PartitionInfo, TopicInfo, check

ACTIONS = ("create", "list", "alter", "describe", "delete")
WHAT = "Create, delete, describe, or change a topic."
SHORT_MAX = 32767
REQUEST_TIMEOUT_MS = 30000


class CommandError(Exception):
    """What TopicCommand reports as `Error while executing topic command : <message>`."""


def parser() -> ToolParser:
    p = ToolParser("kafka-topics.sh", "This tool helps to create, delete, describe, or change a topic.")
    a = p.add_argument
    a("--bootstrap-server", metavar="server to connect to", help="REQUIRED: The Kafka server to connect to.")
    a("--command-config", metavar="command config property file",
      help="Property file containing configs to be passed to Admin Client.")
    a("--list", action="store_true", help="List all available topics.")
    a("--create", action="store_true", help="Create a new topic.")
    a("--delete", action="store_true", help="Delete a topic")
    a("--alter", action="store_true", help="Alter the number of partitions and replica assignment.")
    a("--describe", action="store_true", help="List details for the given topics.")
    a("--topic", metavar="topic", help="The topic to create, alter, describe or delete. It also accepts a regular "
                                        "expression, except for --create option.")
    a("--topic-id", metavar="topic-id", help="The topic-id to describe.")
    a("--config", action="append", metavar="name=value", help="A topic configuration override for the topic being "
                                                               "created: " + ", ".join(sorted(TOPIC_CONFIGS)))
    a("--delete-config", action="append", metavar="name", help="Not supported with the --bootstrap-server option.")
    a("--partitions", type=int, metavar="# of partitions",
      help="The number of partitions for the topic being created or altered.")
    a("--replication-factor", type=int, metavar="replication factor",
      help="The replication factor for each partition in the topic being created.")
    a("--replica-assignment", metavar="broker_id_for_part1_replica1 : broker_id_for_part1_replica2 , ...",
      help="A list of manual partition-to-broker assignments for the topic being created or altered.")
    a("--under-replicated-partitions", action="store_true", help="only show under replicated partitions")
    a("--unavailable-partitions", action="store_true", help="only show partitions whose leader is not available")
    a("--under-min-isr-partitions", action="store_true", help="only show partitions whose isr count is less than "
                                                              "the configured minimum.")
    a("--at-min-isr-partitions", action="store_true", help="only show partitions whose isr count is equal to the "
                                                           "configured minimum.")
    a("--topics-with-overrides", action="store_true", help="only show topics that have overridden configs")
    a("--if-exists", action="store_true", help="only act if the topic exists")
    a("--if-not-exists", action="store_true", help="only create the topic if it does not already exist")
    a("--exclude-internal", action="store_true", help="exclude internal topics when running list or describe")
    a("--partition-size-limit-per-response", type=int, metavar="maximum number of partitions in one response.",
      help="the maximum partition size to be included in one DescribeTopicPartitions response.")
    return p


REPORTS = ("under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions",
           "at_min_isr_partitions")


def check_args(p: ToolParser, o: Any) -> None:
    """TopicCommandOptions.checkArgs, in its order."""
    if sum(given(o, a) for a in ACTIONS) != 1:
        p.usage_exit("Command must include exactly one action: --list, --describe, --create, --alter or --delete")
    if not given(o, "bootstrap_server"):
        raise CommandError("--bootstrap-server must be specified")
    if o.describe and o.if_exists:
        if not given(o, "topic") and not given(o, "topic_id"):
            p.usage_exit("--topic or --topic-id is required to describe a topic")
    if not o.list and not o.describe:
        check_required(p, o, "topic")
    if o.alter:
        if given(o, "bootstrap_server") and given(o, "config"):
            p.usage_exit('Option combination "[bootstrap-server, config]" can\'t be used with option "[alter]" (the '
                         "kafka-configs CLI supports altering topic configs with a --bootstrap-server option)")
        check_required(p, o, "partitions")
    others = lambda *keep: [a for a in ACTIONS if a not in keep]  # noqa: E731
    check_invalid(p, o, "config", others("alter", "create"))
    check_invalid(p, o, "delete-config", ["bootstrap-server", *others("alter")])
    check_invalid(p, o, "partitions", others("alter", "create"))
    check_invalid(p, o, "replication-factor", others("create"))
    check_invalid(p, o, "replica-assignment", others("alter", "create"))
    if o.create:
        check_invalid(p, o, "replica-assignment", ["partitions", "replication-factor"])
    for report in REPORTS:
        name = report.replace("_", "-")
        check_invalid(p, o, name, ["topics-with-overrides", *others("describe")])
    check_invalid(p, o, "topics-with-overrides", [*(r.replace("_", "-") for r in REPORTS), *others("describe")])
    check_invalid(p, o, "if-exists", others("alter", "delete", "describe"))
    check_invalid(p, o, "if-not-exists", others("create"))
    check_invalid(p, o, "exclude-internal", others("list", "describe"))


def main(argv: list[str] | None = None) -> int:
    p = parser()
    o = p.parse(list(sys.argv[1:] if argv is None else argv), WHAT)
    try:
        check_args(p, o)
    except CommandError as e:
        print(e, file=sys.stderr)
        return 1
    try:
        props = load_properties(o.command_config) if o.command_config else {}
        client = Client(o.bootstrap_server, float(props.get("request.timeout.ms", REQUEST_TIMEOUT_MS)) / 1000,
                        props.get("client.id", "kafka-topics"))
    except (OSError, KafkaCallError) as e:
        print(f"Error while executing topic command : {e}")
        return 1
    try:
        if o.create:
            create(client, o)
        elif o.alter:
            alter(client, o)
        elif o.list:
            print("\n".join(topics_matching(client, o.topic, o.exclude_internal)))
        elif o.describe:
            describe(client, o)
        else:
            delete(client, o)
        return 0
    except (CommandError, KafkaCallError, OSError, ConfigError) as e:
        print(f"Error while executing topic command : {e}")
        return 1
    finally:
        client.close()


# ---------------------------------------------------------------------------- helpers


def topic_filter(raw: str) -> re.Pattern[str]:
    """TopicFilter.IncludeList: commas are alternatives, spaces and quotes are dropped."""
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error:
        raise CommandError(f"{regex} is an invalid regex.") from None


def topics_matching(client: Client, raw: str | None, exclude_internal: bool) -> list[str]:
    names = client.topic_names(include_internal=not exclude_internal)
    if raw is None:
        return names
    pattern = topic_filter(raw)
    return [n for n in names if pattern.fullmatch(n)]


def ensure_exists(found: list[Any], requested: str | None, required: bool) -> None:
    if requested and required and not found:
        # String.format of an Optional: Kafka's message says "Optional[name]"
        raise CommandError(f"Topic 'Optional[{requested}]' does not exist as expected")


def parse_assignment(text: str) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError as e:
            raise CommandError(f"For input string: \"{e}\"") from None
        dup = sorted({b for b in brokers if brokers.count(b) > 1})
        if dup:
            raise CommandError("Partition replica lists may not contain duplicate entries: " + ",".join(map(str, dup)))
        out[i] = brokers
        if len(brokers) != len(out[0]):
            raise CommandError(f"Partition {i} has different replication factor: [{', '.join(map(str, brokers))}]")
    return out


def parse_configs(items: list[str] | None) -> dict[str, str]:
    pairs = [re.split(r"\s*=\s*", s) for s in items or []]
    if not all(len(kv) == 2 for kv in pairs):
        raise CommandError('requirement failed: Invalid topic config: all configs to be added must be in the format '
                           '"key=val".')
    configs = {k.strip(): v.strip() for k, v in pairs}
    defaults = {name: key.default for name, key in TOPIC_CONFIGS.items()}
    check_topic_configs(configs, defaults)  # LogConfig.validate, as the tool does before sending
    if "message.format.version" in configs:
        print("WARNING: The configuration ${TopicConfig.MESSAGE_FORMAT_VERSION_CONFIG}=${props.getProperty("
              "TopicConfig.MESSAGE_FORMAT_VERSION_CONFIG)} is specified. This configuration will be ignored if the "
              "version is newer than the inter.broker.protocol.version specified in the broker or if the "
              "inter.broker.protocol.version is 3.0 or newer. This configuration is deprecated and it will be "
              "removed in Apache Kafka 4.0.")
    return configs


def uuid_text(u: Any) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


# ---------------------------------------------------------------------------- actions


def create(client: Client, o: Any) -> None:
    name = o.topic
    configs = parse_configs(o.config)
    assignment = parse_assignment(o.replica_assignment) if o.replica_assignment else {}
    if "." in name or "_" in name:  # Topic.hasCollisionChars
        print("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
              "collide. To avoid issues it is best to use either, but not both.")
    if o.replication_factor is not None and not 1 <= o.replication_factor <= SHORT_MAX:
        raise CommandError(f"The replication factor must be between 1 and {SHORT_MAX} inclusive")
    if o.partitions is not None and o.partitions < 1:
        raise CommandError("The partitions must be greater than 0")
    T = CreateTopicsRequest.CreatableTopic
    topic = T(name=name, num_partitions=-1 if assignment or o.partitions is None else o.partitions,
              replication_factor=-1 if assignment or o.replication_factor is None else o.replication_factor,
              assignments=[T.CreatableReplicaAssignment(partition_index=p, broker_ids=b) for p, b in assignment.items()],
              configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    resp = client.send(CreateTopicsRequest, topics=[topic], timeout_ms=REQUEST_TIMEOUT_MS, validate_only=False)
    r = resp.topics[0]
    if r.error_code == 36 and o.if_not_exists:
        return
    check(r.error_code, r.error_message)
    print(f"Created topic {name}.")


def alter(client: Client, o: Any) -> None:
    topics = topics_matching(client, o.topic, o.exclude_internal)
    ensure_exists(topics, o.topic, not o.if_exists)
    if not topics:
        return
    assignment = parse_assignment(o.replica_assignment) if o.replica_assignment else {}
    current = client.metadata(topics)
    T = CreatePartitionsRequest.CreatePartitionsTopic
    reqs = []
    for name in topics:
        start = len(current[name].partitions) if name in current else 0
        new = [T.CreatePartitionsAssignment(broker_ids=b) for p, b in assignment.items() if p >= start]
        reqs.append(T(name=name, count=o.partitions, assignments=new or None))
    resp = client.send(CreatePartitionsRequest, topics=reqs, timeout_ms=REQUEST_TIMEOUT_MS, validate_only=False)
    for r in resp.results:
        check(r.error_code, r.error_message)


def delete(client: Client, o: Any) -> None:
    topics = topics_matching(client, o.topic, o.exclude_internal)
    ensure_exists(topics, o.topic, not o.if_exists)
    if not topics:
        return
    v = client.version(DeleteTopicsRequest)
    if v >= 6:
        T = DeleteTopicsRequest.DeleteTopicState
        resp = client.send(DeleteTopicsRequest, version=v, timeout_ms=REQUEST_TIMEOUT_MS,
                           topics=[T(name=t, topic_id=uuid.UUID(int=0)) for t in topics])
    else:
        resp = client.send(DeleteTopicsRequest, version=v, timeout_ms=REQUEST_TIMEOUT_MS, topic_names=topics)
    for r in resp.responses:
        check(r.error_code, getattr(r, "error_message", None))


def describe_topics(client: Client, names: list[str], limit: int) -> list[TopicInfo]:
    """Admin.describeTopics: DescribeTopicPartitions, a page at a time, where the broker has
    it (ELR known), else Metadata."""
    if not client.supports(DescribeTopicPartitionsRequest):
        found = client.metadata(names)
        for name in names:
            t = found.get(name)
            if t is None or t.error:
                raise KafkaCallError(t.error if t is not None else 3)
        return [found[n] for n in names]
    out: dict[str, TopicInfo] = {}
    R = DescribeTopicPartitionsRequest
    cursor = None
    while True:
        resp = client.send(R, topics=[R.TopicRequest(name=n) for n in names], response_partition_limit=limit,
                           cursor=cursor)
        for t in resp.topics:
            check(t.error_code)
            info = out.setdefault(t.name, TopicInfo(t.name, t.topic_id, t.is_internal))
            info.partitions += [PartitionInfo(p.partition_index, p.leader_id, list(p.replica_nodes),
                                              list(p.isr_nodes), _opt(p.eligible_leader_replicas),
                                              _opt(p.last_known_elr)) for p in t.partitions]
        if resp.next_cursor is None:
            break
        c = resp.next_cursor
        cursor = R.Cursor(topic_name=c.topic_name, partition_index=c.partition_index)
    return [out[n] for n in names if n in out]


def _opt(ids: Any) -> list[int] | None:
    return None if ids is None else list(ids)


def topic_configs(client: Client, names: list[str]) -> dict[str, list[tuple[str, str | None, bool]]]:
    """name -> [(config, value, is default)] as Admin.describeConfigs gives them."""
    R = DescribeConfigsRequest
    v = client.version(R)
    resp = client.send(R, version=v, include_synonyms=False, include_documentation=False, resources=[
        R.DescribeConfigsResource(resource_type=2, resource_name=n, configuration_keys=None) for n in names])
    out = {}
    for r in resp.results:
        check(r.error_code, r.error_message)
        out[r.resource_name] = [(c.name, c.value, c.is_default if v == 0 else c.config_source == 5) for c in r.configs]
    return out


def describe(client: Client, o: Any) -> None:
    topic_id = None
    if o.topic_id:
        try:
            topic_id = uuid.UUID(bytes=base64.urlsafe_b64decode(o.topic_id + "=" * (-len(o.topic_id) % 4)))
        except ValueError:
            raise CommandError(f"Invalid topic id: {o.topic_id}") from None
        if topic_id.int == 0:
            topic_id = None
    if topic_id is not None:
        everything = client.metadata(None)
        topics = [t.name for t in everything.values() if t.topic_id == topic_id
                  and (not o.exclude_internal or not t.internal)]
        if not topics and not o.if_exists:
            raise CommandError(f"TopicId '{o.topic_id}' does not exist as expected")
    else:
        topics = topics_matching(client, o.topic, o.exclude_internal)
        ensure_exists(topics, o.topic, not o.if_exists)
    if not topics:
        return
    described = describe_topics(client, topics, o.partition_size_limit_per_response or 2000)
    configs = topic_configs(client, [t.name for t in described])
    client.metadata([])
    live = set(client.brokers)
    reassigning: set[tuple[str, int]] = set()
    if client.supports(ListPartitionReassignmentsRequest):
        try:
            resp = client.send(ListPartitionReassignmentsRequest, timeout_ms=REQUEST_TIMEOUT_MS, topics=None)
            if resp.error_code == 0:
                reassigning = {(t.name, p.partition_index) for t in resp.topics for p in t.partitions}
        except KafkaCallError:
            pass
    reports = [getattr(o, r) for r in REPORTS]
    describe_configs = not any(reports)
    describe_partitions = not o.topics_with_overrides
    for t in described:
        entries = configs.get(t.name, [])
        parts = sorted(t.partitions, key=lambda p: p.partition)
        if describe_configs:
            overridden = [(n, v) for n, v, is_default in entries if not is_default]
            if not o.topics_with_overrides or overridden:
                line = f"Topic: {t.name}"
                if t.topic_id is not None and t.topic_id.int != 0:
                    line += f"\tTopicId: {uuid_text(t.topic_id)}"
                rf = len(parts[0].replicas) if parts else 0
                line += f"\tPartitionCount: {len(parts)}\tReplicationFactor: {rf}"
                line += "\tConfigs: " + ",".join(f"{n}={v}" for n, v in overridden)
                print(line)
        if not describe_partitions:
            continue
        min_isr = int(next((v for n, v, _ in entries if n == "min.insync.replicas"), "1") or 1)
        for p in parts:
            has_leader = p.leader >= 0
            shown = describe_configs or (
                (o.under_replicated_partitions and len(p.replicas) - len(p.isr) > 0)
                or (o.unavailable_partitions and (not has_leader or p.leader not in live))
                or (o.under_min_isr_partitions and (not has_leader or len(p.isr) < min_isr))
                or (o.at_min_isr_partitions and len(p.isr) == min_isr))
            if shown:
                print(partition_line(t.name, p, (t.name, p.partition) in reassigning))


def partition_line(topic: str, p: PartitionInfo, reassigning: bool) -> str:
    ids = lambda xs: ",".join(map(str, xs))  # noqa: E731
    line = (f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}"
            f"\tReplicas: {ids(p.replicas)}\tIsr: {ids(p.isr)}")
    line += f"\tElr: {ids(p.elr)}" if p.elr is not None else "\tElr: N/A"
    line += f"\tLastKnownElr: {ids(p.last_known_elr)}" if p.last_known_elr is not None else "\tLastKnownElr: N/A"
    return line


if __name__ == "__main__":
    sys.exit(main())
