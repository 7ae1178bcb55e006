"""The Spark compaction of topics with cleanup.policy=compact (Kafka Streams changelogs,
schema registries), beside a running kcoord, with the cleaner semantics __consumer_offsets
gets: `kcoord compact` cleans a compacted topic and __consumer_offsets in one pass and the
server swaps the cleaned segments in while it serves; a consumer reading the topic from the
start then sees, for every key, its latest value at its original offset (older values of a
key are gone, the active segment untouched), tombstones survive the first cleaning and
disappear in a later one, and a restart reads the same. A topic without `compact` is left
alone.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pyspark  # noqa: F401  (make test installs it: failing here means setup is incomplete)
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import ROOT, committed
from test_sidecar_server import properties, wait_for
from test_topic_admin import ck_create, commit

from kcoord.storage.swap import segment_bases

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

KEYS = 40
ROUNDS = 15
DEAD = {f"key-{i}" for i in range(0, KEYS, 8)}  # deleted with a tombstone in the last round


def produce_rounds(bootstrap: str, topic: str) -> list[tuple[int, str, str | None]]:
    """ROUNDS values for each of KEYS keys, one small batch at a time (many segments), then
    tombstones for DEAD, then enough of other keys to roll the segment holding them (so the
    first cleaning cleans them); returns (offset, key, value) of everything written."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    written: list[tuple[int, str, str | None]] = []

    def done(err, msg):
        assert err is None, err
        written.append((msg.offset(), msg.key().decode(), None if msg.value() is None else msg.value().decode()))

    for r in range(ROUNDS):
        for i in range(KEYS):
            p.produce(topic, key=f"key-{i}", value=f"value-{r}-{i}-" + "x" * 40, partition=0, on_delivery=done)
        assert p.flush(30) == 0
    for k in sorted(DEAD):
        p.produce(topic, key=k, value=None, partition=0, on_delivery=done)
    assert p.flush(30) == 0
    for i in range(3 * KEYS):
        p.produce(topic, key=f"filler-{i % 5}", value="y" * 60, partition=0, on_delivery=done)
        if i % KEYS == KEYS - 1:
            assert p.flush(30) == 0
    assert p.flush(30) == 0
    return sorted(written)


def read_all(bootstrap: str, topic: str) -> list[tuple[int, str, str | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, low)])
        out: list[tuple[int, str, str | None]] = []
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.key().decode(), None if m.value() is None else m.value().decode()))
        assert out and out[-1][0] == high - 1, (low, high, out[-3:])
        return out
    finally:
        c.close()


def latest(records) -> dict[str, tuple[int, str | None]]:
    out: dict[str, tuple[int, str | None]] = {}
    for off, k, v in records:
        out[k] = (off, v)
    return out


def log_bytes(srv, partition_dir: str) -> int:
    d = srv.log_dir / partition_dir
    return sum(f.stat().st_size for f in d.iterdir() if f.name.endswith(".log"))


def kcoord_compact(tmp_path, srv) -> str:
    done = subprocess.run([sys.executable, "-m", "kcoord.server", "compact", str(properties(tmp_path / "s.properties", srv)),
                           "--master", "local[1]"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_compacted_topic_is_compacted_beside_the_running_server(kcoord_factory, tmp_path):
    srv = kcoord_factory({"offsets.topic.num.partitions": "2", "offsets.topic.segment.bytes": "4096",
                          "kcoord.compaction.handoff.check.ms": "100"})
    b = srv.bootstrap
    ck_create(b, "changelog", 1, {"cleanup.policy": "compact", "segment.bytes": "4096",
                                  "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01"})
    ck_create(b, "plain", 1, {"segment.bytes": "4096"})
    written = produce_rounds(b, "changelog")
    produce_rounds(b, "plain")
    for i in range(80):  # enough to roll the group's __consumer_offsets partition
        commit(b, "g", {("changelog", 0): i + 1})
    expected = latest(written)
    segments_before = segment_bases(str(srv.log_dir / "changelog-0"))
    bytes_before = log_bytes(srv, "changelog-0")
    plain_before = segment_bases(str(srv.log_dir / "plain-0"))
    assert len(segments_before) > 5

    out = kcoord_compact(tmp_path, srv)
    assert "changelog-0" in out and "swapped in by the running server" in out, out
    assert "ok (records" in out and "ok (coordinator" in out, out  # --verify for both kinds
    assert "plain-0" not in out
    after = segment_bases(str(srv.log_dir / "changelog-0"))
    assert after[-1] == segments_before[-1]  # the active segment is untouched
    assert log_bytes(srv, "changelog-0") < bytes_before / 3
    assert segment_bases(str(srv.log_dir / "plain-0")) == plain_before

    got = read_all(b, "changelog")
    assert len(got) < len(written)
    assert set(got) <= set(written)  # every record kept is the one written at that offset
    assert latest(got) == expected  # every key's latest value (tombstones too, for now)
    tomb_offsets = {expected[k][0] for k in DEAD}
    assert {o for o, _, v in got if v is None} == tomb_offsets  # they survive their first cleaning
    assert max(tomb_offsets) < after[-1]  # ... which cleaned them (not in the active segment)
    assert committed(b, "g", "changelog") == {0: 80}

    # A later pass, past the tombstones' delete horizon (delete.retention.ms=0): they go.
    p = Producer({"bootstrap.servers": b, "linger.ms": 0})
    for i in range(KEYS * 2):  # new, dirty records for the next pass
        p.produce("changelog", key=f"late-{i % 5}", value="y" * 60, partition=0)
        p.flush(10)
    wait_for(lambda: len(segment_bases(str(srv.log_dir / "changelog-0"))) > len(after), 30, "a roll")
    kcoord_compact(tmp_path, srv)
    final = read_all(b, "changelog")
    survivors = set(latest(final))
    assert not any(v is None for _, k, v in final if k in DEAD), [r for r in final if r[1] in DEAD]
    assert not (DEAD & survivors)
    assert {k: v for k, v in latest(final).items() if k.startswith("key-")} == {
        k: v for k, v in expected.items() if k.startswith("key-") and k not in DEAD}
    srv.restart()
    assert read_all(b, "changelog") == final
