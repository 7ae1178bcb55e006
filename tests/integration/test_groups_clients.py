"""Consumer groups with real clients (issue: consumer groups with real clients).

Three members from three libraries -- confluent-kafka (librdkafka), kafka-python 3 and aiokafka,
all with the roundrobin assignor -- share one group on a 6-partition topic, each in its own
process (tests/clientlib.py `python_member`), so that a test can close one cleanly (LeaveGroup)
or SIGKILL it (no LeaveGroup). What the members print (their rebalance callbacks) is what is
checked, plus DescribeGroups/ListGroups/DeleteGroups through kafka-python's KafkaAdminClient and
confluent-kafka's AdminClient.
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from clientlib import Background, ClientError, python_member, wait_balanced
from confluent_kafka import Consumer, ConsumerGroupState, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from conftest import removals, unique
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = pytest.mark.integration

PARTITIONS = 6
SESSION_MS = 10_000
# A static member restarted "within its session" must be back before this: long enough for a
# new client process to start and rejoin on a busy machine.
STATIC_SESSION_MS = 45_000
HEARTBEAT_MS = 1_000
LIBS = ("kafka-python", "aiokafka", "confluent")


@pytest.fixture
def kp_admin(kcoord) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, request_timeout_ms=15000)
    yield admin
    admin.close()


def start(members: list[Background], kcoord, lib: str, topic: str, group: str, name: str,
          instance_id: str | None = None, session_ms: int = SESSION_MS) -> Background:
    m = python_member(lib, kcoord.bootstrap, topic, group, instance_id=instance_id, name=name,
                      session_timeout_ms=session_ms, heartbeat_interval_ms=HEARTBEAT_MS)
    members.append(m)
    return m


def group_log(kcoord) -> str:
    return "\n".join(ln for ln in kcoord.log_text().splitlines() if "kcoord.group" in ln)[-8000:]


def balanced(kcoord, ms: list[Background], timeout: float, what: str, group: str) -> list[set[int]]:
    """wait_balanced; on failure the message adds the server's group log and DescribeGroups."""
    try:
        return wait_balanced(ms, PARTITIONS, timeout, what)
    except ClientError as e:
        try:
            admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, request_timeout_ms=10000)
            try:
                desc = repr(admin.describe_groups([group])[group])
            finally:
                admin.close()
        except Exception as d:  # noqa: BLE001 - only for the report
            desc = f"(DescribeGroups failed: {d!r})"
        raise ClientError(f"{e}\n--- DescribeGroups ---\n{desc}\n--- kcoord group log ---\n{group_log(kcoord)}") from None


def describe(admin: KafkaAdminClient, group: str) -> dict:
    return admin.describe_groups([group])[group]


def assignments_described(desc: dict) -> dict[str, set[int]]:
    """client_id -> partitions, from DescribeGroups' member_assignment as kafka-python decodes it."""
    out = {}
    for m in desc["members"]:
        parts: set[int] = set()
        for a in m["member_assignment"]["assigned_partitions"]:
            parts |= set(a["partitions"])
        out[m["client_id"]] = parts
    return out


def callbacks(m: Background) -> list[dict]:
    return [e for e in m.events() if e["kind"] in ("assigned", "revoked", "lost")]


@pytest.mark.compat("confluent-kafka", "group join", "rebalance on leave")
@pytest.mark.compat("kafka-python", "group join", "rebalance on leave")
@pytest.mark.compat("aiokafka", "group join", "rebalance on leave")
def test_three_libraries_share_a_group_and_take_over(kcoord, kp_admin, members):
    topic, group = unique("grp"), unique("mixed")
    kp_admin.create_topics([NewTopic(topic, PARTITIONS, 1)])

    kp = start(members, kcoord, "kafka-python", topic, group, "kp")
    aio = start(members, kcoord, "aiokafka", topic, group, "aio")
    ck = start(members, kcoord, "confluent", topic, group, "ck")
    owned = balanced(kcoord, [kp, aio, ck], 60, "three members", group)
    assert [len(o) for o in owned] == [2, 2, 2], owned  # roundrobin: 6 partitions over 3 members
    desc = describe(kp_admin, group)
    assert desc["group_state"] == "Stable", desc
    assert desc["protocol_type"] == "consumer" and desc["protocol_data"] == "roundrobin", desc
    # what the coordinator holds is what each member was told
    assert assignments_described(desc) == {"kp": owned[0], "aio": owned[1], "ck": owned[2]}, desc

    # A clean close sends LeaveGroup: the others take over without waiting for the session to
    # expire (the server's log says which of the two removed the member).
    assert ck.close() == 0, ck.describe()
    owned = balanced(kcoord, [kp, aio], 60, "take-over after confluent's close", group)
    assert removals(kcoord, group) == (1, 0), group_log(kcoord)
    assert [len(o) for o in owned] == [3, 3]
    assert ck.events("closed"), ck.describe()

    # A new member (librdkafka again) joins: three members again.
    ck2 = start(members, kcoord, "confluent", topic, group, "ck2")
    balanced(kcoord, [kp, aio, ck2], 60, "three members again", group)

    # SIGKILL: no LeaveGroup; the coordinator removes the member when its session expires.
    t0 = time.monotonic()
    aio.kill()
    owned = balanced(kcoord, [kp, ck2], SESSION_MS / 1000 + 45, "take-over after aiokafka's SIGKILL", group)
    took = time.monotonic() - t0
    # its last heartbeat was at most one interval before the kill
    assert took >= (SESSION_MS - 2 * HEARTBEAT_MS) / 1000, f"member expired after only {took:.1f} s"
    assert [len(o) for o in owned] == [3, 3]
    desc = describe(kp_admin, group)
    assert desc["group_state"] == "Stable" and sorted(assignments_described(desc)) == ["ck2", "kp"], desc
    for m in (kp, ck2):
        assert not m.events("commit_error") and not m.events("error"), m.describe()


@pytest.mark.compat("confluent-kafka", "static membership")
def test_static_member_restart_keeps_its_partitions_without_rebalance(kcoord, kp_admin, members):
    topic, group = unique("static"), unique("static-group")
    kp_admin.create_topics([NewTopic(topic, PARTITIONS, 1)])

    # aiokafka first, so that it leads the group (computes the assignment): kafka-python 3.0.12's
    # RoundRobinPartitionAssignor, as leader, drops dynamic members when static and dynamic ones
    # alternate in the JoinGroup member list (it `itertools.groupby`s unsorted (instance id,
    # member id) pairs into a dict, so the last run of dynamic members overwrites the first): the
    # member list [kp, ck-static, aio] gives kp nothing, on Apache Kafka as well.
    aio = start(members, kcoord, "aiokafka", topic, group, "aio")
    aio.wait_for(lambda m: m.assignment() == set(range(PARTITIONS)), 60, "the first member's assignment")
    kp = start(members, kcoord, "kafka-python", topic, group, "kp")
    ck = start(members, kcoord, "confluent", topic, group, "ck", instance_id="ck-static-1",
               session_ms=STATIC_SESSION_MS)
    owned = balanced(kcoord, [kp, aio, ck], 60, "three members", group)
    static_parts = owned[2]
    desc = describe(kp_admin, group)
    assert desc["group_state"] == "Stable"
    (static_before,) = [m for m in desc["members"] if m["group_instance_id"] == "ck-static-1"]
    generation = ck.events("assigned")[-1]["generation"]
    others_before = {m.name: callbacks(m) for m in (kp, aio)}
    assert all(m.events("assigned")[-1]["generation"] == generation for m in (kp, aio))

    # The static member's process dies and comes back within its session timeout.
    ck.kill()
    ck_again = start(members, kcoord, "confluent", topic, group, "ck", instance_id="ck-static-1",
                     session_ms=STATIC_SESSION_MS)
    ck_again.wait_for(lambda m: m.assignment() is not None, STATIC_SESSION_MS / 1000 - 5,
                      "the static member's assignment")
    assert ck_again.assignment() == static_parts
    assert ck_again.events("assigned")[-1]["generation"] == generation  # no new generation

    # A rebalance would reach the others through their next heartbeat (every HEARTBEAT_MS): give
    # them a few intervals, and the coordinator time to have expired the old member id.
    time.sleep(3 * HEARTBEAT_MS / 1000)
    desc = describe(kp_admin, group)
    assert desc["group_state"] == "Stable", desc
    (static_after,) = [m for m in desc["members"] if m["group_instance_id"] == "ck-static-1"]
    assert static_after["member_id"] != static_before["member_id"]  # the new process, same identity
    assert len(desc["members"]) == 3
    assert assignments_described(desc)["ck"] == static_parts
    for m in (kp, aio):
        assert callbacks(m) == others_before[m.name], f"{m.name} saw a rebalance\n{m.describe()}"
    assert [kp.assignment(), aio.assignment()] == owned[:2]


def test_describe_list_delete_groups_with_admin_clients(kcoord, kp_admin, members):
    topic, group = unique("adm"), unique("adm-group")
    kp_admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    ck_admin = AdminClient({"bootstrap.servers": kcoord.bootstrap})

    a = start(members, kcoord, "confluent", topic, group, "ck")
    b = start(members, kcoord, "kafka-python", topic, group, "kp")
    balanced(kcoord, [a, b], 60, "two members", group)

    # ListGroups / DescribeGroups through both admin clients.
    listed = {g["group_id"]: g for g in kp_admin.list_groups()}
    assert listed[group]["protocol_type"] == "consumer" and listed[group]["group_state"] == "Stable"
    ck_listed = ck_admin.list_consumer_groups(request_timeout=15).result(30)
    assert not ck_listed.errors, ck_listed.errors
    (ck_listing,) = [g for g in ck_listed.valid if g.group_id == group]
    assert ck_listing.state == ConsumerGroupState.STABLE and not ck_listing.is_simple_consumer_group
    d = ck_admin.describe_consumer_groups([group], request_timeout=15)[group].result(30)
    assert d.state == ConsumerGroupState.STABLE and d.partition_assignor == "roundrobin"
    assert sorted(m.client_id for m in d.members) == ["ck", "kp"]
    described = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in d.members}
    assert described == {"ck": a.assignment(), "kp": b.assignment()}
    assert d.coordinator.port == kcoord.port

    # DeleteGroups while members remain: NON_EMPTY_GROUP from both clients.
    assert kp_admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
    with pytest.raises(KafkaException) as exc:
        ck_admin.delete_consumer_groups([group], request_timeout=15)[group].result(30)
    assert exc.value.args[0].name() == "NON_EMPTY_GROUP"

    # After both leave, the group is Empty (its offsets are kept) and can be deleted.
    assert a.close() == 0 and b.close() == 0
    desc = describe(kp_admin, group)
    assert desc["group_state"] == "Empty" and desc["members"] == [], desc
    assert ck_admin.delete_consumer_groups([group], request_timeout=15)[group].result(30) is None
    assert describe(kp_admin, group)["group_state"] == "Dead"
    assert group not in {g["group_id"] for g in kp_admin.list_groups()}
    assert kp_admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}

    # A group that only ever committed offsets (no members, protocol type ""): kafka-python
    # deletes it, and its offsets go with it.
    simple = unique("offsets-only")
    c = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": simple, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    finally:
        c.close()
    assert kp_admin.list_group_offsets({simple: None})[simple]
    assert simple in {g["group_id"] for g in kp_admin.list_groups()}
    assert kp_admin.delete_groups([simple]) == {simple: "OK"}
    assert simple not in {g["group_id"] for g in kp_admin.list_groups()}
    assert not kp_admin.list_group_offsets({simple: None})[simple]
