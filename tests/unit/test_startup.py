"""What keeps `kcoord serve` quick to start: the package inits it skips, the
__consumer_offsets partitions it declares instead of creating (bench/bench_startup.py measures
the time itself)."""
from __future__ import annotations

import asyncio
import os
import struct
import subprocess
import sys
import uuid
from pathlib import Path

from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.storage.log_manager import LogManager

ROOT = Path(__file__).resolve().parents[2]


def test_serving_imports_no_client_library_and_the_deferred_inits_still_run_on_demand():
    code = """
import sys
from kcoord.server.lazy_imports import defer_package_inits
defer_package_inits()
import kcoord.server.app
import kcoord.server.handlers
skipped = [m for m in ("kafka.admin", "kafka.consumer", "kafka.producer", "kafka.protocol.admin.client_quotas",
                       "aiokafka.client", "aiokafka.record.memory_records", "prometheus_client")
           if m in sys.modules]
assert not skipped, skipped
from kafka import KafkaConsumer             # the real kafka/__init__.py runs now
from kafka.protocol.admin import AlterConfigsRequest
import aiokafka
assert aiokafka.AIOKafkaConsumer and KafkaConsumer and AlterConfigsRequest
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_declared_partition_gets_its_directory_at_its_first_lookup(tmp_path):
    logs = LogManager(str(tmp_path))
    tid = uuid.uuid4()
    for p in range(3):
        logs.declare(OFFSETS_TOPIC, p, topic_id=tid)
    assert os.listdir(tmp_path) == []
    assert logs.existing(OFFSETS_TOPIC, 1) is None
    plog = logs.get(OFFSETS_TOPIC, 1)
    assert plog is not None and logs.existing(OFFSETS_TOPIC, 1) is plog
    assert sorted(os.listdir(tmp_path)) == [f"{OFFSETS_TOPIC}-1"]
    assert logs.topic_ids[OFFSETS_TOPIC] == tid
    plog.append_records([(b"k", b"v")], 0)
    logs.close()
    reopened = LogManager(str(tmp_path))  # a restart finds the one partition that exists
    assert reopened.existing(OFFSETS_TOPIC, 1).log_end_offset == 1
    assert reopened.existing(OFFSETS_TOPIC, 0) is None
    reopened.close()


def test_a_new_server_answers_api_versions_before_loading_any_other_api_and_loads_one_at_its_first_request(
        tmp_path):
    # a fresh interpreter: what this one has imported says nothing about a new server
    code = """
import asyncio, struct, sys
from kcoord.server.lazy_imports import defer_package_inits
defer_package_inits()
from kcoord.server.broker import Broker
from kcoord.server.config import Config
from kcoord.server.node import dispatcher_for

LAZY = ("kcoord.server.handlers.groups", "kcoord.server.handlers.metadata", "kcoord.server.group.coordinator", "kcoord.server.data_plane",
        "kcoord.server.txn.service", "kcoord.storage.log", "kafka.protocol.consumer.group",
        "kafka.protocol.metadata.metadata", "kcoord.server.security.sasl", "kcoord.server.security.authorizer")

def frame(key, version, body):
    return struct.pack(">hhih", key, version, 7, 1) + b"t" + body

async def main():
    broker = Broker(Config({"log.dirs": sys.argv[1]}))
    await broker.start()
    broker.start_background()
    d = dispatcher_for(broker)
    out = d.handle(frame(18, 3, b"\\x00" + b"\\x07kcoord\\x040.1\\x00"), "127.0.0.1")
    assert struct.unpack(">iih", out[:10])[1:] == (7, 0), out[:10]  # size, correlation id, error code
    loaded = [m for m in LAZY if m in sys.modules]
    assert not loaded, loaded
    out = d.handle(frame(3, 1, struct.pack(">i", -1)), "127.0.0.1")  # Metadata v1, all topics
    assert struct.unpack(">ii", out[:8])[1] == 7, out[:8]
    assert "kcoord.server.handlers.metadata" in sys.modules and "kafka.protocol.metadata.metadata" in sys.modules
    assert "kcoord.server.group.coordinator" not in sys.modules
    await broker.stop()
    print("ok")

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "data")], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


async def test_a_group_joined_before_the_background_start_is_not_dropped_by_loading(tmp_path):
    # With two listeners, a JoinGroup can arrive on the first while the second starts, before
    # start_background: it builds the coordinator at its first use on an empty directory. The
    # start-up load must not then drop the group (its parked join answered NOT_COORDINATOR).
    from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

    from kcoord.protocol.errors import ErrorCode
    from kcoord.server.broker import Broker
    from kcoord.server.config import Config
    from kcoord.server.node import dispatcher_for
    from kcoord.server.session import Session

    broker = Broker(Config({"log.dirs": str(tmp_path / "data"), "group.initial.rebalance.delay.ms": 200}))
    await broker.start()
    dispatcher, session = dispatcher_for(broker), Session(None, "127.0.0.1")
    proto = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]

    def join(member: str) -> object:
        req = JoinGroupRequest(group_id="early", session_timeout_ms=30000, rebalance_timeout_ms=30000,
                               member_id=member, group_instance_id=None, protocol_type="consumer",
                               protocols=proto)
        header = struct.pack(">hhih", req.API_KEY, 5, 1, 1) + b"t"
        return dispatcher.handle(header + bytes(req.encode(version=5)), session)

    def decode(out: bytes) -> JoinGroupResponse:
        return JoinGroupResponse.decode(out[8:], version=5)  # past size and correlation id

    first = decode(join(""))
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    parked = join(first.member_id)  # waits out the initial rebalance delay
    assert not parked.done
    broker.start_background()
    await asyncio.wait_for(broker._background[0], 30)  # noqa: SLF001 - the start-up load
    answered: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    parked.add_callback(answered.set_result)
    out = decode(await asyncio.wait_for(answered, 30))
    assert (out.error_code, out.member_id, out.generation_id) == (0, first.member_id, 1)
    await broker.stop()
