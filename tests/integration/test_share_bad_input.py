"""Bad input to every share API (issue 25), raw requests to a real server: unknown groups,
members, epochs, sessions, topics and partitions; malformed, oversized, overlapping and
out-of-window acknowledgement batches. Each is answered with Kafka's error code, and nothing of
a refused request is applied: the share state (DescribeShareGroupOffsets, what is still acquired,
the group's membership) is what it was, also after a restart."""
from __future__ import annotations

import uuid

import pytest
from conftest import call
from test_share_fetch_wire import ACCEPT, RELEASE, _ack, _acquired, _fetch, _offsets, _topic

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.share_messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from kcoord.testing.process import KcoordProcess

pytestmark = pytest.mark.integration

E = ErrorCode


@pytest.fixture
def srv(tmp_path):
    s = KcoordProcess(tmp_path / "data", overrides={"group.share.record.lock.duration.ms": "60000"})
    s.start()
    yield s
    if s.alive():
        s.stop()


def heartbeat(b, group, member, epoch, topics=None):
    return call(b, ShareGroupHeartbeatRequest(version=1, group_id=group, member_id=member, member_epoch=epoch,
                                              rack_id=None, subscribed_topic_names=topics), 1)


def describe(b, group):
    return call(b, ShareGroupDescribeRequest(version=1, group_ids=[group], include_authorized_operations=False),
                1).groups[0]


def offsets(b, group, topics=None):
    G = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    return call(b, DescribeShareGroupOffsetsRequest(version=1, groups=[G(group_id=group, topics=topics)]), 1).groups[0]


def state(b, group):
    g = offsets(b, group)
    assert g.error_code == 0, g
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag) for t in g.topics for p in t.partitions}


def alter(b, group, topic, parts):
    T = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    return call(b, AlterShareGroupOffsetsRequest(version=0, group_id=group, topics=[T(topic_name=topic, partitions=[
        T.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o) for p, o in parts])]), 0)


def delete_offsets(b, group, topics):
    T = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
    return call(b, DeleteShareGroupOffsetsRequest(version=0, group_id=group, topics=[T(topic_name=t) for t in topics]),
                0)


def test_share_group_heartbeat_and_describe(srv) -> None:
    b = srv.bootstrap
    _topic(b, "hb-t", 0)
    cases = [
        (("", "m", 0, ["hb-t"]), E.INVALID_REQUEST),  # empty group id
        (("hb", "", 0, ["hb-t"]), E.INVALID_REQUEST),  # empty member id
        (("hb", "m", -2, ["hb-t"]), E.INVALID_REQUEST),  # epoch < -1
        (("hb", "m", 0, None), E.INVALID_REQUEST),  # joining without topics
        (("hb", "m", 0, []), E.INVALID_REQUEST),
        (("hb", "m", 3, ["hb-t"]), E.GROUP_ID_NOT_FOUND),  # a heartbeat to a group that does not exist
        (("hb", "m", -1, None), E.GROUP_ID_NOT_FOUND),  # leaving it
    ]
    for args, code in cases:
        assert heartbeat(b, *args).error_code == code, args
    assert describe(b, "hb").error_code == E.GROUP_ID_NOT_FOUND  # none of them created the group
    assert heartbeat(b, "hb", "m", 0, ["hb-t"]).error_code == 0
    before = describe(b, "hb")
    for args, code in [(("hb", "other", 1, ["hb-t"]), E.UNKNOWN_MEMBER_ID),
                       (("hb", "other", -1, None), E.UNKNOWN_MEMBER_ID),
                       (("hb", "m", 7, ["hb-t"]), E.FENCED_MEMBER_EPOCH)]:
        assert heartbeat(b, *args).error_code == code, args
    after = describe(b, "hb")
    assert (after.group_epoch, [m.member_id for m in after.members]) == (before.group_epoch, ["m"])
    # a classic group's id is not a share group's
    assert describe(b, "never-seen").error_code == E.GROUP_ID_NOT_FOUND


def test_share_fetch_and_acknowledge(srv) -> None:
    b = srv.bootstrap
    tid = _topic(b, "bad-t", 20)
    assert alter(b, "bad", "bad-t", [(0, 0)]).error_code == 0
    # the request as a whole
    assert _fetch(b, "", "m", 0, tid).error_code == E.INVALID_REQUEST
    assert _fetch(b, "bad", "", 0, tid).error_code == E.INVALID_REQUEST
    assert _fetch(b, "bad", "m", 4, tid).error_code == E.SHARE_SESSION_NOT_FOUND
    assert _ack(b, "bad", "m", 1, tid, {0: [(0, 0, [ACCEPT])]}).error_code == E.SHARE_SESSION_NOT_FOUND
    assert _ack(b, "bad", "m", 0, tid, {}).error_code == E.INVALID_SHARE_SESSION_EPOCH
    assert _fetch(b, "bad", "m", 0, tid, acks={0: [(0, 0, [ACCEPT])]}).error_code == E.INVALID_REQUEST
    # per partition: an unknown topic id, a partition out of range
    r = _fetch(b, "bad", "x", 0, uuid.uuid4())
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_ID
    r = _fetch(b, "bad", "y", 0, tid, partitions=(5,))
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert state(b, "bad") == {("bad-t", 0): (0, 20)}  # none of that touched the share state

    got = _acquired(_fetch(b, "bad", "m", 0, tid, max_records=10))  # whole batches: all 20
    held = _offsets(got)
    assert held == set(range(20))
    epoch = 1
    assert _fetch(b, "bad", "m", epoch + 5, tid).error_code == E.INVALID_SHARE_SESSION_EPOCH
    bad_batches = [
        [(3, 2, [ACCEPT])],  # first > last
        [(0, 4, [ACCEPT]), (3, 6, [ACCEPT])],  # overlapping
        [(5, 6, [ACCEPT]), (0, 1, [ACCEPT])],  # out of order
        [(18, 22, [ACCEPT])],  # past what was acquired (the window ends at 20)
        [(0, 1, [ACCEPT, ACCEPT, ACCEPT])],  # oversized: more types than records
        [(0, 3, [ACCEPT, RELEASE])],  # neither one type nor one per record
        [(0, 1, [])],  # no type
        [(0, 1, [9])],  # an unknown type
        [(0, 1, [ACCEPT]), (50, 60, [ACCEPT])],  # a good batch, then one out of the window
    ]
    for batches in bad_batches:
        r = _ack(b, "bad", "m", epoch, tid, {0: batches})
        epoch += 1
        assert r.error_code == 0 and r.responses[0].partitions[0].error_code == E.INVALID_REQUEST, batches
        r = _fetch(b, "bad", "m", epoch, tid, acks={0: batches}, max_records=1)
        epoch += 1
        assert r.responses[0].partitions[0].acknowledge_error_code == E.INVALID_REQUEST, batches
    # a member that does not hold the records
    r = _fetch(b, "bad", "other", 0, tid)
    assert _acquired(r) == [] or _offsets(_acquired(r)).isdisjoint(held)
    r = _ack(b, "bad", "other", 1, tid, {0: [(0, 1, [ACCEPT])]})
    assert r.responses[0].partitions[0].error_code == E.INVALID_RECORD_STATE
    # nothing was applied: nothing is acknowledged, and 0-19 are still m's
    assert state(b, "bad") == {("bad-t", 0): (0, 20)}
    r = _ack(b, "bad", "m", epoch, tid, {0: [(0, 19, [RELEASE])]})
    assert r.responses[0].partitions[0].error_code == 0
    srv.restart()
    assert state(b, "bad") == {("bad-t", 0): (0, 20)}


def test_share_offsets_apis(srv) -> None:
    b = srv.bootstrap
    _topic(b, "off-t", 5)
    g = offsets(b, "nobody")
    assert g.error_code == E.GROUP_ID_NOT_FOUND
    assert delete_offsets(b, "nobody", ["off-t"]).error_code == E.GROUP_ID_NOT_FOUND
    # an unknown topic and a partition out of range: that partition refused, the rest set
    r = alter(b, "og", "no-such-topic", [(0, 0)])
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    r = alter(b, "og", "off-t", [(3, 0), (0, -7), (0, 2)])
    assert [p.error_code for p in r.responses[0].partitions] == [E.UNKNOWN_TOPIC_OR_PARTITION, E.INVALID_REQUEST, 0]
    assert state(b, "og") == {("off-t", 0): (2, 3)}
    D = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup.DescribeShareGroupOffsetsRequestTopic
    g = offsets(b, "og", [D(topic_name="no-such-topic", partitions=[0]), D(topic_name="off-t", partitions=[0, 9])])
    codes = {(t.topic_name, p.partition_index): p.error_code for t in g.topics for p in t.partitions}
    assert codes == {("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("off-t", 0): 0,
                     ("off-t", 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    r = delete_offsets(b, "og", ["no-such-topic"])
    assert r.error_code == 0 and r.responses[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert state(b, "og") == {("off-t", 0): (2, 3)}
    # a group with a member: NON_EMPTY_GROUP, nothing changed
    assert heartbeat(b, "og", "m", 0, ["off-t"]).error_code == 0
    assert alter(b, "og", "off-t", [(0, 0)]).error_code == E.NON_EMPTY_GROUP
    assert delete_offsets(b, "og", ["off-t"]).error_code == E.NON_EMPTY_GROUP
    assert state(b, "og") == {("off-t", 0): (2, 3)}
