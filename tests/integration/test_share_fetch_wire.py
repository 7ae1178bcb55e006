"""ShareFetch / ShareAcknowledge on the wire (issue 25), with raw requests built from
protocol/share_messages.py (no share consumer can join before ShareGroupHeartbeat is served):
share session epochs, acquiring, lock expiry and redelivery, the delivery-count limit, REJECT,
durable acknowledgements across a SIGKILL, and the share offsets APIs."""
from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_messages import (
    AlterShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
)
from kcoord.testing.process import KcoordProcess
from tests.conftest import call

ACCEPT, RELEASE, REJECT = 1, 2, 3
LOCK_MS = 1000


@pytest.fixture
def srv(tmp_path):
    s = KcoordProcess(tmp_path / "data", overrides={
        "group.share.record.lock.duration.ms": str(LOCK_MS),
        "group.share.delivery.count.limit": "3",
    })
    s.start()
    yield s
    if s.alive():
        s.stop()


def _topic(bootstrap: str, name: str, n: int, partitions: int = 1) -> uuid.UUID:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    for i in range(n):
        p.send(name, value=b"v%d" % i, partition=0)
    p.flush()
    p.close()
    spec = API_TABLE[ApiKey.METADATA]
    md = call(bootstrap, spec.request(version=12, topics=[spec.request.MetadataRequestTopic(topic_id=None, name=name)],
                                      allow_auto_topic_creation=False, include_topic_authorized_operations=False),
              12)
    return md.topics[0].topic_id


def _fetch(bootstrap, group, member, epoch, topic_id, acks=None, max_records=500, max_wait_ms=0, version=2,
           partitions=(0,)):
    P = ShareFetchRequest.FetchTopic.FetchPartition
    parts = [P(partition_index=p, acknowledgement_batches=[
        P.AcknowledgementBatch(first_offset=f, last_offset=t, acknowledge_types=types)
        for f, t, types in (acks or {}).get(p, [])]) for p in partitions]
    req = ShareFetchRequest(version=version, group_id=group, member_id=member, share_session_epoch=epoch,
                            max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=max_records,
                            batch_size=max_records, share_acquire_mode=0, is_renew_ack=False,
                            topics=[ShareFetchRequest.FetchTopic(topic_id=topic_id, partitions=parts)],
                            forgotten_topics_data=[])
    return call(bootstrap, req, version)


def _ack(bootstrap, group, member, epoch, topic_id, acks, version=2):
    P = ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition
    req = ShareAcknowledgeRequest(version=version, group_id=group, member_id=member, share_session_epoch=epoch,
                                  is_renew_ack=False, topics=[ShareAcknowledgeRequest.AcknowledgeTopic(
                                      topic_id=topic_id, partitions=[P(partition_index=p, acknowledgement_batches=[
                                          P.AcknowledgementBatch(first_offset=f, last_offset=t, acknowledge_types=ty)
                                          for f, t, ty in b]) for p, b in acks.items()])])
    return call(bootstrap, req, version)


def _acquired(resp) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in resp.responses for p in t.partitions for a in p.acquired_records]


def _offsets(acquired) -> set[int]:
    return {o for f, t, _ in acquired for o in range(f, t + 1)}


def _until(fn, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def _group_earliest(srv, group):
    """Start the group at the earliest offset (AlterShareGroupOffsets before any fetch)."""
    req = AlterShareGroupOffsetsRequest(version=0, group_id=group, topics=[
        AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(topic_name=group + "-t", partitions=[
            AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic.AlterShareGroupOffsetsRequestPartition(
                partition_index=0, start_offset=0)])])
    resp = call(srv.bootstrap, req, 0)
    assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0


def test_session_epochs(srv):
    tid = _topic(srv.bootstrap, "sess-t", 3)
    b = srv.bootstrap
    assert _fetch(b, "sess", "m1", 1, tid).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND
    r = _fetch(b, "sess", "m1", 0, tid)
    assert r.error_code == 0
    assert _fetch(b, "sess", "m1", 5, tid).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert _fetch(b, "sess", "m1", 1, tid).error_code == 0
    assert _fetch(b, "sess", "m1", 2, tid).error_code == 0
    # a new session carries no acknowledgements
    assert _fetch(b, "sess", "m2", 0, tid, acks={0: [(0, 0, [ACCEPT])]}).error_code == ErrorCode.INVALID_REQUEST
    # ShareAcknowledge cannot open a session; the final epoch closes it
    assert _ack(b, "sess", "m1", 0, tid, {}).error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert _ack(b, "sess", "m1", 3, tid, {}).error_code == 0
    assert _ack(b, "sess", "m1", -1, tid, {}).error_code == 0
    assert _fetch(b, "sess", "m1", 4, tid).error_code == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_acquire_ack_redeliver_and_limit(srv):
    b = srv.bootstrap
    epoch_a = 1
    tid = _topic(b, "q1-t", 20)
    _group_earliest(srv, "q1")
    r = _fetch(b, "q1", "a", 0, tid)
    got_a = _acquired(r)
    assert _offsets(got_a) == set(range(20)) and all(d == 1 for *_, d in got_a)
    assert r.acquisition_lock_timeout_ms == LOCK_MS
    # another member gets nothing while a holds everything
    assert _acquired(_fetch(b, "q1", "b", 0, tid)) == []
    # overlapping ranges, a range past what was acquired, RENEW at v1: refused, nothing changes
    for bad, version in (([(0, 4, [ACCEPT]), (3, 5, [ACCEPT])], 2), ([(15, 25, [ACCEPT])], 2),
                         ([(0, 0, [4])], 1)):
        r = _ack(b, "q1", "a", epoch_a, tid, {0: bad}, version=version)
        epoch_a += 1
        assert r.responses[0].partitions[0].error_code == ErrorCode.INVALID_REQUEST, bad
    # a accepts 0-4, rejects 5, releases 6-9; 10-19 it keeps (their lock runs out)
    r = _ack(b, "q1", "a", epoch_a, tid, {0: [(0, 4, [ACCEPT]), (5, 5, [REJECT]), (6, 9, [RELEASE])]})
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
    # b may not accept what a holds
    r = _ack(b, "q1", "b", 1, tid, {0: [(10, 10, [ACCEPT])]})
    assert r.responses[0].partitions[0].error_code == ErrorCode.INVALID_RECORD_STATE
    got_b = _acquired(_fetch(b, "q1", "b", 2, tid))
    assert _offsets(got_b) == set(range(6, 10)) and all(d == 2 for *_, d in got_b)
    assert _ack(b, "q1", "b", 3, tid, {0: [(6, 9, [RELEASE])]}).responses[0].partitions[0].error_code == 0
    # after the lock duration 10-19 come back (6-9 are available again)
    held: set[int] = set()

    def more() -> bool:
        held.update(_offsets(_acquired(_fetch(b, "q1", "b", 0, tid, max_wait_ms=3000))))
        return held >= set(range(6, 20))
    assert _until(more) and held == set(range(6, 20))
    # release until the limit (3) archives them
    offs = sorted(held)
    epoch = 1
    for _ in range(5):
        if not offs:
            break
        _ack(b, "q1", "b", epoch, tid, {0: [(offs[0], offs[-1], [RELEASE])]})
        epoch += 1
        got = _acquired(_fetch(b, "q1", "b", epoch, tid))
        epoch += 1
        offs = sorted(_offsets(got))
        assert all(d <= 3 for *_, d in got)
    assert offs == []  # every record accepted, rejected or archived at the limit
    resp = call(b, DescribeShareGroupOffsetsRequest(version=1, groups=[
        DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id="q1", topics=None)]), 1)
    p = resp.groups[0].topics[0].partitions[0]
    assert (p.start_offset, p.lag) == (20, 0)


def test_sigkill_loses_no_acknowledgement(srv):
    b = srv.bootstrap
    tid = _topic(b, "dur-t", 30)
    _group_earliest(srv, "dur")
    got = _acquired(_fetch(b, "dur", "a", 0, tid, max_records=30))
    assert _offsets(got) == set(range(30))
    accepted = [(0, 9, [ACCEPT]), (15, 19, [ACCEPT])]
    r = _ack(b, "dur", "a", 1, tid, {0: accepted})
    assert r.responses[0].partitions[0].error_code == 0
    srv.kill()
    srv.start()
    # everything not accepted comes back; nothing accepted does
    got = _until(lambda: _acquired(_fetch(b, "dur", "c", 0, tid, max_records=100)))
    assert _offsets(got) == set(range(10, 15)) | set(range(20, 30))
