"""Start-up and shutdown as an operator sees them: config files, --override, the log-dir
lock, SIGTERM."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

from conftest import ROOT, KcoordProcess, free_port
from kafka.admin import KafkaAdminClient


def _cluster(bootstrap: str) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return admin.describe_cluster()
    finally:
        admin.close()


def test_sigterm_exits_zero_after_a_clean_shutdown(kcoord):
    assert kcoord.stop(signal.SIGTERM) == 0
    assert "kcoord shut down" in kcoord.log_text()


def test_second_server_on_the_same_log_dir_is_refused(kcoord, tmp_path):
    other = KcoordProcess(kcoord.log_dir)
    args = [sys.executable, "-m", "kcoord.server", "serve"]
    for k, v in other.overrides.items():
        args += ["--override", f"{k}={v}"]
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Failed to acquire lock on file .lock" in r.stderr
    assert kcoord.alive()


def test_properties_file_then_overrides(tmp_path):
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text(
        "# a Kafka-style file\n"
        "node.id=7\n"
        f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
        f"log.dirs={tmp_path / 'data'}\n"
        "num.partitions=3\n"
    )
    r = _run_and_describe(["serve", str(props), "--override", "num.partitions=4"], port)
    assert r["controller_id"] == 7 and [b["broker_id"] for b in r["brokers"]] == [7]


def test_toml_file(tmp_path):
    port = free_port()
    cfg = tmp_path / "server.toml"
    cfg.write_text(f'"node.id" = 9\nlisteners = "PLAINTEXT://127.0.0.1:{port}"\n[log]\ndirs = "{tmp_path / "d"}"\n')
    r = _run_and_describe(["serve", str(cfg)], port)
    assert r["controller_id"] == 9


def test_unknown_setting_is_reported_like_kafka(kcoord_factory):
    """Only a name Kafka does not know is warned about: Kafka's own names that kcoord does not
    use (a server.properties written for Kafka carries many) are ignored quietly."""
    kafka_names = {"offsets.topic.replication.factor": "3", "log.cleaner.threads": "2", "num.network.threads": "3",
                   "background.threads": "10", "listener.name.plaintext.ssl.keymanager.algorithm": "PKIX"}
    srv = kcoord_factory({**kafka_names, "no.such.setting": "1", "listener.name.plaintext.no.such.thing": "x"})
    assert srv.alive()  # listening: the start-up's warnings are written
    log = srv.log_text().splitlines()
    warned = [ln for ln in log if " WARNING " in ln and "was supplied but isn't a known config." in ln]
    assert sorted(ln.split("'")[1] for ln in warned) == ["listener.name.plaintext.no.such.thing", "no.such.setting"]
    assert not [ln for ln in log if any(n in ln for n in kafka_names) and "WARN" in ln]


def test_bad_value_for_a_known_setting_is_refused():
    r = subprocess.run([sys.executable, "-m", "kcoord.server", "serve", "--override", "num.partitions=many"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "bad value for num.partitions" in r.stderr


def _run_and_describe(argv: list[str], port: int) -> dict:
    proc = subprocess.Popen([sys.executable, "-m", "kcoord.server", *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read().decode()  # type: ignore[union-attr]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        return _cluster(f"127.0.0.1:{port}")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
