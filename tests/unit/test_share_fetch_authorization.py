"""Authorization of the share-partition APIs (server/security/policies/share_fetch.py), run
against a real Authorizer and a real Broker's topics: ShareFetch / ShareAcknowledge need READ
on the group (else GROUP_AUTHORIZATION_FAILED for the whole request) and READ on each topic
(else its partitions answer TOPIC_AUTHORIZATION_FAILED); DescribeShareGroupOffsets needs
DESCRIBE on each group; AlterShareGroupOffsets READ and DeleteShareGroupOffsets DELETE on the
group. Every refusal encodes and decodes at its version."""
from __future__ import annotations

import pytest
from test_produce_helpers import make_broker

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.share_messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareFetchResponse,
)
from kcoord.server.handlers.routes import POLICIES
from kcoord.server.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl
from kcoord.server.security.authorizer import Authorizer
from kcoord.server.security.guard import PASS, Access

Op, Res = AclOperation, ResourceType


@pytest.fixture
async def setup(tmp_path):
    b = await make_broker(tmp_path)
    b.create_topic("t", 1, {})
    b.create_topic("secret", 1, {})
    (tmp_path / "acls").mkdir()
    a = Authorizer(tmp_path / "acls", "", False)
    records, results = a.create([StandardAcl(rt, name, PatternType.LITERAL, "User:app", "*", op, AclPermissionType.ALLOW)
                                 for rt, name, op in [(Res.GROUP, "g", Op.READ), (Res.TOPIC, "t", Op.READ),
                                                      (Res.GROUP, "g", Op.DESCRIBE)]])
    assert all(code == 0 for code, _ in results)
    await a.commit(records)
    yield b, a
    await b.stop()


def decide(setup, principal, api, req, version):
    b, a = setup
    return POLICIES[api](Access(a, principal, "10.0.0.1", API_TABLE[api].name, b), req, version)


def roundtrip(api, resp, version):
    spec = API_TABLE[api]
    return spec.response.decode(bytes(resp.encode(version=version)), version=version)


def fetch_req(b, group="g"):
    P = ShareFetchRequest.FetchTopic.FetchPartition
    return ShareFetchRequest(version=2, group_id=group, member_id="m", share_session_epoch=0, max_wait_ms=0,
                             min_bytes=1, max_bytes=1000, max_records=10, batch_size=10, share_acquire_mode=0,
                             is_renew_ack=False, forgotten_topics_data=[],
                             topics=[ShareFetchRequest.FetchTopic(topic_id=b.topics.get(n).topic_id,
                                                                  partitions=[P(partition_index=0,
                                                                                acknowledgement_batches=[])])
                                     for n in ("t", "secret")])


async def test_share_fetch_needs_group_read_and_topic_read(setup):
    b, _ = setup
    refused = decide(setup, "User:other", ApiKey.SHARE_FETCH, fetch_req(b), 2)
    assert roundtrip(ApiKey.SHARE_FETCH, refused.refusal, 2).error_code == E.GROUP_AUTHORIZATION_FAILED
    g = decide(setup, "User:app", ApiKey.SHARE_FETCH, fetch_req(b), 2)
    assert [t.topic_id for t in g.request.topics] == [b.topics.get("t").topic_id]  # secret never reaches the handler
    resp = g.after(ShareFetchResponse(version=2, throttle_time_ms=0, error_code=0, error_message=None,
                                      acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[]))
    resp = roundtrip(ApiKey.SHARE_FETCH, resp, 2)
    (t,) = resp.responses
    assert t.topic_id == b.topics.get("secret").topic_id
    assert t.partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


async def test_share_acknowledge_needs_group_read(setup):
    req = ShareAcknowledgeRequest(version=2, group_id="g", member_id="m", share_session_epoch=1, is_renew_ack=False,
                                  topics=[])
    refused = decide(setup, "User:other", ApiKey.SHARE_ACKNOWLEDGE, req, 2)
    assert roundtrip(ApiKey.SHARE_ACKNOWLEDGE, refused.refusal, 2).error_code == E.GROUP_AUTHORIZATION_FAILED
    assert decide(setup, "User:app", ApiKey.SHARE_ACKNOWLEDGE, req, 2) is PASS


async def test_offsets_apis(setup):
    G = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
    req = DescribeShareGroupOffsetsRequest(version=1, groups=[G(group_id="g", topics=None), G(group_id="h", topics=None)])
    g = decide(setup, "User:app", ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, req, 1)
    assert [x.group_id for x in g.request.groups] == ["g"]
    from kcoord.protocol.share_messages import DescribeShareGroupOffsetsResponse

    resp = g.after(DescribeShareGroupOffsetsResponse(version=1, throttle_time_ms=0, groups=[]))
    assert [(x.group_id, x.error_code) for x in roundtrip(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, resp, 1).groups] == \
        [("h", E.GROUP_AUTHORIZATION_FAILED)]
    alter = AlterShareGroupOffsetsRequest(version=0, group_id="g", topics=[])
    assert decide(setup, "User:app", ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter, 0) is PASS
    refused = decide(setup, "User:other", ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter, 0)
    assert roundtrip(ApiKey.ALTER_SHARE_GROUP_OFFSETS, refused.refusal, 0).error_code == E.GROUP_AUTHORIZATION_FAILED
    delete = DeleteShareGroupOffsetsRequest(version=0, group_id="g", topics=[])
    refused = decide(setup, "User:app", ApiKey.DELETE_SHARE_GROUP_OFFSETS, delete, 0)  # READ is not DELETE
    assert roundtrip(ApiKey.DELETE_SHARE_GROUP_OFFSETS, refused.refusal, 0).error_code == E.GROUP_AUTHORIZATION_FAILED
