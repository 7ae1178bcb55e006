"""DeleteTopics on a real Broker over tmp_path (FakeClock, no sockets): Kafka's answers for
every refusal, what a deleted topic leaves behind (nothing: files, offsets, producer state),
the name reused at once, long polls answered, and a deletion cut short at each persisted step
finished by the next start-up."""
from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DeleteTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest
from kafka.protocol.metadata import MetadataRequest
from test_produce_helpers import (
    batch,
    call,
    fetch_req,
    list_offsets_req,
    make_broker,
    produce,
)

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.broker import Broker
from kcoord.server.config import Config
from kcoord.server.deferred import Deferred
from kcoord.storage.log_deletion import is_delete_dir
from kcoord.storage.partition_metadata import read_partition_metadata

ZERO = uuid.UUID(int=0)


async def settle(x):
    if isinstance(x, Deferred):
        fut = asyncio.get_running_loop().create_future()
        x.add_callback(lambda r: fut.done() or fut.set_result(r))
        return await fut
    return x


async def ready(tmp_path, **overrides) -> Broker:
    """A broker whose __consumer_offsets counts as loaded (deletions finish at once)."""
    b = await make_broker(tmp_path, **overrides)
    await b.deleter.finish_all()
    return b


@pytest.fixture
async def broker(tmp_path):
    b = await ready(tmp_path)
    b.create_topic("t", 3, {})
    yield b
    await b.stop()


def delete_req(names=(), version=5, topics=None):
    if version >= 6:
        T = DeleteTopicsRequest.DeleteTopicState
        return DeleteTopicsRequest(version=version, timeout_ms=30000,
                                   topics=topics if topics is not None else [T(name=n, topic_id=ZERO) for n in names])
    return DeleteTopicsRequest(version=version, timeout_ms=30000, topic_names=list(names))


async def delete(broker, *names, version=5, topics=None):
    resp = await settle(await call(broker, ApiKey.DELETE_TOPICS, delete_req(names, version, topics), version))
    return [(r.name, r.error_code) for r in resp.responses], resp


async def commit(broker, group, offsets: dict[tuple[str, int], int]):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    by_topic: dict[str, list] = {}
    for (t, p), o in offsets.items():
        by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                            committed_metadata=""))
    req = OffsetCommitRequest(version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, retention_time_ms=-1,
                              topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
    resp = await settle(await call(broker, ApiKey.OFFSET_COMMIT, req, 8))
    assert all(p.error_code == 0 for t in resp.topics for p in t.partitions), resp


def offsets_of(broker, group) -> dict[tuple[str, int], int]:
    return {(t, p): v.offset for t, p, v in broker.parts.coordinator.get().committed_offsets(group)}


def dirs(broker) -> list[str]:
    return sorted(n for n in os.listdir(broker.log_dir) if not n.startswith("__consumer_offsets")
                  and os.path.isdir(os.path.join(broker.log_dir, n)))


async def metadata_error(broker, name, version=9):
    req = MetadataRequest(version=version, topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                          allow_auto_topic_creation=False)
    resp = await call(broker, ApiKey.METADATA, req, version)
    return resp.topics[0].error_code


async def reopen(broker: Broker, tmp_path, stopped: bool = False) -> Broker:
    """Stop and start a broker on the same directory and load __consumer_offsets, as a
    restart does (the deletions listed are finished after loading)."""
    if not stopped:
        await broker.stop()
    b = Broker(Config({"log.dirs": str(broker.log_dir), "offsets.topic.num.partitions": 1}))
    b.clock = broker.clock
    await b.start()
    await b.parts.runtime.get().load_all()
    await b.deleter.finish_all()
    return b


# ---------------------------------------------------------------- what a deletion removes


async def test_delete_removes_the_topic_its_files_and_everything_that_names_it(broker):
    for p in range(3):
        assert (await produce(broker, "t", p, batch([b"a", b"b"]))).error_code == 0
    tid = broker.topics.get("t").topic_id
    assert dirs(broker) == ["t-0", "t-1", "t-2"]
    results, resp = await delete(broker, "t")
    assert results == [("t", 0)] and resp.responses[0].error_message is None
    assert broker.topics.get("t") is None and tid not in broker.topics.by_id
    assert not broker.topics.deleting  # finished: nothing left to do at a restart
    assert dirs(broker) == []
    assert broker.logs.get("t", 0) is None and "t" not in broker.logs.topic_ids
    assert await metadata_error(broker, "t") == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (await produce(broker, "t", 0, batch([b"x"]))).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    f12 = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0)]), 12)
    assert f12.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    f13 = await call(broker, ApiKey.FETCH, fetch_req([(tid, 0, 0)], version=13), 13)
    assert f13.responses[0].partitions[0].error_code == E.UNKNOWN_TOPIC_ID
    lo = await call(broker, ApiKey.LIST_OFFSETS, list_offsets_req([("t", 0, -1)]), 7)
    assert lo.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_the_name_is_reusable_at_once_with_a_new_id_and_an_empty_log(broker):
    await produce(broker, "t", 0, batch([b"old"] * 5))
    old_id = broker.topics.get("t").topic_id
    await delete(broker, "t")
    req = CreateTopicsRequest(version=5, timeout_ms=1000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(name="t", num_partitions=2, replication_factor=1, assignments=[],
                                           configs=[])])
    resp = await call(broker, ApiKey.CREATE_TOPICS, req, 5)
    assert resp.topics[0].error_code == 0
    new = broker.topics.get("t")
    assert new.topic_id != old_id and new.partitions == 2
    assert broker.logs.get("t", 0).log_end_offset == 0
    assert read_partition_metadata(str(broker.log_dir / "t-0")) == new.topic_id
    assert (await produce(broker, "t", 0, batch([b"new"]))).base_offset == 0


async def test_committed_offsets_of_every_group_are_tombstoned_and_stay_gone_after_a_restart(broker, tmp_path):
    broker.create_topic("keep", 1, {})
    await commit(broker, "g1", {("t", 0): 5, ("t", 2): 7, ("keep", 0): 3})
    await commit(broker, "g2", {("t", 1): 9})  # only the deleted topic: the Empty group dies
    await commit(broker, "g3", {("keep", 0): 1})
    assert (await delete(broker, "t"))[0] == [("t", 0)]
    assert offsets_of(broker, "g1") == {("keep", 0): 3}
    assert broker.parts.coordinator.get().group("g2") is None
    assert offsets_of(broker, "g3") == {("keep", 0): 1}
    b = await reopen(broker, tmp_path)
    try:
        assert offsets_of(b, "g1") == {("keep", 0): 3}
        assert b.parts.coordinator.get().group("g2") is None
        assert offsets_of(b, "g3") == {("keep", 0): 1}
    finally:
        await b.stop()


async def test_commits_for_the_deleted_topic_are_refused_afterwards(broker):
    await delete(broker, "t")
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(version=8, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                              group_instance_id=None, retention_time_ms=-1, topics=[
                                  T(name="t", partitions=[T.OffsetCommitRequestPartition(
                                      partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                      committed_metadata="")])])
    resp = await settle(await call(broker, ApiKey.OFFSET_COMMIT, req, 8))
    assert resp.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_idempotent_producer_state_is_dropped(broker):
    assert (await produce(broker, "t", 0, batch([b"a"], pid=7, epoch=0, seq=0))).error_code == 0
    assert broker.parts.data_plane.get().producers.loaded("t", 0) is not None
    await delete(broker, "t")
    assert broker.parts.data_plane.get().producers.loaded("t", 0) is None
    broker.create_topic("t", 1, {})
    # the same producer id starts over in the new topic: sequence 0 is not a duplicate of the old batch
    r = await produce(broker, "t", 0, batch([b"b"], pid=7, epoch=0, seq=0))
    assert (r.error_code, r.base_offset) == (0, 0)


async def test_a_parked_long_poll_on_a_deleted_topic_is_answered(broker):
    broker.create_topic("other", 1, {})
    parked = await call(broker, ApiKey.FETCH, fetch_req([("t", 0, 0), ("other", 0, 0)], max_wait_ms=60000), 12)
    assert isinstance(parked, Deferred) and not parked.done
    await delete(broker, "t")
    assert parked.done
    resp = parked.result()
    assert [p.error_code for t in resp.responses for p in t.partitions] == [E.UNKNOWN_TOPIC_OR_PARTITION, 0]


# ---------------------------------------------------------------- refusals


async def test_unknown_names_and_ids(broker):
    results, resp = await delete(broker, "nope")
    assert results == [("nope", E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert resp.responses[0].error_message == "This server does not host this topic-partition."
    unknown = uuid.uuid4()
    T = DeleteTopicsRequest.DeleteTopicState
    _, resp = await delete(broker, version=6, topics=[T(name=None, topic_id=unknown)])
    r, = resp.responses
    assert (r.name, r.topic_id, r.error_code) == (None, unknown, E.UNKNOWN_TOPIC_ID)


async def test_delete_by_topic_id_in_v6(broker):
    tid = broker.topics.get("t").topic_id
    T = DeleteTopicsRequest.DeleteTopicState
    _, resp = await delete(broker, version=6, topics=[T(name=None, topic_id=tid)])
    r, = resp.responses
    assert (r.name, r.topic_id, r.error_code) == ("t", tid, 0)
    assert broker.topics.get("t") is None and dirs(broker) == []


async def test_v6_malformed_entries(broker):
    broker.create_topic("u", 1, {})
    tid = broker.topics.get("t").topic_id
    uid = broker.topics.get("u").topic_id
    T = DeleteTopicsRequest.DeleteTopicState
    _, resp = await delete(broker, version=6, topics=[
        T(name="t", topic_id=tid), T(name=None, topic_id=ZERO), T(name="x", topic_id=ZERO),
        T(name="x", topic_id=ZERO), T(name=None, topic_id=uid), T(name="u", topic_id=ZERO)])
    got = sorted((r.name or "", r.error_code, r.error_message) for r in resp.responses)
    assert got == sorted([
        ("t", E.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        ("", E.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("x", E.INVALID_REQUEST, "Duplicate topic name."),
        ("u", E.INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied."),
    ])
    assert broker.topics.get("t") is not None and broker.topics.get("u") is not None


async def test_internal_topics_cannot_be_deleted(broker):
    results, resp = await delete(broker, "__consumer_offsets")
    assert results == [("__consumer_offsets", E.INVALID_TOPIC_EXCEPTION)]
    assert "internal topic" in resp.responses[0].error_message
    assert broker.topics.get("__consumer_offsets") is not None
    assert broker.logs.get("__consumer_offsets", 0) is not None


@pytest.mark.parametrize(("version", "code"), [(0, E.INVALID_REQUEST), (2, E.INVALID_REQUEST),
                                               (3, E.TOPIC_DELETION_DISABLED), (6, E.TOPIC_DELETION_DISABLED)])
async def test_delete_topic_enable_false(tmp_path, version, code):
    b = await ready(tmp_path, delete_topic_enable="false")
    try:
        b.create_topic("t", 1, {})
        results, _ = await delete(b, "t", version=version)
        assert results == [("t", code)]
        assert b.topics.get("t") is not None and b.logs.get("t", 0) is not None
    finally:
        await b.stop()


async def test_every_version_deletes(broker):
    for v in range(7):
        broker.create_topic(f"v{v}", 1, {})
        results, _ = await delete(broker, f"v{v}", version=v)
        assert results == [(f"v{v}", 0)], v
        assert broker.topics.get(f"v{v}") is None


# ---------------------------------------------------------------- interrupted deletions


async def test_a_delete_while_loading_finishes_after_the_load_and_blocks_the_name_meanwhile(tmp_path):
    b = await make_broker(tmp_path)  # deleter.loaded not set: __consumer_offsets "still loading"
    try:
        b.create_topic("t", 2, {})
        await commit(b, "g", {("t", 0): 4})
        results, _ = await delete(b, "t")
        assert results == [("t", 0)]
        assert b.topics.get("t") is None and b.topics.is_deleting("t")
        assert all(is_delete_dir(d) for d in dirs(b)) and len(dirs(b)) == 2  # renamed, not yet removed
        req = CreateTopicsRequest(version=5, timeout_ms=1000, validate_only=False, topics=[
            CreateTopicsRequest.CreatableTopic(name="t", num_partitions=1, replication_factor=1, assignments=[],
                                               configs=[])])
        resp = await call(b, ApiKey.CREATE_TOPICS, req, 5)
        assert (resp.topics[0].error_code, resp.topics[0].error_message) == (
            E.TOPIC_ALREADY_EXISTS, "Topic 't' is marked for deletion.")
        auto = MetadataRequest(version=9, topics=[MetadataRequest.MetadataRequestTopic(name="t")],
                               allow_auto_topic_creation=True)
        assert (await call(b, ApiKey.METADATA, auto, 9)).topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert b.topics.get("t") is None
        await b.deleter.finish_all()  # loading done
        assert not b.topics.is_deleting("t") and dirs(b) == [] and offsets_of(b, "g") == {}
        assert (await call(b, ApiKey.CREATE_TOPICS, req, 5)).topics[0].error_code == 0
    finally:
        await b.stop()


@pytest.mark.parametrize("stop_after", ["registered", "renamed-first", "renamed"])
async def test_a_deletion_cut_short_is_finished_by_the_next_start(tmp_path, stop_after):
    """In process: the steps a crash would leave done, replayed by hand, then a start-up
    (tests/integration/test_topic_deletion_crash.py SIGKILLs a real server at each step)."""
    from kcoord.storage.log_deletion import rename_for_delete

    b = await ready(tmp_path)
    b.create_topic("t", 3, {})
    for p in range(3):
        await produce(b, "t", p, batch([b"x"] * 3))
    await commit(b, "g", {("t", 0): 2, ("t", 1): 1})
    topic = b.topics.get("t")
    b.topics.begin_delete(topic)  # step 1, the commit point
    await b.stop()
    if stop_after != "registered":
        for p in (0,) if stop_after == "renamed-first" else (0, 1, 2):
            rename_for_delete(str(b.log_dir), "t", p)
    b2 = await reopen(b, tmp_path, stopped=True)
    try:
        assert b2.topics.get("t") is None and not b2.topics.deleting
        assert dirs(b2) == [] and b2.logs.get("t", 0) is None
        assert offsets_of(b2, "g") == {}
        b2.create_topic("t", 3, {})
        assert [b2.logs.get("t", p).log_end_offset for p in range(3)] == [0, 0, 0]
    finally:
        await b2.stop()


async def test_start_up_leaves_a_directory_of_another_topic_id_alone(tmp_path):
    """A directory under the deleted name that belongs to another topic id is not the
    deleted topic's: the resumed deletion does not touch it."""
    from kcoord.storage.partition_metadata import write_partition_metadata

    b = await ready(tmp_path)
    b.create_topic("t", 1, {})
    b.topics.begin_delete(b.topics.get("t"))
    other = uuid.uuid4()
    write_partition_metadata(str(b.log_dir / "t-0"), other)
    await b.stop()
    b2 = Broker(Config({"log.dirs": str(b.log_dir), "offsets.topic.num.partitions": 1}))
    await b2.start()
    try:
        assert os.path.isdir(b2.log_dir / "t-0")
    finally:
        await b2.stop()
