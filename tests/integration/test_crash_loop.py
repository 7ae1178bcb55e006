"""Crash consistency: 50 SIGKILL/restart cycles while a real client (confluent-kafka) keeps
committing. After every restart each partition's committed offset is at least the last one
acknowledged before the kill (zero acknowledged commits lost) and at most the last one sent,
and no segment is left torn (recovery cut only unacknowledged bytes)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

from conftest import unique
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer import OffsetFetchRequest
from test_offsets_retention import call

CYCLES = int(os.environ.get("KCOORD_CRASH_CYCLES", "50"))
PARTITIONS = 4

COMMITTER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    bootstrap, topic, group, parts = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "socket.timeout.ms": 2000, "reconnect.backoff.max.ms": 100})
    n = 0
    while True:
        n += 1
        print("TRY", n, flush=True)
        try:
            c.commit(offsets=[TopicPartition(topic, p, n) for p in range(parts)], asynchronous=False)
        except KafkaException:
            time.sleep(0.02)
            continue
        print("ACK", n, flush=True)
""")


class Progress:
    def __init__(self, proc: subprocess.Popen) -> None:
        self.acked = self.tried = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            word, _, n = line.strip().partition(" ")
            with self.lock:
                if word == "ACK":
                    self.acked = max(self.acked, int(n))
                elif word == "TRY":
                    self.tried = max(self.tried, int(n))

    def snapshot(self) -> tuple[int, int]:
        with self.lock:
            return self.acked, self.tried


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    deadline = time.monotonic() + 60
    while True:
        try:
            r = call(bootstrap, OffsetFetchRequest(group_id=group, topics=None, require_stable=False), 7)
            if r.error_code == 0:
                return {p.partition_index: p.committed_offset for t in r.topics if t.name == topic
                        for p in t.partitions}
        except (OSError, AssertionError):
            pass  # not listening yet / closed while starting
        assert time.monotonic() < deadline, "offsets never became fetchable"
        time.sleep(0.05)


def test_fifty_kill_cycles_lose_no_acknowledged_commit(kcoord):
    topic, group = unique("crash"), unique("crash-group")
    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    proc = subprocess.Popen([sys.executable, "-c", COMMITTER, kcoord.bootstrap, topic, group, str(PARTITIONS)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    progress = Progress(proc)
    try:
        for cycle in range(CYCLES):
            start = progress.snapshot()[0]
            deadline = time.monotonic() + 60
            while progress.snapshot()[0] < start + 3:  # some commits acknowledged by this server life
                assert time.monotonic() < deadline, f"cycle {cycle}: no commit acknowledged"
                time.sleep(0.01)
            kcoord.kill()
            acked, tried = progress.snapshot()
            kcoord.start()
            got = committed(kcoord.bootstrap, group, topic)
            assert set(got) == set(range(PARTITIONS)), (cycle, got)
            # tried may grow while we fetch: read it after the fetch for the upper bound
            tried = progress.snapshot()[1]
            for p, off in got.items():
                assert acked <= off <= tried, f"cycle {cycle}: partition {p} at {off}, acked {acked}, sent {tried}"
    finally:
        proc.kill()
        proc.wait()
    assert "Failed to acquire lock" not in kcoord.log_text()
