"""The compaction sidecar beside a real, running kcoord server.

- Real consumers (confluent-kafka and kafka-python 3) commit a stream of offsets while
  `kcoord sidecar` compacts __consumer_offsets on a small segment size: the server swaps
  the cleaned segments in while serving, and afterwards every acknowledged commit is what
  OffsetFetch returns, before and after a restart.
- `kcoord compact` (one pass, the server's own configuration) compacts in place while the
  server runs; the state the server loads afterwards is the same, from fewer records.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyspark  # noqa: F401  (make test installs it: failing here means setup is incomplete)
import pytest
from conftest import ROOT, KcoordProcess, committed
from kafka.admin import KafkaAdminClient, NewTopic
from test_offsets_durability import CONFLUENT_COMMITTER, KAFKA_PYTHON_COMMITTER

from kcoord.sidecar.testdata import write_partition
from kcoord.storage.swap import segment_bases

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PARTS = 3


def loaded(text: str) -> tuple[dict[int, int], dict[int, str]]:
    """(partition -> records replayed, partition -> "N groups, M offsets") from the start-up log."""
    records = {int(m.group(1)): int(m.group(2)) for m in re.finditer(
        r"Loaded __consumer_offsets-(\d+) in \d+ ms: (\d+) records", text)}
    summary = {int(m.group(1)): m.group(2) for m in re.finditer(
        r"from __consumer_offsets-(\d+): (\d+ groups, \d+ offsets)", text)}
    return records, summary


def wait_for(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def properties(path: Path, srv: KcoordProcess) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in srv.overrides.items()))
    return path


class Output:
    """A child process's stdout, collected by a thread (readable without blocking)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.lines.append(line.rstrip("\n"))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


class Committer:
    """A real consumer committing offset 1, 2, 3, ... to every partition it owns, printing
    what it tried and what was acknowledged."""

    def __init__(self, script: str, bootstrap: str, topic: str, group: str) -> None:
        self.group = group
        self.proc = subprocess.Popen([sys.executable, "-c", script, bootstrap, topic, group],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.out = Output(self.proc)

    def _last(self, word: str) -> int:
        return max((int(line.split()[1]) for line in list(self.out.lines) if line.startswith(word + " ")),
                   default=0)

    @property
    def tried(self) -> int:
        return self._last("TRY")

    @property
    def acked(self) -> int:
        return self._last("ACK")

    def poll(self) -> int:
        assert self.proc.poll() is None, f"{self.group}: the committer died"
        return self.acked

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)  # freeze: what it printed is final
        time.sleep(0.2)
        self.proc.kill()
        self.proc.wait()
        self.out.thread.join(5)


def test_commits_flow_while_the_sidecar_compacts(kcoord_factory, tmp_path):
    srv = kcoord_factory({
        "offsets.topic.num.partitions": str(PARTS),
        "offsets.topic.segment.bytes": "65536",  # rolls every second or so
        "kcoord.compaction.handoff.check.ms": "100",
        "log.cleaner.backoff.ms": "300",
        "log.cleaner.min.cleanable.ratio": "0.3",
        "group.initial.rebalance.delay.ms": "0",
    })
    topic = "compacted-while-committing"
    admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap)
    admin.create_topics([NewTopic(topic, 4, 1)])
    admin.close()
    committers = [Committer(CONFLUENT_COMMITTER, srv.bootstrap, topic, "sidecar-confluent"),
                  Committer(KAFKA_PYTHON_COMMITTER, srv.bootstrap, topic, "sidecar-kafka-python")]
    sidecar = subprocess.Popen([sys.executable, "-m", "kcoord.server", "sidecar",
                                str(properties(tmp_path / "server.properties", srv)), "--master", "local[1]"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = Output(sidecar)
    try:
        wait_for(lambda: all(c.poll() > 20 for c in committers), 90, "the first commits")
        for c in committers:  # each is its group's only member: it owns every partition
            assert f"ASSIGNED {4}" in c.out.lines, (c.group, c.out.lines[:3])

        def swapped() -> int:
            assert sidecar.poll() is None, out.text
            for c in committers:
                c.poll()
            return srv.log_text().count("swapped in compacted segment")

        # Several passes swapped in by the running server while the commits go on.
        wait_for(lambda: swapped() >= 3 and sum(x.startswith("pass ") for x in out.lines) >= 2, 180, "passes of the sidecar")
        # A second compactor is refused while the sidecar holds the cleaner lock.
        second = subprocess.run([sys.executable, "-m", "kcoord.server", "compact", str(tmp_path / "server.properties")],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert second.returncode == 2 and "another compactor" in second.stderr, second.stderr
        acked_during = [c.acked for c in committers]
        wait_for(lambda: all(c.poll() > a + 20 for c, a in zip(committers, acked_during, strict=True)),
                 60, "commits after the passes")
    finally:
        for c in committers:
            c.stop()
        sidecar.send_signal(signal.SIGTERM)
        try:
            sidecar.wait(60)
        except subprocess.TimeoutExpired:
            sidecar.kill()
    assert sidecar.wait() == 0, out.text

    def check() -> None:
        for c in committers:
            got = committed(srv.bootstrap, c.group, topic)
            assert set(got) == set(range(4)), (c.group, got)
            for p, off in got.items():
                # the last acknowledged offset, or a later one whose answer was not read
                assert c.acked <= off <= c.tried, (c.group, p, off, c.acked, c.tried)

    check()
    log_dir = Path(srv.log_dir)
    for p in range(PARTS):
        d = log_dir / f"__consumer_offsets-{p}"
        if d.exists():  # a partition no group uses has no directory (declared, never created)
            assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
    assert "Could not swap" not in srv.log_text() and "does not fit" not in srv.log_text()
    srv.stop()
    srv.start()
    check()  # the compacted log replays to the same commits
    assert "recovery dropped" not in srv.log_text()


def test_kcoord_compact_in_place_while_the_server_runs(kcoord_factory, tmp_path):
    """`kcoord compact [server.properties]` compacts the directory the same configuration
    gives `kcoord serve`, while that server runs; it reloads the same groups and offsets."""
    data = tmp_path / "data"
    for p in range(PARTS):
        write_partition(str(data), p, num_partitions=PARTS, seed=p)
    srv = kcoord_factory({"offsets.topic.num.partitions": str(PARTS),
                          "kcoord.compaction.handoff.check.ms": "100"}, log_dir=data)
    wait_for(lambda: len(loaded(srv.log_text())[0]) == PARTS, 30, "loading")
    before = loaded(srv.log_text())
    segments_before = {p: segment_bases(str(data / f"__consumer_offsets-{p}")) for p in range(PARTS)}
    done = subprocess.run([sys.executable, "-m", "kcoord.server", "compact", str(properties(tmp_path / "s.properties", srv)),
                           "--master", "local[1]"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "swapped in by the running server" in done.stdout, done.stdout
    assert "ok (coordinator" in done.stdout  # --verify is on by default
    for p in range(PARTS):
        after = segment_bases(str(data / f"__consumer_offsets-{p}"))
        assert len(after) < len(segments_before[p])
        assert after[-1] == segments_before[p][-1]  # the active segment is untouched
    srv.stop()
    srv.output.write_text("")
    srv.start()
    wait_for(lambda: len(loaded(srv.log_text())[0]) == PARTS, 30, "loading")
    after = loaded(srv.log_text())
    for p in range(PARTS):
        assert after[0][p] < before[0][p]  # fewer records replayed ...
    assert before[1] == after[1]  # ... into the same groups and offsets
    assert "recovery dropped" not in srv.log_text()
