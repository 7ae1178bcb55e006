"""The control API as an HTTP service: bad requests are refused with a 400 (or 404/405/413)
and a message while the Kafka listener keeps serving a live consumer group; recording keeps
what clients sent, within its bound; reset leaves nothing of the test before; `kcoord ctl`
drives the same API from a shell."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from urllib.request import Request, urlopen

import pytest
from clientlib import python_member
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from conftest import call, committed, unique
from kafka.protocol.admin import ListGroupsRequest, ListTransactionsRequest
from kafka.protocol.metadata import MetadataRequest

from kcoord.testing import ControlError

pytestmark = [pytest.mark.integration]


def produce(bootstrap: str, topic: str, n: int, **conf) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0


def list_transactions(bootstrap: str) -> list:
    req = ListTransactionsRequest(version=0, state_filters=[], producer_id_filters=[])
    return call(bootstrap, req, 0).transaction_states


def raw_http(url: str, data: bytes) -> tuple[int, dict | None]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    head, _, body = out.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, json.loads(body) if body else None


def http(url: str, method: str, path: str, body: bytes | None = None) -> tuple[int, dict]:
    req = Request(url + path, data=body, method=method)
    try:
        with urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except Exception as e:  # noqa: BLE001 - HTTPError carries the status and body
        return e.code, json.loads(e.read())  # type: ignore[attr-defined]


BAD = [
    ("POST", "/faults/errors", b"{not json", 400, "not JSON"),
    ("POST", "/faults/errors", b"[1, 2]", 400, "JSON object"),
    ("POST", "/faults/errors", b'{"error": "NOT_COORDINATOR"}', 400, "'api' is required"),
    ("POST", "/faults/errors", b'{"api": "NoSuchApi", "error": "NOT_COORDINATOR"}', 400, "unknown API"),
    ("POST", "/faults/errors", b'{"api": 99, "error": "NOT_COORDINATOR"}', 400, "not served"),
    ("POST", "/faults/errors", b'{"api": "Heartbeat", "error": "NO_SUCH_ERROR"}', 400, "unknown error code"),
    ("POST", "/faults/errors", b'{"api": "Heartbeat", "error": 0}', 400, "unknown error code"),
    ("POST", "/faults/errors", b'{"api": "Heartbeat", "error": 16, "count": 0}', 400, "'count'"),
    ("POST", "/faults/errors", b'{"api": "Heartbeat", "error": 16, "connection": "x"}', 400, "'connection'"),
    ("POST", "/faults/errors", b'{"api": "Heartbeat", "error": 16, "group_id": 5}', 400, "'group_id'"),
    ("POST", "/faults/latency", b'{"ms": -5}', 400, "'ms'"),
    ("POST", "/faults/latency", b'{"ms": "fast"}', 400, "'ms'"),
    ("POST", "/connections/close", b"{}", 400, "client_id"),
    ("POST", "/connections/stall", b'{"client_id": 3}', 400, "client_id"),
    ("POST", "/recording", b'{"max": 0}', 400, "'max'"),
    ("POST", "/recording", b'{"apis": ["Nope"]}', 400, "unknown API"),
    ("GET", "/requests?connection=abc", None, 400, "numbers"),
    ("POST", "/coordinator/load-in-progress", b'{"ms": 100}', 400, "partition"),
    ("POST", "/coordinator/load-in-progress", b'{"ms": 100, "partition": 50}', 400, "partition"),
    ("POST", "/groups/no-such-group/rebalance", None, 404, "no members"),
    ("POST", "/groups/no-such-group/members/m/expire", None, 404, "no group"),
    ("DELETE", "/faults/12345", None, 404, "no fault"),
    ("GET", "/no/such/route", None, 404, "no control route"),
    ("GET", "/reset", None, 405, "POST"),
    ("GET", "/brokers", None, 404, "virtual brokers are off"),
    ("POST", "/groups/g/coordinator", b'{"node": 2}', 404, "virtual brokers are off"),
]


def test_bad_control_requests_get_a_clear_answer_and_never_disturb_the_kafka_listener(kcoord, members):
    topic, group = unique("ctl-bad"), unique("ctl-bad-group")
    produce(kcoord.bootstrap, topic, 5)
    m = python_member("confluent", kcoord.bootstrap, topic, group, name="ctl-bad-member")
    members.append(m)
    m.wait_for(lambda mm: len(mm.consumed()) == 5, 60, "the first 5 records")
    generation = kcoord.control.group(group)["generation"]
    url = kcoord.control_url
    for method, path, body, status, text in BAD:
        got_status, answer = http(url, method, path, body)
        assert (got_status, text in answer.get("error", "")) == (status, True), (method, path, got_status, answer)
    # not HTTP at all, a head too large, a body too large, a truncated body
    assert raw_http(url, b"\x00\x01garbage\r\n\r\n")[0] == 400
    assert raw_http(url, b"GET /status HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")[0] == 400
    assert raw_http(url, b"POST /reset HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n")[0] == 413
    assert raw_http(url, b"POST /faults/errors HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"api\"")[0] == 400
    with pytest.raises(ControlError) as e:
        kcoord.control.inject_error("Heartbeat", "NOPE")
    assert e.value.status == 400 and "unknown error code" in e.value.message
    assert kcoord.control.faults() == []  # nothing refused was half-applied
    # the group never noticed: same generation, still consuming
    produce(kcoord.bootstrap, topic, 5)
    m.wait_for(lambda mm: len(mm.consumed()) == 10, 60, "5 more records")
    assert kcoord.control.group(group)["generation"] == generation
    assert not m.events("error") and not m.events("commit_error")


def test_recording_keeps_what_clients_sent_within_its_bound(kcoord):
    topic = unique("ctl-rec")
    kcoord.control.start_recording(max=5)
    produce(kcoord.bootstrap, topic, 1, **{"client.id": "rec-producer"})
    for _ in range(8):
        call(kcoord.bootstrap, MetadataRequest(version=1, topics=None), 1)  # client id "test"
    got = kcoord.control.requests()
    assert len(got) == 5 and [r["seq"] for r in got] == sorted(r["seq"] for r in got)
    assert all(r["api"] == "Metadata" and r["client_id"] == "test" and r["api_version"] == 1 for r in got)
    answer = json.loads(urlopen(kcoord.control_url + "/requests", timeout=10).read())
    assert answer["dropped"] > 0
    kcoord.control.start_recording(max=100, apis=["Produce", "Metadata"])  # restarts, empty
    produce(kcoord.bootstrap, topic, 2, **{"client.id": "rec-producer"})
    produces = kcoord.control.requests(api="Produce", client_id="rec-producer")
    assert produces and produces[0]["header"]["client_id"] == "rec-producer"
    assert produces[0]["body"]["topic_data"][0]["name"] == topic
    assert {r["api"] for r in kcoord.control.requests()} <= {"Produce", "Metadata"}
    first = produces[0]["seq"]
    assert all(r["seq"] > first for r in kcoord.control.requests(since=first))
    kcoord.control.stop_recording()
    assert kcoord.control.requests() == []


_FIRST: dict[str, str] = {}


def test_reset_first_fill_the_server(kcoord):
    """Leaves a topic, a group with offsets, an idempotent producer, a fault and a recording
    behind for the next test to not find."""
    topic, group = unique("ctl-reset"), unique("ctl-reset-group")
    _FIRST.update(topic=topic, group=group)
    produce(kcoord.bootstrap, topic, 3, **{"enable.idempotence": True})
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": kcoord.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    c.close()
    assert committed(kcoord.bootstrap, group, topic) == {0: 3}
    txn = Producer({"bootstrap.servers": kcoord.bootstrap, "transactional.id": f"{topic}-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, b"left open")
    txn.flush(30)  # an ongoing transaction the reset must forget
    assert [t.transactional_id for t in list_transactions(kcoord.bootstrap)] == [f"{topic}-txn"]
    kcoord.control.inject_error("Metadata", "LEADER_NOT_AVAILABLE", count=-1, topic="never-asked-for")
    kcoord.control.start_recording()
    status = kcoord.control.status()
    assert topic in status["topics"] and group in status["groups"] and status["faults"]


def test_reset_then_leaves_nothing_of_the_test_before(kcoord):
    assert _FIRST, "runs after test_reset_first_fill_the_server"
    status = kcoord.control.status()
    assert (status["topics"], status["groups"], status["faults"], status["recording"]) == ([], [], [], False)
    md = call(kcoord.bootstrap, MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False), 4)
    assert [t.name for t in md.topics] == ["__consumer_offsets"]
    assert call(kcoord.bootstrap, ListGroupsRequest(version=2), 2).groups == []
    assert list_transactions(kcoord.bootstrap) == []
    assert committed(kcoord.bootstrap, _FIRST["group"], _FIRST["topic"]) == {}
    assert not list((kcoord.log_dir).glob(f"{_FIRST['topic']}-*"))
    # the name is free again: nothing of the old partitions is in the way
    produce(kcoord.bootstrap, _FIRST["topic"], 2, **{"enable.idempotence": True})
    md = call(kcoord.bootstrap, MetadataRequest(version=4, topics=None, allow_auto_topic_creation=False), 4)
    assert sorted(t.name for t in md.topics) == ["__consumer_offsets", _FIRST["topic"]]


def test_reset_answers_within_a_bound_with_what_it_dropped(kcoord):
    topics = [unique("ctl-many") for _ in range(20)]
    admin = AdminClient({"bootstrap.servers": kcoord.bootstrap})
    from confluent_kafka.admin import NewTopic

    for f in admin.create_topics([NewTopic(t, 2, 1) for t in topics]).values():
        f.result(30)
    answer = kcoord.control.reset()
    assert answer["dropped"]["topics"] == 20 and answer["took_ms"] > 0
    assert kcoord.control.status()["topics"] == []
    deadline = time.monotonic() + 30  # the renamed directories are deleted by a thread
    while [p for p in kcoord.log_dir.iterdir() if p.name.endswith("-delete")] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in kcoord.log_dir.iterdir() if p.name.endswith("-delete")]


def test_kcoord_ctl_drives_the_same_api(kcoord):
    def ctl(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kcoord.server", "ctl", "--url", kcoord.control_url, *args],
                              capture_output=True, text=True, timeout=60)

    out = ctl("error", "OffsetCommit", "NOT_COORDINATOR", "--count", "2", "--group", "g1")
    assert out.returncode == 0, out.stderr
    rule = json.loads(out.stdout)
    assert (rule["api"], rule["error"], rule["count"], rule["group_id"]) == ("OffsetCommit", "NOT_COORDINATOR", 2, "g1")
    assert json.loads(ctl("latency", "250", "--api", "Fetch").stdout)["ms"] == 250
    assert [f["kind"] for f in json.loads(ctl("faults").stdout)] == ["error", "latency"]
    bad = ctl("error", "OffsetCommit", "NOT_A_CODE")
    assert bad.returncode == 1 and "HTTP 400" in bad.stderr and "unknown error code" in bad.stderr
    assert json.loads(ctl("clear").stdout) == {"removed": 2}
    assert json.loads(ctl("status").stdout)["faults"] == []
    unreachable = subprocess.run([sys.executable, "-m", "kcoord.server", "ctl", "--url", "http://127.0.0.1:1", "status"],
                                 capture_output=True, text=True, timeout=60)
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr
