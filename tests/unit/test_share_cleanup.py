"""server/share/cleanup.py on a real broker (fake clock): a share group's state tombstoned for
DeleteGroups, a topic's share state tombstoned for its deletion, in every group, and both kept
across a restart (the tombstones replay); and server/share/metrics.py's families from the same
live state."""
from __future__ import annotations

import pytest
from test_produce_helpers import batch, call, make_broker, produce
from test_share_fetch_broker import configs, share_fetch

from kcoord.protocol.api import ApiKey
from kcoord.protocol.share_messages import ShareAcknowledgeRequest
from kcoord.server.broker import Broker
from kcoord.server.config import Config
from kcoord.server.share.cleanup import delete_groups_state, delete_topic_state
from kcoord.server.share.metrics import share_metric_families


@pytest.fixture
async def broker(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 1, {})
    b.parts.share.get().group_config = configs
    yield b
    await b.stop()


async def accept(b, group: str, member: str, epoch: int, first: int, last: int) -> None:
    P = ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition
    req = ShareAcknowledgeRequest(version=2, group_id=group, member_id=member, share_session_epoch=epoch,
                                  is_renew_ack=False, topics=[ShareAcknowledgeRequest.AcknowledgeTopic(
                                      topic_id=b.topics.get("t").topic_id, partitions=[P(
                                          partition_index=0, acknowledgement_batches=[P.AcknowledgementBatch(
                                              first_offset=first, last_offset=last, acknowledge_types=[1])])])])
    resp = await call(b, ApiKey.SHARE_ACKNOWLEDGE, req, 2)
    assert resp.error_code == 0 and resp.responses[0].partitions[0].error_code == 0


def groups_with_state(b) -> set[str]:
    return {k[0] for k in b.parts.share.get().shard.states}


async def restarted(b, tmp_path) -> Broker:
    await b.stop()
    nb = Broker(Config({"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 1}))
    nb.clock = b.clock
    await nb.start()
    nb.parts.share.get().group_config = configs
    await nb.parts.share.get().ready()
    return nb


async def test_deleting_a_groups_state_and_a_topics_state(broker, tmp_path):
    assert (await produce(broker, "t", 0, batch([b"v%d" % i for i in range(6)]))).error_code == 0
    assert await share_fetch(broker, "ru-a", "m", 0) == set(range(6))
    await accept(broker, "ru-a", "m", 1, 0, 2)
    assert await share_fetch(broker, "ru-b", "m", 0) == set(range(6))
    assert groups_with_state(broker) == {"ru-a", "ru-b"}
    assert await delete_groups_state(broker.parts.share.get(), ["ru-a", "ru-unknown"]) == {}
    assert groups_with_state(broker) == {"ru-b"}
    assert not any(k[0] == "ru-a" for k in broker.parts.share.get().partitions)
    b = await restarted(broker, tmp_path)
    try:
        assert groups_with_state(b) == {"ru-b"}
        # the group starts fresh: from the earliest offset (its config), nothing accepted
        assert await share_fetch(b, "ru-a", "m2", 0) == set(range(6))
        assert await delete_topic_state(b.parts.share.get(), b.topics.get("t").topic_id) is None
        assert groups_with_state(b) == set() and not b.parts.share.get().partitions
    finally:
        b2 = await restarted(b, tmp_path)
    try:
        assert groups_with_state(b2) == set()
    finally:
        await b2.stop()


async def test_metric_families(broker):
    assert (await produce(broker, "t", 0, batch([b"v%d" % i for i in range(6)]))).error_code == 0
    assert await share_fetch(broker, "ru-m", "m", 0) == set(range(6))
    await accept(broker, "ru-m", "m", 1, 0, 1)
    got = {f.name: {tuple(s.labels.values()): s.value for s in f.samples} for f in share_metric_families(
        broker.parts.coordinator.built(), broker.parts.share.built(), broker.topics)}
    assert got["kcoord_share_partition_acquired_records"] == {("ru-m", "t", "0"): 4}
    assert got["kcoord_share_partition_in_flight_records"] == {("ru-m", "t", "0"): 4}
    assert got["kcoord_share_partition_lag"] == {("ru-m", "t", "0"): 4}
    assert got["kcoord_share_group_lag"] == {("ru-m",): 4}
    assert got["kcoord_share_sessions"] == {("ru-m",): 1}
