"""The compactor against the real kcoord server process: --in-place is refused while the server
runs (it holds the segments open), and after compacting the stopped server's directory the
server starts again and loads the compacted partitions."""
from __future__ import annotations

import io
import re
import time

import pyspark  # noqa: F401, E402  (make test installs it: failing here means setup is incomplete)
import pytest

from sidecar.compact import get_spark, parse_args, run  # noqa: E402
from sidecar.testdata import write_partition  # noqa: E402

PARTS = 3


@pytest.fixture(scope="module")
def spark():
    s = get_spark("local[2]", "kcoord-compact-server-tests")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def loaded(text: str) -> tuple[dict[int, int], dict[int, str]]:
    """(partition -> records replayed, partition -> "N groups, M offsets") from the start-up log
    (tolerating both wordings the runtime has used)."""
    records = {int(m.group(2)): int(m.group(1)) for m in re.finditer(
        r"Replayed (\d+) records of __consumer_offsets-(\d+)", text)}
    records.update({int(m.group(1)): int(m.group(2)) for m in re.finditer(
        r"__consumer_offsets-(\d+) in \d+ milliseconds \((\d+) records", text)})
    records.update({int(m.group(1)): int(m.group(2)) for m in re.finditer(
        r"Loaded __consumer_offsets-(\d+) in \d+ ms: (\d+) records", text)})
    summary = {int(m.group(1)): m.group(2) for m in re.finditer(
        r"from __consumer_offsets-(\d+): (\d+ groups, \d+ offsets)", text)}
    return records, summary


def wait_loaded(srv, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while "Loaded " not in srv.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_in_place_with_the_real_server(spark, kcoord_factory, tmp_path):
    data = tmp_path / "data"
    for p in range(PARTS):
        write_partition(str(data), p, num_partitions=PARTS, seed=p)
    srv = kcoord_factory({"offsets.topic.num.partitions": str(PARTS)}, log_dir=data)
    wait_loaded(srv)
    out = io.StringIO()
    argv = [str(data), "--in-place", "--verify", "--server-address", srv.bootstrap]
    assert run(parse_args(argv), spark=spark, out=out) == 2  # refused: the server is running
    srv.stop()
    before = loaded(srv.log_text())
    assert run(parse_args([str(data), "--in-place", "--verify"]), spark=spark, out=out) == 0, out.getvalue()
    text = out.getvalue()
    assert "swapped 3 partition(s)" in text
    srv.output.write_text("")
    srv.start()
    wait_loaded(srv)
    srv.stop()
    after = loaded(srv.log_text())
    assert set(before[0]) == set(after[0]) == set(range(PARTS))
    for p in range(PARTS):
        assert after[0][p] < before[0][p]  # fewer records replayed ...
    assert before[1] == after[1]  # ... into the same groups and offsets (when the server says)
    assert "recovery dropped" not in srv.log_text()


def test_kcoord_compact_uses_the_server_configuration(tmp_path):
    """`kcoord compact [server.properties] --override ...` compacts the log directory the same
    configuration gives `kcoord serve`, in place, and refuses while that server listens."""
    import subprocess
    import sys

    from conftest import ROOT, KcoordProcess

    data = tmp_path / "data"
    for p in range(PARTS):
        write_partition(str(data), p, num_partitions=PARTS, seed=p)
    srv = KcoordProcess(data, overrides={"offsets.topic.num.partitions": str(PARTS)})
    props = tmp_path / "server.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in srv.overrides.items()))
    argv = [sys.executable, "-m", "server", "compact", str(props), "--master", "local[1]"]
    srv.start()
    wait_loaded(srv)
    refused = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    srv.stop()
    before = loaded(srv.log_text())
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "swapped 3 partition(s)" in done.stdout
    srv.output.write_text("")
    srv.start()
    wait_loaded(srv)
    srv.stop()
    after = loaded(srv.log_text())
    assert all(after[0][p] < before[0][p] for p in range(PARTS))
