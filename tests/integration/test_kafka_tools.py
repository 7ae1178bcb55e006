"""`kcoord topics|configs|consumer-groups` and the bin/kafka-*.sh wrappers against a kcoord
process, compared line by line with the output Kafka 3.9's tools print (TopicCommand,
ConfigCommand, ConsumerGroupCommand), their error messages and exit codes; and librdkafka's
own test-suite invocations ($KAFKA_PATH/bin/kafka-topics.sh through system())."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clientlib import python_member
from confluent_kafka import Consumer, Producer
from conftest import ROOT, unique

pytestmark = pytest.mark.integration

BIN = ROOT / "bin"
TOPIC_ID = r"[A-Za-z0-9_-]{22}"


def tool(name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """bin/kafka-<name>.sh, as $KAFKA_PATH/bin/... is run."""
    return subprocess.run([str(BIN / f"kafka-{name}.sh"), *args], capture_output=True, text=True, timeout=timeout)


def kcoord(name: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`kcoord <name>` (the same code, through the CLI)."""
    return subprocess.run([sys.executable, "-m", "kcoord.server", name, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def produce(bootstrap: str, topic: str, n: int, key_prefix: str = "k", spread: int = 0) -> None:
    """n keyed records; with `spread`, record i goes to partition i % spread (not by its key)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        where = {"partition": i % spread} if spread else {}
        p.produce(topic, key=f"{key_prefix}{i}".encode(), value=b"v%d" % i, **where)
    assert p.flush(30) == 0


def consume_and_commit(bootstrap: str, topic: str, group: str, n: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got, deadline = 0, time.monotonic() + 60
        while got < n and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got += 1
                c.commit(m, asynchronous=False)
        assert got == n
    finally:
        c.close()


# ---- librdkafka's test suite: the exact commands it runs -----------------------------------


def test_librdkafka_suite_invocations(kcoord):
    """test.c's test_kafka_topics(): system("$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server
    $BROKERS <args>"), exit status 0 expected; 0052 and 0077 create topics this way."""
    t52, t77 = unique("rdkafkatest_0052"), unique("rdkafkatest_0077")
    env = {**os.environ, "KAFKA_PATH": str(ROOT), "BROKERS": kcoord.bootstrap}

    def system(args: str) -> subprocess.CompletedProcess[str]:
        cmd = f'$KAFKA_PATH/bin/kafka-topics.sh --bootstrap-server $BROKERS {args}'
        return subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=60)

    r = system(f'--create --topic "{t52}" --replication-factor 1 --partitions 1 '
               "--config message.timestamp.type=LogAppendTime")
    # (librdkafka's names have underscores: Kafka warns about metric-name collisions first)
    assert r.returncode == 0 and r.stdout.splitlines() == [
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. "
        "To avoid issues it is best to use either, but not both.", f"Created topic {t52}."], r
    r = system(f'--create --topic "{t77}" --partitions 2 --replication-factor 1 --config cleanup.policy=compact '
               "--config segment.ms=500 --config segment.bytes=1048576 --config min.cleanable.dirty.ratio=0.01 "
               "--config delete.retention.ms=86400 --config file.delete.delay.ms=10000 "
               "--config max.compaction.lag.ms=100")
    assert r.returncode == 0, r
    described = tool("topics", "--bootstrap-server", kcoord.bootstrap, "--describe", "--topic", t77).stdout
    head = described.splitlines()[0]
    assert re.fullmatch(rf"Topic: {t77}\tTopicId: {TOPIC_ID}\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: "
                        r"cleanup.policy=compact,delete.retention.ms=86400,file.delete.delay.ms=10000,"
                        r"max.compaction.lag.ms=100,min.cleanable.dirty.ratio=0.01,segment.bytes=1048576,"
                        r"segment.ms=500", head), described
    r = system(f'--delete --topic "{t52}" ')
    assert r.returncode == 0 and r.stdout == "", r
    assert t52 not in tool("topics", "--bootstrap-server", kcoord.bootstrap, "--list").stdout.split()


# ---- kafka-topics.sh ---------------------------------------------------------------------


def test_topics_tool(kcoord_factory):
    srv = kcoord_factory()
    b = srv.bootstrap
    name = unique("cli-topic")
    r = tool("topics", "--bootstrap-server", b, "--create", "--topic", name, "--partitions", "2",
             "--replication-factor", "1", "--config", "retention.ms=60000", "--config", "max.message.bytes=2000")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"Created topic {name}.\n", "")
    # Kafka's --describe: a topic line, then one tab-led line per partition (ELR known: the
    # broker serves DescribeTopicPartitions)
    r = tool("topics", "--bootstrap-server", b, "--describe", "--topic", name)
    lines = r.stdout.splitlines()
    assert re.fullmatch(rf"Topic: {name}\tTopicId: {TOPIC_ID}\tPartitionCount: 2\tReplicationFactor: 1\t"
                        r"Configs: max.message.bytes=2000,retention.ms=60000", lines[0]), r.stdout
    assert lines[1:] == [f"\tTopic: {name}\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: "
                         for p in (0, 1)]
    assert tool("topics", "--bootstrap-server", b, "--describe", "--topic", name, "--under-replicated-partitions"
                ).stdout == ""
    overrides = tool("topics", "--bootstrap-server", b, "--describe", "--topics-with-overrides").stdout.splitlines()
    assert any(line.startswith(f"Topic: {name}\t") for line in overrides)
    assert all(not line.startswith("\t") for line in overrides)  # no partition lines
    listed = tool("topics", "--bootstrap-server", b, "--list").stdout.split("\n")
    assert name in listed and "__consumer_offsets" in listed and listed == sorted(listed[:-1]) + [""]
    assert "__consumer_offsets" not in kcoord("topics", "--bootstrap-server", b, "--list",
                                              "--exclude-internal").stdout.split()

    # errors: printed as TopicCommand prints them, exit 1
    r = tool("topics", "--bootstrap-server", b, "--create", "--topic", name, "--partitions", "1")
    assert (r.returncode, r.stdout) == (1, f"Error while executing topic command : Topic '{name}' already exists.\n")
    r = tool("topics", "--bootstrap-server", b, "--create", "--topic", name, "--if-not-exists")
    assert (r.returncode, r.stdout) == (0, "")
    r = tool("topics", "--bootstrap-server", b, "--create", "--topic", unique("x"), "--config", "no.such=1")
    assert (r.returncode, r.stdout) == (1, "Error while executing topic command : Unknown topic config name: no.such\n")
    r = tool("topics", "--bootstrap-server", b, "--create", "--topic", unique("x"), "--config", "retention.ms=abc")
    assert r.stdout == ("Error while executing topic command : Invalid value abc for configuration retention.ms: "
                        "Not a number of type LONG\n")
    r = tool("topics", "--bootstrap-server", b, "--describe", "--topic", "missing")
    assert (r.returncode, r.stdout) == (1, "Error while executing topic command : Topic 'Optional[missing]' does not "
                                           "exist as expected\n")
    assert tool("topics", "--bootstrap-server", b, "--describe", "--topic", "missing", "--if-exists").returncode == 0
    r = tool("topics", "--bootstrap-server", b, "--topic", name)
    assert r.returncode == 1 and r.stderr.startswith("Command must include exactly one action: --list, --describe, "
                                                     "--create, --alter or --delete\n")
    r = tool("topics", "--list")
    assert (r.returncode, r.stderr.splitlines()[0]) == (1, "--bootstrap-server must be specified")
    r = tool("topics", "--bootstrap-server", b, "--describe", "--config", "a=b")
    assert r.returncode == 1 and r.stderr.startswith('Option "[config]" can\'t be used with option "[describe]"')

    # --delete; the name can be created again at once; kept across a restart
    gone = unique("cli-gone")
    assert tool("topics", "--bootstrap-server", b, "--create", "--topic", gone).returncode == 0
    r = tool("topics", "--bootstrap-server", b, "--delete", "--topic", gone)
    assert (r.returncode, r.stdout) == (0, "")
    r = tool("topics", "--bootstrap-server", b, "--delete", "--topic", gone)
    assert (r.returncode, r.stdout) == (1, f"Error while executing topic command : Topic 'Optional[{gone}]' does not "
                                           "exist as expected\n")
    srv.restart()
    assert gone not in tool("topics", "--bootstrap-server", b, "--list").stdout.split()
    assert len(tool("topics", "--bootstrap-server", b, "--describe", "--topic", name).stdout.splitlines()) == 3


# ---- kafka-configs.sh ----------------------------------------------------------------------


def test_configs_tool(kcoord_factory):
    srv = kcoord_factory({"log.retention.hours": "100"})
    b = srv.bootstrap
    name = unique("cli-cfg")
    assert tool("topics", "--bootstrap-server", b, "--create", "--topic", name).returncode == 0
    r = tool("configs", "--bootstrap-server", b, "--alter", "--entity-type", "topics", "--entity-name", name,
             "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")
    assert (r.returncode, r.stdout) == (0, f"Completed updating config for topic {name}.\n")
    r = tool("configs", "--bootstrap-server", b, "--describe", "--topic", name)
    assert r.stdout.splitlines() == [
        f"Dynamic configs for topic {name} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000}"]
    r = tool("configs", "--bootstrap-server", b, "--alter", "--topic", name, "--delete-config", "retention.ms")
    assert r.returncode == 0
    every = tool("configs", "--bootstrap-server", b, "--describe", "--topic", name, "--all").stdout.splitlines()
    assert every[0] == f"All configs for topic {name} are:" and len(every) == 37
    assert "  retention.ms=360000000 sensitive=false synonyms={}" in every  # log.retention.hours=100, Kafka's way

    # brokers: this one and the cluster default; read-only configs refused as Kafka does
    r = tool("configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-default",
             "--add-config", "log.retention.ms=99999")
    assert (r.returncode, r.stdout) == (0, "Completed updating default config for brokers in the cluster.\n")
    r = tool("configs", "--bootstrap-server", b, "--alter", "--broker", "1", "--add-config", "message.max.bytes=2000000")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for broker 1.\n")
    r = tool("configs", "--bootstrap-server", b, "--describe", "--entity-type", "brokers")
    assert r.stdout.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  message.max.bytes=2000000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes=2000000, "
        "DEFAULT_CONFIG:message.max.bytes=1048588}",
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=99999 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=99999}"]
    r = tool("configs", "--bootstrap-server", b, "--alter", "--broker", "1", "--add-config", "num.partitions=3")
    assert r.returncode == 1 and r.stderr.splitlines()[1] == (
        "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.InvalidRequestException: "
        "Cannot update these configs dynamically: Set(num.partitions)")
    r = tool("configs", "--bootstrap-server", b, "--alter", "--topic", name, "--add-config", "retention.ms=abc")
    assert r.returncode == 1 and "InvalidConfigurationException: Invalid value abc for configuration retention.ms: " \
                                 "Not a number of type LONG" in r.stderr
    r = tool("configs", "--bootstrap-server", b, "--alter", "--topic", name, "--delete-config", "segment.ms")
    assert (r.returncode, r.stderr) == (1, "Invalid config(s): segment.ms\n")
    r = tool("configs", "--bootstrap-server", b, "--describe", "--entity-type", "widgets")
    assert r.returncode == 1 and r.stderr.startswith("Invalid entity type widgets, the entity type must be one of")
    # broker loggers
    r = tool("configs", "--bootstrap-server", b, "--alter", "--broker-logger", "1", "--add-config", "kcoord.data=DEBUG")
    assert (r.returncode, r.stdout) == (0, "Completed updating config for broker-logger 1.\n")
    loggers = tool("configs", "--bootstrap-server", b, "--describe", "--broker-logger", "1").stdout.splitlines()
    assert "  kcoord.data=DEBUG sensitive=false synonyms={}" in loggers

    srv.restart()
    assert tool("configs", "--bootstrap-server", b, "--describe", "--topic", name).stdout.splitlines()[1:] == [
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}"]
    assert "  message.max.bytes=2000000 " in tool("configs", "--bootstrap-server", b, "--describe", "--broker", "1"
                                                  ).stdout


# ---- kafka-consumer-groups.sh --------------------------------------------------------------


def test_consumer_groups_tool(kcoord_factory, members):
    srv = kcoord_factory()
    b = srv.bootstrap
    topic, group = unique("cli-cg"), unique("cli-group")
    assert tool("topics", "--bootstrap-server", b, "--create", "--topic", topic, "--partitions", "2").returncode == 0
    produce(b, topic, 20, spread=2)  # 10 per partition: the 12 consumed span both
    consume_and_commit(b, topic, group, 12)
    cg = lambda *a: tool("consumer-groups", "--bootstrap-server", b, *a)  # noqa: E731

    assert group in cg("--list").stdout.split()
    state_list = cg("--list", "--state").stdout.splitlines()
    assert state_list[0] == "GROUP".ljust(max(15, len(group)) + 10) + " " + "STATE".ljust(20)
    assert any(line.split() == [group, "Empty"] for line in state_list)

    # an Empty group: its committed offsets and lag, with Kafka's notice on stderr
    r = cg("--describe", "--group", group)
    assert r.stderr == f"\nConsumer group '{group}' has no active members.\n"
    lines = r.stdout.split("\n")
    assert lines[0] == "" and lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                                                   "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = [line.split() for line in lines[2:] if line]
    # (an inactive group lists the partitions it has offsets for)
    assert sum(int(r_[3]) for r_ in rows) == 12 and sum(int(r_[4]) for r_ in rows) <= 20
    assert all(int(r_[5]) == int(r_[4]) - int(r_[3]) and r_[6:] == ["-", "-", "-"] for r_ in rows)
    r = cg("--describe", "--group", "no-such-group")
    assert r.stdout == "\nError: Consumer group 'no-such-group' does not exist.\n"

    # an active member: listed with its assignment; reset is refused
    m = python_member("kafka-python", b, topic, group, name="cli-member")
    members.append(m)
    m.wait_for(lambda x: x.assignment() == {0, 1}, 90, "the member's assignment")
    described = cg("--describe", "--group", group).stdout.splitlines()
    active = [line.split() for line in described[2:] if line]
    assert [(r_[2], r_[8]) for r_ in active] == [("0", "cli-member"), ("1", "cli-member")]
    assert all(r_[7] == "/127.0.0.1" for r_ in active)
    members_out = cg("--describe", "--group", group, "--members", "--verbose").stdout.splitlines()
    assert members_out[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
    assert members_out[2].split()[2:] == ["/127.0.0.1", "cli-member", "2", "(0,1)"]
    state = cg("--describe", "--group", group, "--state").stdout.splitlines()
    assert state[2].split() == [group, f"127.0.0.1:{srv.port}", "(1)", "roundrobin", "Stable", "1"]
    r = cg("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert r.stdout.startswith(f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the "
                               "current state is Stable.")
    assert m.close(45) == 0

    # reset while inactive: dry run (the default, with Kafka's warning), execute, export
    r = cg("--reset-offsets", "--group", group, "--topic", topic, "--to-earliest")
    assert r.stderr.startswith("WARN: No action will be performed as the --execute option is missing.")
    assert r.stdout.split("\n")[1].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert [line.split()[3] for line in r.stdout.split("\n")[2:] if line] == ["0", "0"]
    before = {tuple(x.split()[2:4]) for x in cg("--describe", "--group", group).stdout.splitlines()[2:] if x}
    assert ("0", "0") not in before or ("1", "0") not in before  # the dry run changed nothing
    r = cg("--reset-offsets", "--group", group, "--all-topics", "--to-earliest", "--execute")
    assert r.returncode == 0 and "WARN" not in r.stderr
    ends = {}
    for line in cg("--describe", "--group", group).stdout.splitlines()[2:]:
        if line:
            f = line.split()
            assert f[3] == "0"
            ends[int(f[2])] = int(f[4])
    r = cg("--reset-offsets", "--group", group, "--topic", f"{topic}:0", "--to-offset", "100000", "--execute",
           "--export")
    assert r.stdout == f"{topic},0,{ends[0]}\n\n"  # clamped to the log end, as Kafka does
    r = cg("--reset-offsets", "--group", group, "--topic", topic, "--shift-by", "-3", "--execute")
    new = {int(x.split()[2]): int(x.split()[3]) for x in r.stdout.splitlines()[2:] if x}
    assert new == {0: max(0, ends[0] - 3), 1: 0}
    r = cg("--reset-offsets", "--group", group, "--topic", topic, "--to-datetime", "2000-01-01T00:00:00.000",
           "--execute")
    assert [x.split()[3] for x in r.stdout.splitlines()[2:] if x] == ["0", "0"]
    r = cg("--reset-offsets", "--group", group, "--topic", topic, "--to-latest", "--dry-run")
    assert [int(x.split()[3]) for x in r.stdout.splitlines()[2:] if x] == [ends[0], ends[1]]

    srv.restart()
    # --delete-offsets, then --delete, each kept across the restart before it
    r = cg("--delete-offsets", "--group", group, "--topic", f"{topic}:1")
    assert r.stdout.splitlines()[0] == f"Request succeed for deleting offsets with topic {topic}:1 group {group}"
    assert r.stdout.splitlines()[2:] == [f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}",
                                        f"{topic:<30} {'1':<15} {'Successful':<15}"]
    remaining = [x.split()[2] for x in cg("--describe", "--group", group).stdout.splitlines()[2:] if x]
    assert remaining == ["0"]
    r = cg("--delete", "--group", group)
    assert r.stdout == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    r = cg("--delete", "--group", group)
    assert "could not be deleted due to: java.util.concurrent.ExecutionException: " \
           "org.apache.kafka.common.errors.GroupIdNotFoundException" in r.stdout
    srv.restart()
    assert group not in cg("--list").stdout.split()


def test_tools_answer_a_server_that_is_not_there(tmp_path: Path):
    from conftest import free_port

    port = free_port()
    r = tool("topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list", timeout=30)
    assert r.returncode == 1 and r.stdout.startswith("Error while executing topic command : ")


# ---- kafka-acls.sh -------------------------------------------------------------------------


def test_acls_tool_as_librdkafka_runs_it(kcoord):
    """0109/0115/0119's invocations: what Kafka's AclCommand prints, then the server's answer
    (without an authorizer a Kafka broker refuses ACLs, and the tool exits 1)."""
    topic = unique("rdkafkatest_0109-unauthorized")
    env = {**os.environ, "KAFKA_PATH": str(ROOT)}
    cmd = (f"$KAFKA_PATH/bin/kafka-acls.sh --bootstrap-server {kcoord.bootstrap} --add --deny-principal 'User:*' "
           f"--operation All --deny-host '*' --topic '{topic}'")
    r = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=60)
    lines = r.stdout.split("\n")
    assert lines[:3] == [f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, "
                         "patternType=LITERAL)`: ",
                         " \t(principal=User:*, host=*, operation=ALL, permissionType=DENY) ", ""], r.stdout
    # (the server's words: SECURITY_DISABLED's, or that it does not serve CreateAcls at all)
    assert r.returncode == 1 and lines[3].startswith("Error while executing ACL command: "), r.stdout
    r = tool("acls", "--bootstrap-server", kcoord.bootstrap, "--add", "--allow-principal", "User:a", "--operation",
             "IdempotentWrite", "--topic", topic)
    assert r.returncode == 1 and r.stderr.startswith(
        "ResourceType TOPIC only supports operations All, Alter, AlterConfigs, Create, Delete, Describe, "
        "DescribeConfigs, Read, Write")
