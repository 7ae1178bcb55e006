"""kcoord's pytest plugin as a user's project gets it: registered by the package's `pytest11`
entry point, nothing in the project's conftest. A sample suite runs in its own pytest process:
the session server, a reset between tests, the markers, the asyncio fixture, a test's own
servers, settings of the session server, and an external server named on the command line."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SAMPLE = '''
import asyncio
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kcoord.testing import AsyncControlClient, ControlClient, KcoordProcess

STATE = {}


def produce(bootstrap, topic, n):
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, b"v%d" % i)
    assert p.flush(30) == 0


def test_first_leaves_a_topic_and_a_group(kcoord):
    assert isinstance(kcoord.control, ControlClient) and kcoord.bootstrap.startswith("127.0.0.1:")
    produce(kcoord.bootstrap, "sample-topic", 3)
    c = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": "sample-group"})
    c.commit(offsets=[TopicPartition("sample-topic", 0, 3)], asynchronous=False)
    c.close()
    STATE["port"] = kcoord.port
    assert "sample-topic" in kcoord.control.status()["topics"]


def test_second_finds_a_new_server_on_the_same_port(kcoord, kcoord_bootstrap, kcoord_control):
    assert kcoord.port == STATE["port"] and kcoord_bootstrap == kcoord.bootstrap
    status = kcoord_control.status()
    assert status["topics"] == [] and status["groups"] == []
    assert "Created topic sample-topic" not in kcoord.log_text()  # this test's lines only


@pytest.mark.kcoord_error("Produce", "TOPIC_AUTHORIZATION_FAILED", count=1, topic="denied")
def test_the_error_marker(kcoord):
    errors = []
    p = Producer({"bootstrap.servers": kcoord.bootstrap, "message.timeout.ms": 20000})
    p.produce("denied", b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


@pytest.mark.kcoord_latency(200, api="Metadata")
def test_the_latency_marker(kcoord):
    assert [(f["kind"], f["ms"], f["api"]) for f in kcoord.control.faults()] == [("latency", 200, "Metadata")]


async def test_the_asyncio_fixture(akcoord):
    assert isinstance(akcoord.control, AsyncControlClient)
    assert (await akcoord.control.status())["faults"] == []  # the latency above was reset
    rule = await akcoord.control.inject_error("Heartbeat", "REBALANCE_IN_PROGRESS", count=2)
    assert rule["count"] == 2
    assert len(await akcoord.control.faults()) == 1


def test_a_restart_is_followed_by_a_running_server(kcoord):
    kcoord.kill()
    assert not kcoord.alive()


def test_after_the_kill(kcoord):
    assert kcoord.alive() and kcoord.control.status()["faults"] == []
    assert kcoord.control.status()["topics"] == []


def test_a_server_of_its_own(kcoord_factory, kcoord):
    own = kcoord_factory({"num.partitions": "3"}, control=True)
    assert isinstance(own, KcoordProcess) and own.port != kcoord.port
    produce(own.bootstrap, "own-topic", 1)
    assert "own-topic" in own.control.status()["topics"]
    assert "own-topic" not in kcoord.control.status()["topics"]


def test_session_settings(kcoord):
    assert "offsets.topic.num.partitions" in kcoord.server.overrides
'''


def run_sample(tmp_path: Path, *args: str, files: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    for name, text in (files or {"test_sample.py": SAMPLE}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(tmp_path), *args], cwd=tmp_path, capture_output=True, text=True, timeout=280)


def test_a_suite_that_only_installs_kcoord_gets_its_fixtures_and_markers(tmp_path):
    out = run_sample(tmp_path, "--kcoord-override", "offsets.topic.num.partitions=5")
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "9 passed" in out.stdout, out.stdout[-3000:]


def test_the_plugin_can_use_a_server_started_elsewhere(tmp_path, kcoord):
    """--kcoord-bootstrap / --kcoord-control-url (a docker compose kcoord, here this suite's)."""
    sample = '''
    def test_uses_the_external_server(kcoord):
        kcoord.control.inject_error("Metadata", "LEADER_NOT_AVAILABLE", count=1, topic="marker-topic")

    def test_and_resets_it(kcoord):
        assert kcoord.control.faults() == []
    '''
    kcoord.control.inject_error("Metadata", "LEADER_NOT_AVAILABLE", count=1, topic="before")
    out = run_sample(tmp_path, "--kcoord-bootstrap", kcoord.bootstrap, "--kcoord-control-url", kcoord.control_url,
                     files={"test_external.py": sample})
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "2 passed" in out.stdout
    assert kcoord.control.faults() == []  # the other suite's reset reached this server


def test_a_half_named_external_server_is_a_usage_error(tmp_path):
    out = run_sample(tmp_path, "--kcoord-bootstrap", "127.0.0.1:1",
                     files={"test_x.py": "def test_x(kcoord):\n    pass\n"})
    assert out.returncode != 0 and "go together" in out.stdout + out.stderr
