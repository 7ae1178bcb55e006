"""Consumer groups with Java kafka-clients 3.9 consumers (JoinGroup v9, SyncGroup v5, Heartbeat v4,
LeaveGroup v5, OffsetCommit v9).

Three KcoordClient `member` processes (roundrobin, eager) share a group on a 6-partition topic:
disjoint assignments covering every partition; a clean close (KafkaConsumer.close: LeaveGroup)
hands its partitions to the others before any session could expire; a SIGKILLed member is
removed when its session times out and the others take over.
"""
from __future__ import annotations

import time
import uuid

import pytest
from clientlib import Background, ClientError, java_member, kcoord_java, wait_balanced
from conftest import removals
from kafka.admin import KafkaAdminClient, NewTopic

pytestmark = [pytest.mark.integration, pytest.mark.java]

PARTITIONS = 6
SESSION_MS = 10_000
# A static member restarted "within its session" must be back before this: long enough for a
# new JVM to start and rejoin on a busy machine.
STATIC_SESSION_MS = 45_000
HEARTBEAT_MS = 1_000  # KcoordClient member's heartbeat.interval.ms


def balanced(kcoord, ms: list[Background], timeout: float, what: str) -> list[set[int]]:
    try:
        return wait_balanced(ms, PARTITIONS, timeout, what)
    except ClientError as e:
        log = "\n".join(ln for ln in kcoord.log_text().splitlines() if "kcoord.group" in ln)[-8000:]
        raise ClientError(f"{e}\n--- kcoord group log ---\n{log}") from None


@pytest.mark.compat("java", "group join", "rebalance on leave", "commit/fetch", "consume")
def test_java_consumers_share_a_group_and_take_over(kcoord, members):
    topic, group = f"java-grp-{uuid.uuid4().hex[:8]}", f"java-group-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        # some data, so the members also fetch and commit (OffsetCommit v9 with the generation)
        kcoord_java("produce", kcoord.bootstrap, topic, 120, "j", timeout=90)

        def start(name: str) -> Background:
            m = java_member(kcoord.bootstrap, topic, group, session_timeout_ms=SESSION_MS, name=name)
            members.append(m)
            return m

        j1, j2, j3 = start("j1"), start("j2"), start("j3")
        owned = balanced(kcoord, [j1, j2, j3], 90, "three Java members")
        assert [len(o) for o in owned] == [2, 2, 2], owned
        desc = admin.describe_groups([group])[group]
        assert desc["group_state"] == "Stable" and desc["protocol_data"] == "roundrobin", desc
        assert sorted(m["client_id"] for m in desc["members"]) == ["j1", "j2", "j3"]
        j1.wait_for(lambda _: sum(len(m.consumed()) for m in (j1, j2, j3)) >= 120, 60, "the 120 records")
        # every member knows the generation it was assigned in, and it is the same
        gens = {m.events("assigned")[-1]["generation"] for m in (j1, j2, j3)}
        assert len(gens) == 1 and gens.pop() > 0

        # Clean close: LeaveGroup, so the take-over cannot have waited for a session to expire.
        assert j3.close(45) == 0, j3.describe()
        owned = balanced(kcoord, [j1, j2], 60, "take-over after j3's close")
        assert removals(kcoord, group) == (1, 0), "j3's close was not a LeaveGroup"
        assert [len(o) for o in owned] == [3, 3]
        assert j3.events("closed"), j3.describe()

        j4 = start("j4")
        balanced(kcoord, [j1, j2, j4], 90, "three Java members again")

        # SIGKILL: no LeaveGroup; the others take over once the session expires.
        t0 = time.monotonic()
        j2.kill()
        owned = balanced(kcoord, [j1, j4], SESSION_MS / 1000 + 45, "take-over after j2's SIGKILL")
        took = time.monotonic() - t0
        assert took >= (SESSION_MS - 2 * HEARTBEAT_MS) / 1000, f"member expired after only {took:.1f} s"
        assert [len(o) for o in owned] == [3, 3]
        desc = admin.describe_groups([group])[group]
        assert desc["group_state"] == "Stable", desc
        assert sorted(m["client_id"] for m in desc["members"]) == ["j1", "j4"]

        # Every record was processed once by the group (commits in onPartitionsRevoked).
        seen = [(p, o) for m in (j1, j2, j3, j4) for p, o, _ in m.consumed()]
        assert len(seen) == 120 and len(set(seen)) == 120
        for m in (j1, j4):
            assert not m.events("commit_error") and not m.events("error"), m.describe()
        for m in (j1, j4):
            assert m.close(45) == 0, m.describe()
        assert admin.describe_groups([group])[group]["group_state"] == "Empty"
    finally:
        admin.close()


@pytest.mark.compat("java", "static membership")
def test_java_static_leader_restart_keeps_its_partitions_without_rebalance(kcoord, members):
    """The static member is the group's leader (it joins first): restarted within its session
    timeout it gets its partitions back (JoinGroup v9: Kafka answers a rejoining static leader of
    a Stable group with skipAssignment, KIP-814), and nobody else sees a rebalance."""
    topic, group = f"java-static-{uuid.uuid4().hex[:8]}", f"java-static-group-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])

        def start(name: str, instance_id: str | None = None) -> Background:
            m = java_member(kcoord.bootstrap, topic, group, instance_id=instance_id,
                            session_timeout_ms=STATIC_SESSION_MS if instance_id else SESSION_MS, name=name)
            members.append(m)
            return m

        leader = start("js", "java-static-1")
        leader.wait_for(lambda m: m.assignment() == set(range(PARTITIONS)), 90, "the leader's assignment")
        j1, j2 = start("j1"), start("j2")
        owned = balanced(kcoord, [leader, j1, j2], 90, "three Java members")
        generation = leader.events("assigned")[-1]["generation"]
        others_before = {m.name: [e for e in m.events() if e["kind"] != "records"] for m in (j1, j2)}
        before = {m["client_id"]: m for m in admin.describe_groups([group])[group]["members"]}
        assert before["js"]["group_instance_id"] == "java-static-1"

        leader.kill()
        again = start("js", "java-static-1")
        again.wait_for(lambda m: m.assignment() is not None, STATIC_SESSION_MS / 1000 - 5,
                       "the static leader's assignment")
        assert again.assignment() == owned[0]
        assert again.events("assigned")[-1]["generation"] == generation

        time.sleep(3 * HEARTBEAT_MS / 1000)  # a rebalance would reach j1/j2 with their next heartbeats
        desc = admin.describe_groups([group])[group]
        assert desc["group_state"] == "Stable", desc
        after = {m["client_id"]: m for m in desc["members"]}
        assert sorted(after) == ["j1", "j2", "js"], desc
        assert after["js"]["group_instance_id"] == "java-static-1"
        assert after["js"]["member_id"] != before["js"]["member_id"]  # the new process, same identity
        assert after["js"]["member_assignment"] == before["js"]["member_assignment"]
        for m in (j1, j2):
            assert [e for e in m.events() if e["kind"] != "records"] == others_before[m.name], m.describe()
        assert [j1.assignment(), j2.assignment()] == owned[1:]
        for m in (again, j1, j2):
            assert not m.events("error"), m.describe()
    finally:
        admin.close()
