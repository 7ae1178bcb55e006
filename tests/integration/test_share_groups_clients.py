"""Share groups (KIP-932), the group coordinator's side, with real share consumers:
confluent-kafka 2.16's ShareConsumer (librdkafka 2.16) and Java kafka-clients 4.3's
KafkaShareConsumer join a share group through ShareGroupHeartbeat and are assigned partitions
by the `simple` assignor; ShareGroupDescribe, ListGroups (type share) and `kcoord share-groups`
show the members; the group (Empty, with its epoch) survives a server restart, and a live
group's members, epochs and assignments survive a SIGKILL.

Records are not fetched here: ShareFetch is another part of issue 25."""
from __future__ import annotations

import threading
import time

import pytest
from conftest import call, unique
from kafka.protocol.admin.groups import ListGroupsRequest

from kcoord.protocol.share_messages import ShareGroupDescribeRequest

pytestmark = pytest.mark.integration

SERVER = {
    "group.share.min.session.timeout.ms": "6000",
    "group.share.session.timeout.ms": "10000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "1000",
}


def describe(server, group: str):
    return call(server.bootstrap, ShareGroupDescribeRequest(version=1, group_ids=[group],
                                                            include_authorized_operations=False), 1).groups[0]


def tool(server, *args: str) -> str:
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([str(root / "bin" / "kafka-share-groups.sh"), "--bootstrap-server", server.bootstrap, *args],
                       capture_output=True, text=True, timeout=60, check=True)
    return r.stdout


def wait_for(fn, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError(f"condition not met in {timeout}s: last {last!r}")


class ShareMember:
    """A confluent-kafka ShareConsumer polling in a thread until stopped (then closed: it leaves)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka import ShareConsumer

        self.c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "py-share"})
        self.c.subscribe([topic])
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.c.poll(0.2)
            except Exception as e:  # noqa: BLE001 - kept for the report
                self.errors.append(repr(e))
                time.sleep(0.2)

    def close(self) -> None:
        self.stop.set()
        self.t.join(30)
        self.c.close()


def test_confluent_share_consumers_join_and_are_assigned(kcoord_factory) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    server = kcoord_factory(SERVER)
    topic, group = unique("share-t"), unique("share-g")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    members = [ShareMember(server.bootstrap, group, topic)]
    try:
        d = wait_for(lambda: (lambda g: g if g.error_code == 0 and len(g.members) == 1
                              and g.members[0].assignment.topic_partitions else None)(describe(server, group)))
        assert (d.group_state, d.assignor_name) == ("Stable", "simple")
        m = d.members[0]
        assert m.client_id == "py-share" and m.subscribed_topic_names == [topic]
        assert {(tp.topic_name, p) for tp in m.assignment.topic_partitions for p in tp.partitions} == \
            {(topic, 0), (topic, 1)}
        members += [ShareMember(server.bootstrap, group, topic) for _ in range(2)]

        def three_reconciled():
            g = describe(server, group)
            if len(g.members) != 3 or any(x.member_epoch != g.group_epoch for x in g.members):
                return None
            return g

        d = wait_for(three_reconciled)
        per_partition = {0: 0, 1: 0}
        for x in d.members:
            for tp in x.assignment.topic_partitions:
                for p in tp.partitions:
                    per_partition[p] += 1
        # every partition is read, every member reads one, so some partition has several readers
        assert min(per_partition.values()) >= 1 and max(per_partition.values()) >= 2, per_partition
        assert all(x.assignment.topic_partitions for x in d.members)
        listed = call(server.bootstrap, ListGroupsRequest(version=5, states_filter=[], types_filter=["share"]), 5)
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [(group, "share", "Stable")]
        # kafka-share-groups.sh (kcoord share-groups, bin/kafka-share-groups.sh)
        assert tool(server, "--list").split() == [group]
        out = tool(server, "--describe", "--group", group, "--state").splitlines()
        assert out[1].split()[:2] == ["GROUP", "COORDINATOR"] and out[2].split()[0] == group
        assert out[2].split()[-2:] == ["Stable", "3"], out
        rows = [r.split() for r in tool(server, "--describe", "--group", group, "--members").splitlines()[2:]]
        assert sorted(r[1] for r in rows) == sorted(x.member_id for x in d.members)
        assert sorted(r[-1] for r in rows) == sorted(
            f"{topic}:" + ",".join(str(p) for tp in x.assignment.topic_partitions for p in sorted(tp.partitions))
            for x in d.members)
    finally:
        for m in members:
            m.close()
    # closing consumers leave the group (epoch -1)
    d = wait_for(lambda: (lambda g: g if g.group_state == "Empty" else None)(describe(server, group)), 60)
    epoch = d.group_epoch
    server.restart()
    d = wait_for(lambda: (lambda g: g if g.error_code == 0 else None)(describe(server, group)), 60)
    assert (d.group_state, d.group_epoch, d.members) == ("Empty", epoch, [])


def test_java_share_consumer_and_the_admin_client(kcoord_factory) -> None:
    """A Java KafkaShareConsumer joins and is assigned; the Java Admin client's listShareGroups
    and describeShareGroups see it. (Without ShareFetch served, kafka-clients 4.3 stops
    heartbeating after its first poll, so the member later expires: what happens after the
    first heartbeat is tested with confluent-kafka above, until ShareFetch lands.)"""
    from clientlib import java4_share_member
    from confluent_kafka.admin import AdminClient, NewTopic

    server = kcoord_factory(SERVER)
    topic, group = unique("share-t"), unique("share-g")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    java = java4_share_member(server.bootstrap, topic, group, name="java-share")
    try:
        d = wait_for(lambda: (lambda g: g if g.error_code == 0 and len(g.members) == 1
                              and g.members[0].assignment.topic_partitions else None)(describe(server, group)), 120)
        m = d.members[0]
        assert (m.client_id, m.member_epoch, m.subscribed_topic_names) == ("java-share", 1, [topic])
        assert {p for tp in m.assignment.topic_partitions for p in tp.partitions} == {0, 1}
        # the Java Admin client: listShareGroups (ListGroups, type share) and describeShareGroups
        assert java.proc.stdin is not None
        java.proc.stdin.write("describe\n")
        java.proc.stdin.flush()
        ev = java.wait_for(lambda c: c.events("described") or c.events("error"), 90, "the Admin client's view")[0]
        assert ev["kind"] == "described", ev
        assert ev["listed"] is True and ev["state"] in ("Stable", "Empty"), ev
        if ev["state"] == "Stable":
            assert ev["members"] == [["java-share", 2]], ev  # both partitions
    finally:
        java.close(60)


def test_members_survive_a_server_sigkill(kcoord_factory) -> None:
    """The group's records are durable before each answer and replayed at start-up: after a
    SIGKILL the members, their epochs and assignments are back, and the consumers, which
    reconnect and heartbeat with the epochs they had, stay members without a rebalance."""
    from confluent_kafka.admin import AdminClient, NewTopic

    server = kcoord_factory(SERVER)
    topic, group = unique("share-t"), unique("share-g")
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    for f in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        f.result(30)
    members = [ShareMember(server.bootstrap, group, topic) for _ in range(2)]
    try:
        def settled():
            g = describe(server, group)
            if len(g.members) != 2 or any(x.member_epoch != g.group_epoch for x in g.members):
                return None
            return g

        before = wait_for(settled)
        picture = sorted((x.member_id, x.member_epoch, [(tp.topic_name, sorted(tp.partitions))
                                                        for tp in x.assignment.topic_partitions])
                         for x in before.members)
        server.kill()
        server.start()
        after = wait_for(lambda: (lambda g: g if g.error_code == 0 else None)(describe(server, group)), 60)
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert sorted((x.member_id, x.member_epoch, [(tp.topic_name, sorted(tp.partitions))
                                                     for tp in x.assignment.topic_partitions])
                      for x in after.members) == picture
        # the consumers keep heartbeating into the loaded group: past a session timeout (10 s)
        # nobody was fenced and nothing was reassigned
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            g = describe(server, group)
            assert g.group_epoch == before.group_epoch and len(g.members) == 2, g
            time.sleep(0.5)
    finally:
        for m in members:
            m.close()
