"""Metadata by topic id (v12), as Kafka's KafkaApis.handleTopicMetadataRequest answers it: Java
kafka-clients 4.x asks this way for the topics a SubscriptionPattern member was assigned (it
knows only their ids), with each name left at its default, "" rather than null."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.metadata import MetadataRequest
from test_produce_helpers import call, make_broker

from kcoord.protocol.api import ApiKey
from kcoord.protocol.errors import ErrorCode as E

ZERO = uuid.UUID(int=0)
T = MetadataRequest.MetadataRequestTopic


@pytest.fixture
async def broker(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 3, {})
    b.create_topic("u", 1, {})
    yield b
    await b.stop()


async def metadata(broker, topics, version=12):
    req = MetadataRequest(version=version, topics=topics, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)
    return (await call(broker, ApiKey.METADATA, req, version)).topics


@pytest.mark.parametrize("name", ["", None], ids=["empty name (Java 4.x)", "null name"])
async def test_by_id_whatever_the_name(broker, name):
    tid = broker.topics.get("t").topic_id
    [got] = await metadata(broker, [T(topic_id=tid, name=name)])
    assert (got.error_code, got.name, got.topic_id, len(got.partitions)) == (E.NONE, "t", tid, 3)


async def test_ids_win_over_names_and_unknown_ids_are_named_as_such(broker):
    t, u = broker.topics.get("t").topic_id, broker.topics.get("u").topic_id
    unknown = uuid.uuid4()
    got = await metadata(broker, [T(topic_id=t, name="u"), T(topic_id=unknown, name=""), T(topic_id=u, name=""),
                                  T(topic_id=t, name="")])
    assert sorted((x.name or "", x.error_code) for x in got) == [("", E.UNKNOWN_TOPIC_ID), ("t", E.NONE),
                                                                 ("u", E.NONE)]
    assert {x.topic_id for x in got} == {t, u, unknown}


async def test_names_still_answer_by_name(broker):
    [got] = await metadata(broker, [T(topic_id=ZERO, name="t")])
    assert (got.error_code, got.name, len(got.partitions)) == (E.NONE, "t", 3)


@pytest.mark.parametrize("version", [10, 11])
async def test_ids_before_v12_are_an_invalid_request(broker, version):
    tid = broker.topics.get("t").topic_id
    [got] = await metadata(broker, [T(topic_id=tid, name="")], version)
    assert (got.error_code, got.partitions) == (E.INVALID_REQUEST, [])
