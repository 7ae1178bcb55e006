"""Every acknowledged commit survives SIGKILL (issue: durable __consumer_offsets).

A real consumer (confluent-kafka, then kafka-python 3) joins a group and commits a stream of
increasing offsets synchronously, printing each acknowledged one. The server is SIGKILLed in
the middle of the stream and restarted on the same log directory: OffsetFetch must return,
for every partition, the last acknowledged offset (or a later one whose acknowledgement was
lost with the connection), and the group's generation and members come back from the log.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

PARTITIONS = 4

CONFLUENT_COMMITTER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer, TopicPartition
    bootstrap, topic, group = sys.argv[1:4]
    assigned = []
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "session.timeout.ms": 30000, "auto.offset.reset": "earliest"})
    c.subscribe([topic], on_assign=lambda c, ps: assigned.extend(ps))
    deadline = time.time() + 30
    while not assigned and time.time() < deadline:
        c.poll(0.1)
    print("ASSIGNED", len(assigned), flush=True)
    offset = 0
    while True:
        offset += 1
        tps = [TopicPartition(topic, p.partition, offset) for p in assigned]
        print("TRY", offset, flush=True)
        c.commit(offsets=tps, asynchronous=False)
        print("ACK", offset, flush=True)
""")

KAFKA_PYTHON_COMMITTER = textwrap.dedent("""
    import sys, time
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata
    bootstrap, topic, group = sys.argv[1:4]
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      session_timeout_ms=30000, auto_offset_reset="earliest", request_timeout_ms=5000)
    # Learn the topic's partitions before joining (3.0.12 can hang in the rejoin that follows
    # an empty first assignment; see clientlib's kafka-python member).
    deadline = time.time() + 30
    while not c.partitions_for_topic(topic) and time.time() < deadline:
        time.sleep(0.1)
    c.subscribe([topic])
    deadline = time.time() + 30
    while not c.assignment() and time.time() < deadline:
        c.poll(100)
    print("ASSIGNED", len(c.assignment()), flush=True)
    offset = 0
    while True:
        offset += 1
        print("TRY", offset, flush=True)
        c.commit({tp: OffsetAndMetadata(offset, "", -1) for tp in c.assignment()})
        print("ACK", offset, flush=True)
""")


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                got = admin.list_group_offsets({group: None})[group]
                break
            except Exception:  # noqa: BLE001 - COORDINATOR_LOAD_IN_PROGRESS while loading
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        return {tp.partition: om.offset for tp, om in got.items() if tp.topic == topic}
    finally:
        admin.close()


def _describe(bootstrap: str, group: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return admin.describe_groups([group])[group]
    finally:
        admin.close()


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_acknowledged_commits_survive_sigkill(kcoord, client):
    topic, group = f"durable-{client}", f"durable-group-{client}"
    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()

    script = CONFLUENT_COMMITTER if client == "confluent" else KAFKA_PYTHON_COMMITTER
    proc = subprocess.Popen([sys.executable, "-c", script, kcoord.bootstrap, topic, group],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    acked = tried = 0
    try:
        deadline = time.monotonic() + 180
        for line in proc.stdout:  # type: ignore[union-attr]
            word, _, n = line.strip().partition(" ")
            if word == "ASSIGNED":
                assert int(n) == PARTITIONS, "the only member must get every partition"
            elif word == "TRY":
                tried = int(n)
            elif word == "ACK":
                acked = int(n)
                if acked >= 150:
                    break
            assert time.monotonic() < deadline, "commits too slow"
        before = _describe(kcoord.bootstrap, group)
        kcoord.kill()  # SIGKILL in the middle of the commit stream
    finally:
        proc.kill()
        proc.wait()
    # read what the client had printed before we killed it
    rest = proc.stdout.read() if proc.stdout else ""  # type: ignore[union-attr]
    for line in rest.splitlines():
        word, _, n = line.partition(" ")
        if word == "ACK":
            acked = max(acked, int(n))
        elif word == "TRY":
            tried = max(tried, int(n))
    assert acked >= 150

    kcoord.start()
    committed = _committed(kcoord.bootstrap, group, topic)
    assert set(committed) == set(range(PARTITIONS))
    for p, off in committed.items():
        # the acknowledged offset, or a later one that was written but whose answer was lost
        assert acked <= off <= tried, (p, off, acked, tried)

    after = _describe(kcoord.bootstrap, group)
    assert before["group_state"] == "Stable", before
    assert after["group_state"] == "Stable", after
    assert after["protocol_type"] == "consumer"
    assert after["protocol_data"] == before["protocol_data"]
    assert [m["member_id"] for m in after["members"]] == [m["member_id"] for m in before["members"]]
    assert len(after["members"]) == 1
    assert after["members"][0]["member_assignment"] == before["members"][0]["member_assignment"]

    # the same state, rebuilt offline from the segments by the CLI
    out = subprocess.run([sys.executable, "-m", "kcoord.server", "offsets", "--log-dir", str(kcoord.log_dir),
                          "--group", group], capture_output=True, text=True, timeout=60, check=True).stdout
    lines = [ln.split() for ln in out.splitlines()[1:]]
    assert {int(cols[2]): int(cols[3]) for cols in lines} == committed
