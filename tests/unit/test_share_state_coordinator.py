"""The share coordinator and its inter-broker APIs (server/share/coordinator.py,
server/handlers/share_state.py) on a real Broker over tmp_path, and the share partitions'
data leadership (ShareManager.leader_epoch, what server/share/cluster.py gives a cluster node):
Initialize/Read/Write/DeleteShareGroupState through their handlers, fencing by leader epoch and
state epoch, NOT_COORDINATOR for a __share_group_state partition the node does not hold,
FindCoordinator's share key type, and a share partition dropped when its leadership moves and
loaded again from its persisted state (acknowledged records never again, acquired ones
Available)."""
from __future__ import annotations

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest
from test_produce_helpers import batch, call, make_broker, produce
from test_share_fetch_broker import ACCEPT, configs, share_fetch

from kcoord.protocol.api import ApiKey
from kcoord.protocol.share_messages import ShareAcknowledgeRequest, ShareFetchRequest
from kcoord.protocol.share_state_messages import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    WriteShareGroupStateRequest,
)
from kcoord.server.share.state import coordinator_key, state_partition

NOT_COORDINATOR, FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH, NOT_LEADER = 16, 74, 124, 6


@pytest.fixture
async def broker(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 1, {})
    b.parts.share.get().group_config = configs
    yield b
    await b.stop()


def tid(b):
    return b.topics.get("t").topic_id


async def initialize(b, group, state_epoch, start):
    D = InitializeShareGroupStateRequest.InitializeStateData
    r = await call(b, ApiKey.INITIALIZE_SHARE_GROUP_STATE, InitializeShareGroupStateRequest(
        version=0, group_id=group, topics=[D(topic_id=tid(b), partitions=[D.PartitionData(
            partition=0, state_epoch=state_epoch, start_offset=start)])]), 0)
    return r.results[0].partitions[0].error_code


async def read(b, group, leader_epoch=-1):
    D = ReadShareGroupStateRequest.ReadStateData
    r = await call(b, ApiKey.READ_SHARE_GROUP_STATE, ReadShareGroupStateRequest(version=0, group_id=group, topics=[D(
        topic_id=tid(b), partitions=[D.PartitionData(partition=0, leader_epoch=leader_epoch)])]), 0)
    return r.results[0].partitions[0]


async def write(b, group, leader_epoch, start, batches, state_epoch=0):
    D = WriteShareGroupStateRequest.WriteStateData
    P = D.PartitionData
    r = await call(b, ApiKey.WRITE_SHARE_GROUP_STATE, WriteShareGroupStateRequest(version=0, group_id=group, topics=[D(
        topic_id=tid(b), partitions=[P(partition=0, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                       start_offset=start, state_batches=[
                                           P.StateBatch(first_offset=f, last_offset=t, delivery_state=s,
                                                        delivery_count=n) for f, t, s, n in batches])])]), 0)
    return r.results[0].partitions[0].error_code


async def delete(b, group):
    D = DeleteShareGroupStateRequest.DeleteStateData
    r = await call(b, ApiKey.DELETE_SHARE_GROUP_STATE, DeleteShareGroupStateRequest(version=0, group_id=group, topics=[
        D(topic_id=tid(b), partitions=[D.PartitionData(partition=0)])]), 0)
    return r.results[0].partitions[0].error_code


async def test_initialize_read_write_delete_and_fencing(broker):
    p = await read(broker, "g")
    assert (p.error_code, p.start_offset, p.state_epoch) == (0, -1, -1)  # no state
    assert await initialize(broker, "g", 1, 5) == 0
    p = await read(broker, "g")
    assert (p.error_code, p.start_offset, p.state_epoch, list(p.state_batches)) == (0, 5, 1, [])
    assert await initialize(broker, "g", 0, 7) == FENCED_STATE_EPOCH  # an older state epoch
    # the data leader at epoch 3 writes; its reads record the epoch
    assert (await read(broker, "g", leader_epoch=3)).error_code == 0
    assert await write(broker, "g", 3, 5, [(5, 6, 2, 1)], state_epoch=1) == 0
    p = await read(broker, "g")
    assert [(b.first_offset, b.last_offset, b.delivery_state) for b in p.state_batches] == [(5, 6, 2)]
    # a former leader (epoch 2) can neither write nor read any more
    assert await write(broker, "g", 2, 5, [(5, 6, 0, 1)], state_epoch=1) == FENCED_LEADER_EPOCH
    assert (await read(broker, "g", leader_epoch=2)).error_code == FENCED_LEADER_EPOCH
    assert [(b.first_offset, b.delivery_state) for b in (await read(broker, "g")).state_batches] == [(5, 2)]
    # a new leader (epoch 4) reads: from then on epoch 3 is fenced too
    assert (await read(broker, "g", leader_epoch=4)).error_code == 0
    assert await write(broker, "g", 3, 5, [(7, 7, 2, 1)], state_epoch=1) == FENCED_LEADER_EPOCH
    assert await delete(broker, "g") == 0
    assert (await read(broker, "g")).start_offset == -1
    # malformed batches
    assert await write(broker, "g", 5, 0, [(3, 1, 2, 1)]) == 42  # INVALID_REQUEST


async def test_a_partition_the_node_does_not_hold_answers_not_coordinator(broker):
    mgr = broker.parts.share.get()
    mgr.runtime.managed()  # a cluster node before it leads anything
    assert (await read(broker, "g")).error_code == NOT_COORDINATOR
    assert await initialize(broker, "g", 0, 0) == NOT_COORDINATOR
    p = state_partition("g", tid(broker), 0, mgr.shard.num_partitions)
    await mgr.runtime.load(p, 0)  # it leads the key's partition now
    assert await initialize(broker, "g", 0, 3) == 0
    assert (await read(broker, "g")).start_offset == 3
    mgr.runtime.unload(p, 1)  # and no longer
    assert (await read(broker, "g")).error_code == NOT_COORDINATOR
    assert mgr.shard.get(("g", tid(broker), 0)) is None  # its state left memory


async def test_find_coordinator_share_keys(broker):
    key = coordinator_key("g", tid(broker), 0)
    r = await call(broker, ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
        version=6, key_type=2, coordinator_keys=[key, "no-partition", "g:short:0"]), 6)
    assert [(c.key, c.error_code) for c in r.coordinators] == [(key, 0), ("no-partition", 42), ("g:short:0", 42)]
    assert r.coordinators[0].node_id == broker.config.node_id


async def test_a_share_partition_follows_its_data_leadership(broker):
    mgr = broker.parts.share.get()
    epoch = [0]
    mgr.leader_epoch = lambda topic, p: epoch[0]
    assert (await produce(broker, "t", 0, batch([b"v%d" % i for i in range(6)]))).error_code == 0
    assert await share_fetch(broker, "ru-x", "a", 0) == set(range(6))
    P = ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition
    resp = await call(broker, ApiKey.SHARE_ACKNOWLEDGE, ShareAcknowledgeRequest(
        version=2, group_id="ru-x", member_id="a", share_session_epoch=1, is_renew_ack=False,
        topics=[ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=tid(broker), partitions=[P(
            partition_index=0, acknowledgement_batches=[
                P.AcknowledgementBatch(first_offset=0, last_offset=2, acknowledge_types=[ACCEPT])])])]), 2)
    assert resp.responses[0].partitions[0].error_code == 0
    # another node leads the partition now: no share partition here, NOT_LEADER_OR_FOLLOWER
    epoch[0] = None
    mgr.drop_unled()
    assert not mgr.partitions
    r = await call(broker, ApiKey.SHARE_FETCH, ShareFetchRequest(
        version=2, group_id="ru-x", member_id="b", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
        max_bytes=1 << 20, max_records=100, batch_size=100, share_acquire_mode=0, is_renew_ack=False,
        topics=[ShareFetchRequest.FetchTopic(topic_id=tid(broker), partitions=[
            ShareFetchRequest.FetchTopic.FetchPartition(partition_index=0, acknowledgement_batches=[])])],
        forgotten_topics_data=[]), 2)
    assert r.responses[0].partitions[0].error_code == NOT_LEADER
    # leading it again at a new epoch: loaded from the persisted state; what was acknowledged
    # never comes again, what was only acquired is Available
    epoch[0] = 1
    assert await share_fetch(broker, "ru-x", "c", 0) == {3, 4, 5}
    assert mgr.epochs[("ru-x", tid(broker), 0)][0] == 1
    # the state records the new leader epoch: the old leader's late writes are fenced
    assert await write(broker, "ru-x", 0, -1, [(0, 2, 0, 1)]) == FENCED_LEADER_EPOCH
