"""The hand-written Heartbeat decoder agrees with kafka-python's schema-driven one."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import HeartbeatRequest

from kcoord.protocol.fastpath import FastDecodeError, decode_heartbeat

names = st.text(max_size=40)


@given(version=st.integers(0, 4), group=names, gen=st.integers(-(2**31), 2**31 - 1), member=names,
       instance=st.none() | names)
def test_heartbeat_matches_generic_decoder(version, group, gen, member, instance):
    if version < 3:
        instance = None
    req = HeartbeatRequest(version=version, group_id=group, generation_id=gen, member_id=member,
                           group_instance_id=instance)
    body = b"HDR" + bytes(req.encode())
    fast = decode_heartbeat(body, 3, version)
    slow = HeartbeatRequest.decode(body[3:], version=version)
    assert (fast.group_id, fast.generation_id, fast.member_id, fast.group_instance_id) == (
        slow.group_id, slow.generation_id, slow.member_id, slow.group_instance_id)


def test_heartbeat_v4_skips_unknown_tagged_fields():
    req = HeartbeatRequest(version=4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    body = bytes(req.encode())[:-1] + bytes([1, 7, 2]) + b"xy"
    assert decode_heartbeat(body, 0, 4).member_id == "m"


@pytest.mark.parametrize("cut", [1, 3, 6, 9])
def test_truncated_heartbeat_raises(cut):
    body = bytes(HeartbeatRequest(version=3, group_id="group", generation_id=1, member_id="member",
                                  group_instance_id="i").encode())
    with pytest.raises(FastDecodeError):
        decode_heartbeat(body[:cut], 0, 3)


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("error", [0, 22, 25, 27])
def test_cached_heartbeat_response_matches_generic_encoder(version, error):
    from kafka.protocol.consumer import HeartbeatResponse

    from kcoord.protocol.fastpath import heartbeat_response_body

    body = heartbeat_response_body(version, error)
    assert body == bytes(HeartbeatResponse(version=version, throttle_time_ms=0, error_code=error).encode())
    assert HeartbeatResponse.decode(body, version=version).error_code == error


@given(version=st.integers(0, 9),
       topics=st.lists(st.tuples(names, st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 127)),
                                                 max_size=5)), max_size=4))
def test_offset_commit_response_matches_generic_encoder(version, topics):
    from kafka.protocol.consumer import OffsetCommitResponse

    from kcoord.protocol.fastpath import encode_offset_commit_response

    T = OffsetCommitResponse.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    resp = OffsetCommitResponse(version=version, throttle_time_ms=0, topics=[
        T(name=n, partitions=[P(partition_index=i, error_code=e) for i, e in ps]) for n, ps in topics])
    assert encode_offset_commit_response(resp, version) == bytes(resp.encode(version=version))


@given(version=st.integers(0, 9), group=names, gen=st.integers(-1, 2**31 - 1), member=names,
       instance=st.none() | names, retention=st.integers(-1, 2**40),
       topics=st.lists(st.tuples(names, st.lists(st.tuples(
           st.integers(0, 2**31 - 1), st.integers(-1, 2**62), st.integers(-1, 100), st.integers(-1, 2**41),
           st.none() | names), max_size=4)), max_size=3))
def test_offset_commit_request_matches_generic_decoder(version, group, gen, member, instance, retention, topics):
    from kafka.protocol.consumer import OffsetCommitRequest

    from kcoord.protocol.fastpath import decode_offset_commit

    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = OffsetCommitRequest(
        version=version, group_id=group, generation_id_or_member_epoch=gen, member_id=member,
        group_instance_id=instance if version >= 7 else None, retention_time_ms=retention if 2 <= version <= 4 else -1,
        topics=[T(name=n, partitions=[P(partition_index=i, committed_offset=o, committed_leader_epoch=e if version >= 6 else -1,
                                        commit_timestamp=ts if version == 1 else -1, committed_metadata=m)
                                      for i, o, e, ts, m in ps]) for n, ps in topics])
    body = bytes(req.encode())
    fast = decode_offset_commit(b"xx" + body, 2, version)
    slow = OffsetCommitRequest.decode(body, version=version)
    for attr in ("group_id", "generation_id_or_member_epoch", "member_id", "group_instance_id", "retention_time_ms"):
        expected = getattr(slow, attr)
        if version < 1 and attr in ("generation_id_or_member_epoch", "member_id"):
            continue  # absent before v1: the handler supplies -1 / ""
        assert getattr(fast, attr) == expected, attr
    assert [(t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.commit_timestamp,
                       p.committed_metadata) for p in t.partitions]) for t in fast.topics] == [
        (t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.commit_timestamp,
                   p.committed_metadata) for p in t.partitions]) for t in slow.topics]


def _commit_v8(group="g", member="m", instance=None, topics=(("t", ((0, 5, -1, ""),)),)):
    from kafka.protocol.consumer import OffsetCommitRequest

    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    return bytes(OffsetCommitRequest(
        version=8, group_id=group, generation_id_or_member_epoch=3, member_id=member, group_instance_id=instance,
        topics=[T(name=n, partitions=[P(partition_index=i, committed_offset=o, committed_leader_epoch=e,
                                        committed_metadata=m) for i, o, e, m in ps]) for n, ps in topics],
    ).encode())


def _general_reader_calls(monkeypatch) -> list:
    """Record the fallbacks of the straight OffsetCommit v8+ reader to the general one."""
    import kcoord.protocol.fastpath as fastpath

    calls: list = []
    general = fastpath._offset_commit_general

    def spy(buf, pos, version):
        calls.append(version)
        return general(buf, pos, version)

    monkeypatch.setattr(fastpath, "_offset_commit_general", spy)
    return calls


def test_offset_commit_straight_reader_reads_what_clients_send(monkeypatch):
    from kcoord.protocol.fastpath import decode_offset_commit

    calls = _general_reader_calls(monkeypatch)
    body = _commit_v8(instance="i", topics=(("a", ((0, 5, 2, ""), (7, 2**40, -1, None))), ("b", ((1, 9, 0, "md"),))))
    r = decode_offset_commit(body, 0, 8)
    assert calls == []
    assert (r.group_id, r.generation_id_or_member_epoch, r.member_id, r.group_instance_id) == ("g", 3, "m", "i")
    assert [(t.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                      for p in t.partitions]) for t in r.topics] == [
        ("a", [(0, 5, 2, ""), (7, 2**40, -1, None)]), ("b", [(1, 9, 0, "md")])]


@pytest.mark.parametrize("body,group", [
    (_commit_v8(group="g" * 200), "g" * 200),     # a length that needs two varint bytes
    (_commit_v8()[:-1] + bytes([1, 0, 0]), "g"),  # a tagged field at the top level
    (_commit_v8() + b"\x00", "g"),               # trailing bytes (ignored, as before)
    (_commit_v8()[:-3], None),                    # truncated
    (b"\x02\xff" + _commit_v8()[2:], None),       # not UTF-8
])
def test_offset_commit_straight_reader_leaves_the_rest_to_the_general_reader(monkeypatch, body, group):
    from kcoord.protocol.fastpath import decode_offset_commit

    calls = _general_reader_calls(monkeypatch)
    if group is None:
        with pytest.raises(ValueError):
            decode_offset_commit(body, 0, 8)
    else:
        assert decode_offset_commit(body, 0, 8).group_id == group
    assert calls == [8]


@given(version=st.integers(0, 9),
       rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c" * 300]), st.integers(0, 2**31 - 1),
                               st.sampled_from([0, 3, 25, 28])), max_size=6))
def test_offset_commit_rows_encode_like_kafka_python(version, rows):
    from kafka.protocol.consumer import OffsetCommitResponse

    from kcoord.protocol.fastpath import OffsetCommitResponseData

    T = OffsetCommitResponse.OffsetCommitResponseTopic
    P = T.OffsetCommitResponsePartition
    by_topic: dict[str, list] = {}
    for t, p, e in rows:
        by_topic.setdefault(t, []).append(P(partition_index=p, error_code=e))
    expected = bytes(OffsetCommitResponse(version=version, throttle_time_ms=0, topics=[
        T(name=t, partitions=ps) for t, ps in by_topic.items()]).encode(version=version))
    data = OffsetCommitResponseData(version, rows)
    assert data.encode() == expected
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in data.topics] == [
        (t, [(p.partition_index, p.error_code) for p in ps]) for t, ps in by_topic.items()]


@settings(deadline=None)  # the first example imports the server
@given(client_id=st.none() | st.binary(max_size=300), header_version=st.integers(1, 2),
       tagged=st.sampled_from([b"\x00", b"\x01\x05\x02ab", b""]), cut=st.integers(0, 12))
def test_dispatch_body_start_agrees_with_read_client_id(client_id, header_version, tagged, cut):
    """The dispatcher skips the client id of a Heartbeat without decoding it: same body offset,
    and the same refusal of a truncated header."""
    from kcoord.protocol.headers import read_client_id
    from kcoord.server.dispatch import _body_start

    frame = b"\x00\x0c\x00\x04\x00\x00\x00\x07"
    frame += b"\xff\xff" if client_id is None else len(client_id).to_bytes(2, "big") + client_id
    frame += (tagged if header_version >= 2 else b"") + b"BODY"
    frame = frame[: len(frame) - cut]

    def outcome(fn):
        try:
            return fn()
        except ValueError:
            return "refused"

    expected = outcome(lambda: read_client_id(frame, header_version)[1])
    assert outcome(lambda: _body_start(frame, header_version)) == expected


@given(version=st.integers(0, 1), group=names, member=names, epoch=st.integers(-2, 2**31 - 1),
       instance=st.none() | names, topics=st.none() | st.lists(names, max_size=4),
       regex=st.none() | names, owned=st.none() | st.lists(st.tuples(st.uuids(), st.lists(st.integers(0, 2**31 - 1),
                                                                                              max_size=5)), max_size=3))
def test_consumer_group_heartbeat_matches_generic_codecs(version, group, member, epoch, instance, topics, regex, owned):
    from kcoord.protocol.fastpath import ConsumerGroupHeartbeatResponseData, decode_consumer_group_heartbeat
    from kcoord.protocol.messages import ConsumerGroupHeartbeatRequest as R
    from kcoord.protocol.messages import ConsumerGroupHeartbeatResponse as S

    req = R(version=version, group_id=group, member_id=member, member_epoch=epoch, instance_id=instance, rack_id=None,
            rebalance_timeout_ms=-1, subscribed_topic_names=topics, subscribed_topic_regex=regex if version else None,
            server_assignor=None,
            topic_partitions=None if owned is None else [R.TopicPartitions(topic_id=t, partitions=p) for t, p in owned])
    fast = decode_consumer_group_heartbeat(b"HDR" + bytes(req.encode()), 3, version)
    assert (fast.group_id, fast.member_id, fast.member_epoch, fast.instance_id, fast.subscribed_topic_names,
            fast.subscribed_topic_regex) == (group, member, epoch, instance, topics, regex if version else None)
    assert (None if fast.topic_partitions is None else [(t.topic_id, t.partitions) for t in fast.topic_partitions]) \
        == (None if owned is None else [(t, p) for t, p in owned])
    mine = ConsumerGroupHeartbeatResponseData(version, 0, instance, member, epoch, 5000, owned)
    theirs = S(version=version, throttle_time_ms=0, error_code=0, error_message=instance, member_id=member,
               member_epoch=epoch, heartbeat_interval_ms=5000, assignment=None if owned is None else S.Assignment(
                   topic_partitions=[S.Assignment.TopicPartitions(topic_id=t, partitions=p) for t, p in owned]))
    assert mine.encode() == bytes(theirs.encode())


def test_truncated_consumer_group_heartbeat_raises():
    from kcoord.protocol.fastpath import decode_consumer_group_heartbeat
    from kcoord.protocol.messages import ConsumerGroupHeartbeatRequest as R

    body = bytes(R(version=1, group_id="g", member_id="m", member_epoch=1, instance_id=None, rack_id=None,
                   rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None,
                   server_assignor=None, topic_partitions=None).encode())
    from kcoord.protocol.headers import HeaderError

    for cut in range(1, len(body)):
        with pytest.raises((FastDecodeError, HeaderError)):  # the dispatcher closes the connection
            decode_consumer_group_heartbeat(body[:cut], 0, 1)
