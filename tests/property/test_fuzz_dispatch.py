"""Codec fuzzing of Dispatcher.handle, in process (no sockets).

A real Broker (topics, logs, coordinator loaded) and its Dispatcher are fed:
- random bytes, and random bodies behind a valid header of every served API and version;
- for every API key in API_TABLE and every served version, a valid request (a seed), every
  truncation of it, and random byte mutations, insertions and deletions of it.

The property, Kafka's rule for bad input: handle() returns a response frame (size prefix right,
correlation id echoed, response header per ApiSpec.response_header_version, body decoding with
the spec's response class at that version, to the last byte), None, or a Deferred of either,
or raises CloseConnection. Nothing else escapes, and no handler fails behind a Deferred.
The unmutated seeds must be answered without an error code, so the property is not vacuous.
"""
from __future__ import annotations

import asyncio
import struct
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeTopicPartitionsRequest,
    DescribeUserScramCredentialsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from txn_seeds import ERROR_BY_DESIGN as TXN_ERROR_BY_DESIGN
from txn_seeds import TXN_APIS, txn_request

from kcoord.protocol.api import API_TABLE, ApiKey, _generic_decoder
from kcoord.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from kcoord.server.broker import Broker
from kcoord.server.config import Config
from kcoord.server.deferred import Deferred
from kcoord.server.dispatch import CloseConnection, Dispatcher
from kcoord.server.node import dispatcher_for

TOPIC = "fuzz"
GROUP = "fuzz-g"
COMMIT_GROUP = "fuzz-commit"
CLIENT_ID = b"fuzz"
# A request must be answered (or parked) within this much CPU time of this thread: a decoder
# or handler that loops on a hostile length is a hang. CPU time, not wall-clock time, so that
# a busy machine that deschedules the test does not look like a hang.
SLOW_CALL_SECONDS = 2.0
# A CreateTopics asking for more partitions than this would create that many log files per
# example; such frames are skipped by the fuzzers (see test_create_topics_huge_partition_count).
MAX_FUZZ_PARTITIONS = 64


# ---- seeds: one valid request per (API, served version) ----------------------------------------


def _batch() -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    for i in range(2):
        b.append(i, 1_700_000_000_000 + i, b"k%d" % i, b"value-%d" % i, [])
    return bytes(b.build())


def build_request(api: int, v: int, topic_id: uuid.UUID) -> Any:
    """A minimal valid request of API `api` at version `v` that kcoord answers without error."""
    if api == ApiKey.PRODUCE:
        T = ProduceRequest.TopicProduceData
        P = T.PartitionProduceData
        return ProduceRequest(version=v, transactional_id=None, acks=1, timeout_ms=5000,
                              topic_data=[T(name=TOPIC, partition_data=[P(index=0, records=_batch())])])
    if api == ApiKey.FETCH:
        T = FetchRequest.FetchTopic
        P = T.FetchPartition
        part = P(partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                 log_start_offset=-1, partition_max_bytes=1 << 20)
        topic = T(topic_id=topic_id, partitions=[part]) if v >= 13 else T(topic=TOPIC, partitions=[part])
        kw: dict[str, Any] = {}
        if v >= 15:
            kw["replica_state"] = FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)
        else:
            kw["replica_id"] = -1
        return FetchRequest(version=v, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                            session_id=0, session_epoch=-1, topics=[topic], forgotten_topics_data=[],
                            rack_id="", **kw)
    if api == ApiKey.LIST_OFFSETS:
        T = ListOffsetsRequest.ListOffsetsTopic
        P = T.ListOffsetsPartition
        return ListOffsetsRequest(version=v, replica_id=-1, isolation_level=0, timeout_ms=0, topics=[
            T(name=TOPIC, partitions=[P(partition_index=0, current_leader_epoch=-1, timestamp=-1,
                                        max_num_offsets=1)])])
    if api == ApiKey.OFFSET_FOR_LEADER_EPOCH:
        T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        return OffsetForLeaderEpochRequest(version=v, replica_id=-1, topics=[
            T(topic=TOPIC, partitions=[T.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                   leader_epoch=0)])])
    if api == ApiKey.METADATA:
        return MetadataRequest(version=v, topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                               allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                               include_topic_authorized_operations=False)
    if api == ApiKey.OFFSET_COMMIT:
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        return OffsetCommitRequest(
            version=v, group_id=COMMIT_GROUP, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, retention_time_ms=-1,
            topics=[T(name=TOPIC, partitions=[P(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                                 commit_timestamp=-1, committed_metadata="m")])])
    if api == ApiKey.OFFSET_FETCH:
        if v >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            return OffsetFetchRequest(version=v, require_stable=False, groups=[
                G(group_id=COMMIT_GROUP, topics=[G.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])])])
        return OffsetFetchRequest(version=v, group_id=COMMIT_GROUP, require_stable=False, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])])
    if api == ApiKey.FIND_COORDINATOR:
        return FindCoordinatorRequest(version=v, key=GROUP, key_type=0, coordinator_keys=[GROUP])
    if api == ApiKey.JOIN_GROUP:
        return JoinGroupRequest(
            version=v, group_id=f"fuzz-join-{v}", session_timeout_ms=10000, rebalance_timeout_ms=10000,
            member_id="", group_instance_id=None, protocol_type="consumer", reason=None,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00")])
    if api == ApiKey.HEARTBEAT:
        return HeartbeatRequest(version=v, group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None)
    if api == ApiKey.LEAVE_GROUP:
        if v >= 3:
            return LeaveGroupRequest(version=v, group_id=GROUP, members=[
                LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None)])
        return LeaveGroupRequest(version=v, group_id=GROUP, member_id="m")
    if api == ApiKey.SYNC_GROUP:
        return SyncGroupRequest(version=v, group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None,
                                protocol_type="consumer", protocol_name="range", assignments=[
                                    SyncGroupRequest.SyncGroupRequestAssignment(member_id="m", assignment=b"a")])
    if api == ApiKey.DESCRIBE_GROUPS:
        return DescribeGroupsRequest(version=v, groups=[GROUP], include_authorized_operations=False)
    if api == ApiKey.LIST_GROUPS:
        return ListGroupsRequest(version=v, states_filter=[], types_filter=[])
    if api == ApiKey.API_VERSIONS:
        return ApiVersionsRequest(version=v, client_software_name="fuzz", client_software_version="1.0")
    if api == ApiKey.CREATE_TOPICS:
        T = CreateTopicsRequest.CreatableTopic
        return CreateTopicsRequest(version=v, timeout_ms=5000, validate_only=False, topics=[
            T(name=f"fuzz-created-{v}", num_partitions=1, replication_factor=1, assignments=[], configs=[])])
    if api == ApiKey.INIT_PRODUCER_ID:
        return InitProducerIdRequest(version=v, transactional_id=None, transaction_timeout_ms=60000,
                                     producer_id=-1, producer_epoch=-1)
    if api == ApiKey.DELETE_GROUPS:
        return DeleteGroupsRequest(version=v, groups_names=["fuzz-no-such-group"])
    if api == ApiKey.OFFSET_DELETE:
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        return OffsetDeleteRequest(version=v, group_id="fuzz-no-such-group", topics=[
            T(name=TOPIC, partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])])
    if api == ApiKey.DESCRIBE_ACLS:
        return DescribeAclsRequest(version=v, resource_type_filter=2, resource_name_filter="t", pattern_type_filter=3,
                                   principal_filter=None, host_filter=None, operation=1, permission_type=1)
    if api == ApiKey.CREATE_ACLS:
        C = CreateAclsRequest.AclCreation
        return CreateAclsRequest(version=v, creations=[C(resource_type=2, resource_name="t", resource_pattern_type=3,
                                                         principal="User:u", host="*", operation=3, permission_type=3)])
    if api == ApiKey.DELETE_ACLS:
        F = DeleteAclsRequest.DeleteAclsFilter
        return DeleteAclsRequest(version=v, filters=[F(resource_type_filter=2, resource_name_filter="t",
                                                       pattern_type_filter=3, principal_filter=None, host_filter=None,
                                                       operation=1, permission_type=1)])
    if api == ApiKey.SASL_HANDSHAKE:
        return SaslHandshakeRequest(version=v, mechanism="PLAIN")
    if api == ApiKey.SASL_AUTHENTICATE:
        return SaslAuthenticateRequest(version=v, auth_bytes=b"\x00u\x00p")
    if api == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
        return DescribeUserScramCredentialsRequest(version=v, users=None)
    if api == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
        return AlterUserScramCredentialsRequest(version=v, deletions=[], upsertions=[
            U(name="fuzz-user", mechanism=1, iterations=4096, salt=b"salt", salted_password=b"s" * 32)])
    if api == ApiKey.DELETE_TOPICS:  # the topic the CreateTopics seed of this version made
        if v >= 6:
            T = DeleteTopicsRequest.DeleteTopicState
            return DeleteTopicsRequest(version=v, timeout_ms=5000, topics=[
                T(name=f"fuzz-created-{v}", topic_id=uuid.UUID(int=0))])
        return DeleteTopicsRequest(version=v, timeout_ms=5000, topic_names=[f"fuzz-created-{v}"])
    if api == ApiKey.DELETE_RECORDS:  # offset 0: the log start offset stays where it is
        T = DeleteRecordsRequest.DeleteRecordsTopic
        return DeleteRecordsRequest(version=v, timeout_ms=5000, topics=[
            T(name=TOPIC, partitions=[T.DeleteRecordsPartition(partition_index=1, offset=0)])])
    if api == ApiKey.CREATE_PARTITIONS:  # each version grows the topic by one (it has 2)
        return CreatePartitionsRequest(version=v, timeout_ms=5000, validate_only=False, topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=TOPIC, count=3 + v, assignments=None)])
    if api == ApiKey.CONSUMER_GROUP_HEARTBEAT:  # a member joining (epoch 0)
        return ConsumerGroupHeartbeatRequest(
            version=v, group_id=f"fuzz-cg-{v}", member_id=f"fuzz-member-{v}", member_epoch=0, instance_id=None,
            rack_id=None, rebalance_timeout_ms=30000, subscribed_topic_names=[TOPIC], subscribed_topic_regex=None,
            server_assignor=None, topic_partitions=[])
    if api == ApiKey.CONSUMER_GROUP_DESCRIBE:  # the group the heartbeat seed of this version made
        return ConsumerGroupDescribeRequest(version=v, group_ids=[f"fuzz-cg-{v}"], include_authorized_operations=False)
    if api == ApiKey.SHARE_GROUP_HEARTBEAT:  # a share member joining (epoch 0)
        from kcoord.protocol.share_messages import ShareGroupHeartbeatRequest

        return ShareGroupHeartbeatRequest(version=v, group_id=f"fuzz-sg-{v}", member_id=f"fuzz-share-member-{v}",
                                          member_epoch=0, rack_id=None, subscribed_topic_names=[TOPIC])
    if api == ApiKey.SHARE_GROUP_DESCRIBE:  # the group the heartbeat seed of this version made
        from kcoord.protocol.share_messages import ShareGroupDescribeRequest

        return ShareGroupDescribeRequest(version=v, group_ids=[f"fuzz-sg-{v}"], include_authorized_operations=False)
    seed = _admin_seed(api, v) or _share_seed(api, v, topic_id)
    if seed is not None:
        return seed
    if api in TXN_APIS:
        return txn_request(api, v, TOPIC, COMMIT_GROUP)
    raise AssertionError(f"no seed for API {api}: add one when an API is added to API_TABLE")


def _share_seed(api: int, v: int, topic_id: uuid.UUID) -> Any:
    """Seeds of the share-partition APIs: a share fetch opening a session of group
    fuzz-share-v, an acknowledgement without a session, the share offsets of fuzz-share-1 (the
    group the ShareFetch v1 seed started) described, set and deleted."""
    from kcoord.protocol import share_messages as sm

    group = f"fuzz-share-{v}" if api in (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE) else "fuzz-share-1"
    if api == ApiKey.SHARE_FETCH:
        P = sm.ShareFetchRequest.FetchTopic.FetchPartition
        return sm.ShareFetchRequest(
            version=v, group_id=group, member_id="fuzz-member", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
            max_bytes=1 << 20, max_records=10, batch_size=10, share_acquire_mode=0, is_renew_ack=False,
            topics=[sm.ShareFetchRequest.FetchTopic(topic_id=topic_id, partitions=[
                P(partition_index=0, acknowledgement_batches=[])])], forgotten_topics_data=[])
    if api == ApiKey.SHARE_ACKNOWLEDGE:  # no session of its own: SHARE_SESSION_NOT_FOUND by design
        P = sm.ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition
        return sm.ShareAcknowledgeRequest(
            version=v, group_id=group, member_id="fuzz-other", share_session_epoch=1, is_renew_ack=False,
            topics=[sm.ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=topic_id, partitions=[P(
                partition_index=0, acknowledgement_batches=[P.AcknowledgementBatch(
                    first_offset=0, last_offset=0, acknowledge_types=[1])])])])
    if api == ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS:
        G = sm.DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
        return sm.DescribeShareGroupOffsetsRequest(version=v, groups=[G(group_id=group, topics=[
            G.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=[0])])])
    if api == ApiKey.ALTER_SHARE_GROUP_OFFSETS:
        T = sm.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
        return sm.AlterShareGroupOffsetsRequest(version=v, group_id=group, topics=[T(topic_name=TOPIC, partitions=[
            T.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])])
    if api == ApiKey.DELETE_SHARE_GROUP_OFFSETS:
        T = sm.DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
        return sm.DeleteShareGroupOffsetsRequest(version=v, group_id=group, topics=[T(topic_name=TOPIC)])
    return _share_state_seed(api, v, topic_id)


def _share_state_seed(api: int, v: int, topic_id: uuid.UUID) -> Any:
    """Seeds of the share coordinator's inter-broker APIs, on group fuzz-state: initialized,
    read, written (one acknowledged record) and deleted."""
    from kcoord.protocol import share_state_messages as ss

    group = "fuzz-state"
    if api == ApiKey.INITIALIZE_SHARE_GROUP_STATE:
        D = ss.InitializeShareGroupStateRequest.InitializeStateData
        return ss.InitializeShareGroupStateRequest(version=v, group_id=group, topics=[D(
            topic_id=topic_id, partitions=[D.PartitionData(partition=0, state_epoch=0, start_offset=0)])])
    if api == ApiKey.READ_SHARE_GROUP_STATE:
        D = ss.ReadShareGroupStateRequest.ReadStateData
        return ss.ReadShareGroupStateRequest(version=v, group_id=group, topics=[D(
            topic_id=topic_id, partitions=[D.PartitionData(partition=0, leader_epoch=0)])])
    if api == ApiKey.WRITE_SHARE_GROUP_STATE:
        D = ss.WriteShareGroupStateRequest.WriteStateData
        P = D.PartitionData
        return ss.WriteShareGroupStateRequest(version=v, group_id=group, topics=[D(topic_id=topic_id, partitions=[P(
            partition=0, state_epoch=0, leader_epoch=0, start_offset=0, state_batches=[
                P.StateBatch(first_offset=0, last_offset=0, delivery_state=2, delivery_count=1)])])])
    if api == ApiKey.DELETE_SHARE_GROUP_STATE:
        D = ss.DeleteShareGroupStateRequest.DeleteStateData
        return ss.DeleteShareGroupStateRequest(version=v, group_id=group, topics=[D(
            topic_id=topic_id, partitions=[D.PartitionData(partition=0)])])
    return None


def _admin_seed(api: int, v: int) -> Any:
    """Seeds of the config and cluster admin APIs (alterations are validate_only)."""
    if api == ApiKey.DESCRIBE_CONFIGS:
        R = DescribeConfigsRequest.DescribeConfigsResource
        return DescribeConfigsRequest(version=v, include_synonyms=True, include_documentation=True, resources=[
            R(resource_type=2, resource_name=TOPIC, configuration_keys=None),
            R(resource_type=4, resource_name="1", configuration_keys=["message.max.bytes"])])
    if api == ApiKey.ALTER_CONFIGS:
        R = AlterConfigsRequest.AlterConfigsResource
        return AlterConfigsRequest(version=v, validate_only=True, resources=[R(
            resource_type=2, resource_name=TOPIC, configs=[R.AlterableConfig(name="retention.ms", value="60000")])])
    if api == ApiKey.INCREMENTAL_ALTER_CONFIGS:
        R = IncrementalAlterConfigsRequest.AlterConfigsResource
        return IncrementalAlterConfigsRequest(version=v, validate_only=True, resources=[R(
            resource_type=2, resource_name=TOPIC,
            configs=[R.AlterableConfig(name="retention.ms", config_operation=0, value="60000")])])
    if api == ApiKey.DESCRIBE_LOG_DIRS:
        T = DescribeLogDirsRequest.DescribableLogDirTopic
        return DescribeLogDirsRequest(version=v, topics=[T(topic=TOPIC, partitions=[0])])
    if api == ApiKey.ELECT_LEADERS:
        T = ElectLeadersRequest.TopicPartitions
        return ElectLeadersRequest(version=v, election_type=0, timeout_ms=1000,
                                   topic_partitions=[T(topic=TOPIC, partitions=[0])])
    if api == ApiKey.ALTER_PARTITION_REASSIGNMENTS:
        T = AlterPartitionReassignmentsRequest.ReassignableTopic
        return AlterPartitionReassignmentsRequest(version=v, timeout_ms=1000, topics=[
            T(name=TOPIC, partitions=[T.ReassignablePartition(partition_index=0, replicas=[1])])])
    if api == ApiKey.LIST_PARTITION_REASSIGNMENTS:
        return ListPartitionReassignmentsRequest(version=v, timeout_ms=1000, topics=None)
    if api == ApiKey.DESCRIBE_CLUSTER:
        return DescribeClusterRequest(version=v, include_cluster_authorized_operations=True, endpoint_type=1)
    if api == ApiKey.DESCRIBE_CLIENT_QUOTAS:
        C = DescribeClientQuotasRequest.ComponentData
        return DescribeClientQuotasRequest(version=v, strict=False, components=[
            C(entity_type="client-id", match_type=2, match=None)])
    if api == ApiKey.ALTER_CLIENT_QUOTAS:
        E = AlterClientQuotasRequest.EntryData
        return AlterClientQuotasRequest(version=v, validate_only=True, entries=[E(
            entity=[E.EntityData(entity_type="client-id", entity_name="fuzz")],
            ops=[E.OpData(key="producer_byte_rate", value=1048576.0, remove=False)])])
    if api == ApiKey.DESCRIBE_TOPIC_PARTITIONS:
        return DescribeTopicPartitionsRequest(version=v, response_partition_limit=100, cursor=None, topics=[
            DescribeTopicPartitionsRequest.TopicRequest(name=TOPIC)])
    return None


def header(api: int, v: int, corr: int) -> bytes:
    out = struct.pack(">hhi", api, v, corr) + struct.pack(">h", len(CLIENT_ID)) + CLIENT_ID
    if API_TABLE[api].request_header_version(v) >= 2:
        out += b"\x00"
    return out


@dataclass(frozen=True)
class Seed:
    api: int
    version: int
    frame: bytes  # header + body, no size prefix
    body_at: int  # where the body starts

    @property
    def name(self) -> str:
        return f"{API_TABLE[self.api].key.name}v{self.version}"


def make_seeds(topic_id: uuid.UUID) -> list[Seed]:
    seeds = []
    for api, spec in sorted(API_TABLE.items()):
        for v in range(spec.min_version, spec.max_version + 1):
            hdr = header(api, v, 1000 + 100 * api + v)
            body = bytes(build_request(api, v, topic_id).encode(version=v))
            seeds.append(Seed(api, v, hdr + body, len(hdr)))
    return seeds


# ---- the server under test and the property ----------------------------------------------------


@dataclass
class Env:
    loop: asyncio.AbstractEventLoop
    broker: Broker
    dispatcher: Dispatcher
    seeds: list[Seed]
    failures: list[str] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)
    skipped: int = 0

    def check(self, frame: bytes, guard: bool = True) -> str:
        return self.loop.run_until_complete(self._check(frame, guard))

    async def _check(self, frame: bytes, guard: bool) -> str:
        if guard and _creates_huge_topic(frame):
            self.skipped += 1
            return "skipped"
        t0 = time.thread_time()
        try:
            result = self.dispatcher.handle(frame, "127.0.0.1")
        except CloseConnection:
            return "closed"
        except Exception as e:  # noqa: BLE001 - the property under test
            raise AssertionError(f"SERVER BUG: {type(e).__name__} escaped Dispatcher.handle "
                                 f"for frame {frame!r}: {e!r}") from e
        elapsed = time.thread_time() - t0
        assert elapsed < SLOW_CALL_SECONDS, f"SERVER BUG: handle() took {elapsed:.1f}s of CPU for frame {frame!r}"
        if isinstance(result, Deferred):
            for _ in range(20):  # durable writes complete within a few loop turns
                if result.done:
                    break
                await asyncio.sleep(0.001)
            if not result.done:
                result.add_callback(lambda value: self._late(frame, value))
                return "parked"
            result = result.result()
            if isinstance(result, CloseConnection):
                assert "handler failed" not in str(result), \
                    f"SERVER BUG: handler failed behind a Deferred for frame {frame!r}: {result}"
                return "closed"
        if result is None:
            return "none"
        assert isinstance(result, bytes), f"SERVER BUG: handle() returned {type(result)} for {frame!r}"
        return check_response(frame, result)

    def _late(self, frame: bytes, value: Any) -> None:
        try:
            if isinstance(value, CloseConnection):
                assert "handler failed" not in str(value), f"handler failed: {value}"
            elif value is not None:
                check_response(frame, value)
        except AssertionError as e:
            self.failures.append(f"SERVER BUG: parked request answered badly for frame {frame!r}: {e}")


def _creates_huge_topic(frame: bytes) -> bool:
    if len(frame) < 8 or struct.unpack_from(">h", frame)[0] not in (ApiKey.CREATE_TOPICS, ApiKey.CREATE_PARTITIONS):
        return False
    api, v, _ = struct.unpack_from(">hhi", frame)
    spec = API_TABLE[api]
    if not spec.min_version <= v <= spec.max_version:
        return False
    from kcoord.protocol.headers import read_client_id
    try:
        _, pos = read_client_id(frame, spec.request_header_version(v))
        req = spec.decode(frame, pos, v)
    except Exception:  # noqa: BLE001 - undecodable: the dispatcher will close
        return False
    if api == ApiKey.DELETE_RECORDS:  # offset 0: the log start offset stays where it is
        T = DeleteRecordsRequest.DeleteRecordsTopic
        return DeleteRecordsRequest(version=v, timeout_ms=5000, topics=[
            T(name=TOPIC, partitions=[T.DeleteRecordsPartition(partition_index=1, offset=0)])])
    if api == ApiKey.CREATE_PARTITIONS:
        return any(t.count > MAX_FUZZ_PARTITIONS for t in req.topics or ())
    return any(t.num_partitions > MAX_FUZZ_PARTITIONS or len(t.assignments or ()) > MAX_FUZZ_PARTITIONS
               for t in req.topics or ())


def check_response(request: bytes, response: bytes) -> str:
    """The response frame is well formed for the request's API and version; returns the kind
    of answer ("ok" or "error")."""
    api, v, corr = struct.unpack_from(">hhi", request)
    spec = API_TABLE[api]
    assert len(response) >= 8, f"SERVER BUG: response {response!r} shorter than a header"
    (size,) = struct.unpack_from(">i", response)
    assert size == len(response) - 4, f"SERVER BUG: size prefix {size} for {len(response) - 4} bytes"
    (got_corr,) = struct.unpack_from(">i", response, 4)
    assert got_corr == corr, f"SERVER BUG: correlation id {got_corr}, request had {corr}"
    if api == ApiKey.API_VERSIONS and not spec.min_version <= v <= spec.max_version:
        v = 0  # KIP-511: a v0 body for a version we do not know
    pos = 8
    if spec.response_header_version(v) >= 1:
        assert response[pos:pos + 1] == b"\x00", f"SERVER BUG: response header tagged fields {response[8:12]!r}"
        pos += 1
    try:
        obj, end = _generic_decoder(spec.response, v)(memoryview(response), pos)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"SERVER BUG: {spec.key.name} v{v} response does not decode: {e!r}; "
                             f"request {request!r} response {response!r}") from e
    assert end == len(response), (f"SERVER BUG: {spec.key.name} v{v} response body is {len(response) - pos} "
                                  f"bytes, decoding used {end - pos}; request {request!r}")
    return "error" if _has_error(obj) else "ok"


def _has_error(obj: Any) -> bool:
    """A top-level or first-nested error code other than NONE."""
    if getattr(obj, "error_code", 0):
        return True
    for name in ("responses", "topics", "groups", "coordinators", "results"):
        items = getattr(obj, name, None) or []
        for it in items:
            if getattr(it, "error_code", 0):
                return True
            for sub in ("partitions", "partition_responses"):
                for p in getattr(it, sub, None) or []:
                    if getattr(p, "error_code", 0):
                        return True
    return False


def start_env(data) -> Env:
    loop = asyncio.new_event_loop()
    broker = Broker(Config({
        "log.dirs": str(data),
        "offsets.topic.num.partitions": 4,
        "transaction.state.log.num.partitions": 4,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "false",
        "listeners": "PLAINTEXT://127.0.0.1:0",
    }))

    async def boot() -> None:
        await broker.start()
        broker.start_background()
        await asyncio.wait_for(broker._background[0], 20)  # __consumer_offsets loaded
        broker.create_topic(TOPIC, 2, {})

    loop.run_until_complete(boot())
    topic = broker.topics.get(TOPIC)
    assert topic is not None
    return Env(loop, broker, dispatcher_for(broker), make_seeds(topic.topic_id))


def stop_env(e: Env) -> list[str]:
    # Parked requests (joins, long polls) answer now; their late answers are checked too.
    e.broker.parts.data_plane.get().complete_parked()
    e.loop.run_until_complete(asyncio.sleep(0.05))
    failures = list(e.failures)
    e.loop.run_until_complete(e.broker.stop())
    for task in asyncio.all_tasks(e.loop):
        task.cancel()
    e.loop.run_until_complete(asyncio.sleep(0))
    e.loop.close()
    return failures


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator[Env]:
    e = start_env(tmp_path_factory.mktemp("fuzz-dispatch") / "data")
    yield e
    failures = stop_env(e)
    assert not failures, "\n".join(failures[:5])


def _no_late_failures(env: Env) -> None:
    assert not env.failures, "\n".join(env.failures[:5])


# ---- the tests ------------------------------------------------------------------------------


def test_every_seed_is_answered_without_error(env: Env) -> None:
    """Non-vacuity: each unmutated seed decodes, reaches its handler and gets a good answer
    (or parks, as a JoinGroup of v0-v3 waiting for its rebalance may, or completes with
    nothing, as acks=0 would)."""
    kinds: dict[str, str] = {}
    for seed in env.seeds:
        kinds[seed.name] = env.check(seed.frame)
    bad = {name: k for name, k in kinds.items() if k not in ("ok", "parked")}
    # Heartbeat / SyncGroup / LeaveGroup for a member the group does not know are errors by
    # design; they still prove the request decoded and reached the coordinator.
    expected_errors = {n for n in kinds if n.startswith(("HEARTBEAT", "SYNC_GROUP", "LEAVE_GROUP",
                                                         "DELETE_GROUPS", "OFFSET_DELETE", "SHARE_ACKNOWLEDGE",
                                                         *TXN_ERROR_BY_DESIGN))}
    # SASL requests on a connection that is not authenticating: ILLEGAL_SASL_STATE, as Kafka; the
    # ACL APIs without an authorizer: SECURITY_DISABLED, as Kafka.
    expected_errors |= {n for n in kinds if n.startswith(("SASL_HANDSHAKE", "SASL_AUTHENTICATE", "DESCRIBE_ACLS",
                                                          "CREATE_ACLS", "DELETE_ACLS"))}
    # JoinGroup v4+ from a new dynamic member: MEMBER_ID_REQUIRED, by design.
    expected_errors |= {f"JOIN_GROUP{v}" for v in ("v4", "v5", "v6", "v7", "v8", "v9")}
    unexpected = {n: k for n, k in bad.items() if not (n in expected_errors and k == "error")}
    assert not unexpected, f"seeds not answered cleanly: {unexpected}"
    ok = sum(1 for k in kinds.values() if k == "ok")
    assert ok >= 90, f"only {ok} of {len(kinds)} seeds got a non-error answer: {kinds}"
    assert len(env.seeds) == sum(s.max_version - s.min_version + 1 for s in API_TABLE.values())
    _no_late_failures(env)


def test_every_truncation_of_every_seed(env: Env) -> None:
    """Every prefix of every seed: at least the header's and each field's boundaries."""
    outcomes: Counter = Counter()
    for seed in env.seeds:
        for n in range(len(seed.frame)):
            outcomes[env.check(seed.frame[:n])] += 1
    # A prefix ending inside the body never decodes, except where the remainder is optional
    # (e.g. nothing after an empty array in a non-flexible version); most must close.
    assert outcomes["closed"] > 0.9 * sum(outcomes.values()), outcomes
    _no_late_failures(env)


def test_random_bytes(env: Env) -> None:
    import random
    rnd = random.Random(8)
    for _ in range(3000):
        n = rnd.choice((0, 1, 4, 7, 8, 9, 10, 12, 16, 32, 64, 200))
        frame = rnd.randbytes(n)
        env.check(frame)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_body_behind_a_valid_header(env: Env, data: st.DataObject) -> None:
    api = data.draw(st.sampled_from(sorted(API_TABLE)), label="api")
    spec = API_TABLE[api]
    v = data.draw(st.integers(spec.min_version, spec.max_version), label="version")
    body = data.draw(st.binary(max_size=96), label="body")
    env.check(header(api, v, 7) + body)
    _no_late_failures(env)


# Values that stress length and count fields: null/negative lengths, huge counts, varint edges.
INTERESTING_BYTES = [0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF]
INTERESTING_WORDS = [b"\xff\xff", b"\x7f\xff", b"\x80\x00", b"\x00\x00", b"\xff\xff\xff\xff",
                     b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x00\x00\x00", b"\x00\x00\x00\x01",
                     b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x80"]


@st.composite
def mutated(draw: st.DrawFn, seeds: list[Seed]) -> tuple[Seed, bytes]:
    seed = draw(st.sampled_from(seeds), label="seed")
    buf = bytearray(seed.frame)
    for _ in range(draw(st.integers(1, 4), label="mutations")):
        # Mutate the body mostly: header mutations are covered by the truncation sweep and the
        # random tests and mostly just close.
        lo = seed.body_at if draw(st.integers(0, 9)) else 0
        if len(buf) <= lo:  # earlier deletions cut into the body's start
            buf.extend(b"\x00" * (lo + 1 - len(buf)))
        pos = draw(st.integers(lo, len(buf) - 1), label="pos")
        op = draw(st.sampled_from(["set", "flip", "word", "insert", "delete", "dup"]), label="op")
        if op == "set":
            buf[pos] = draw(st.sampled_from(INTERESTING_BYTES))
        elif op == "flip":
            buf[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "word":
            w = draw(st.sampled_from(INTERESTING_WORDS))
            buf[pos:pos + len(w)] = w
        elif op == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del buf[pos:pos + draw(st.integers(1, 8))]
        else:
            buf[pos:pos] = buf[pos:pos + draw(st.integers(1, 16))]
    return seed, bytes(buf)


def test_mutations(env: Env) -> None:
    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=mutated(env.seeds))
    def run(case: tuple[Seed, bytes]) -> None:
        _seed, frame = case
        env.outcomes[env.check(frame)] += 1
        _no_late_failures(env)

    run()
    # The mutations must reach handlers, not only the decoder's refusal.
    assert env.outcomes["ok"] + env.outcomes["error"] > 40, env.outcomes


def test_byte_sweep_of_every_seed_body(env: Env) -> None:
    """Deterministic: each body byte of each seed set to 0x00, 0x7F, 0x80 and 0xFF in turn."""
    outcomes: Counter = Counter()
    for seed in env.seeds:
        for pos in range(seed.body_at, len(seed.frame)):
            for b in (0x00, 0x7F, 0x80, 0xFF):
                if seed.frame[pos] == b:
                    continue
                frame = seed.frame[:pos] + bytes([b]) + seed.frame[pos + 1:]
                outcomes[env.check(frame)] += 1
    assert outcomes["ok"] + outcomes["error"] > 100, outcomes
    _no_late_failures(env)


# ---- minimal cases of the bugs the fuzzers found -----------------------------------------------
#
# kafka-python's generic decoders accept a null (length -1, or compact 0) for arrays and strings
# the schema declares non-nullable, and hand the handler None; Kafka's generated readers refuse
# such a request ("non-nullable field ... was serialized as null"), so the connection must be
# closed. Each request below is valid but for one such null.

OF_T = OffsetFetchRequest.OffsetFetchRequestTopic
OF_G = OffsetFetchRequest.OffsetFetchRequestGroup
FT = FetchRequest.FetchTopic
LO_T = ListOffsetsRequest.ListOffsetsTopic
PR_T = ProduceRequest.TopicProduceData
CT_T = CreateTopicsRequest.CreatableTopic
OD_T = OffsetDeleteRequest.OffsetDeleteRequestTopic

NULL_WHERE_NOT_NULLABLE: dict[str, tuple[int, int, Any]] = {
    "offset_fetch_v6_partition_indexes": (ApiKey.OFFSET_FETCH, 6, lambda: OffsetFetchRequest(
        version=6, group_id="g", require_stable=False, topics=[OF_T(name="t", partition_indexes=None)])),
    "offset_fetch_v8_groups": (ApiKey.OFFSET_FETCH, 8, lambda: OffsetFetchRequest(
        version=8, require_stable=False, groups=None)),
    "offset_fetch_v8_group_partition_indexes": (ApiKey.OFFSET_FETCH, 8, lambda: OffsetFetchRequest(
        version=8, require_stable=False, groups=[OF_G(group_id="g", topics=[
            OF_G.OffsetFetchRequestTopics(name="t", partition_indexes=None)])])),
    "find_coordinator_v4_coordinator_keys": (ApiKey.FIND_COORDINATOR, 4, lambda: FindCoordinatorRequest(
        version=4, key_type=0, coordinator_keys=None)),
    "leave_group_v3_members": (ApiKey.LEAVE_GROUP, 3, lambda: LeaveGroupRequest(
        version=3, group_id="g", members=None)),
    "join_group_v0_protocols": (ApiKey.JOIN_GROUP, 0, lambda: JoinGroupRequest(
        version=0, group_id="g", session_timeout_ms=10000, member_id="", protocol_type="consumer",
        protocols=None)),
    "fetch_v4_topics": (ApiKey.FETCH, 4, lambda: FetchRequest(
        version=4, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024, topics=None)),
    "fetch_v4_partitions": (ApiKey.FETCH, 4, lambda: FetchRequest(
        version=4, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1024,
        topics=[FT(topic=TOPIC, partitions=None)])),
    "list_offsets_v1_partitions": (ApiKey.LIST_OFFSETS, 1, lambda: ListOffsetsRequest(
        version=1, replica_id=-1, topics=[LO_T(name=TOPIC, partitions=None)])),
    "produce_v3_partition_data": (ApiKey.PRODUCE, 3, lambda: ProduceRequest(
        version=3, transactional_id=None, acks=1, timeout_ms=1000,
        topic_data=[PR_T(name=TOPIC, partition_data=None)])),
    "describe_groups_v0_groups": (ApiKey.DESCRIBE_GROUPS, 0, lambda: DescribeGroupsRequest(
        version=0, groups=None)),
    "list_groups_v4_null_state": (ApiKey.LIST_GROUPS, 4, lambda: ListGroupsRequest(
        version=4, states_filter=[None])),
    "delete_groups_v0_groups_names": (ApiKey.DELETE_GROUPS, 0, lambda: DeleteGroupsRequest(
        version=0, groups_names=None)),
    "offset_delete_v0_topics": (ApiKey.OFFSET_DELETE, 0, lambda: OffsetDeleteRequest(
        version=0, group_id="g", topics=None)),
    "create_topics_v0_topics": (ApiKey.CREATE_TOPICS, 0, lambda: CreateTopicsRequest(
        version=0, timeout_ms=1000, topics=None)),
    "create_topics_v5_configs": (ApiKey.CREATE_TOPICS, 5, lambda: CreateTopicsRequest(
        version=5, timeout_ms=1000, validate_only=True, topics=[
            CT_T(name="fuzz-null-configs", num_partitions=1, replication_factor=1, assignments=[], configs=None)])),
}


@pytest.mark.parametrize("case", sorted(NULL_WHERE_NOT_NULLABLE))
def test_null_in_a_non_nullable_field_closes_the_connection(env: Env, case: str) -> None:
    api, v, build = NULL_WHERE_NOT_NULLABLE[case]
    frame = header(api, v, 99) + bytes(build().encode(version=v))

    async def call() -> Any:
        return env.dispatcher.handle(frame, "127.0.0.1")

    try:
        result = env.loop.run_until_complete(call())
    except CloseConnection:
        return
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"SERVER BUG: {type(e).__name__}: {e} escaped Dispatcher.handle for {case} "
                    f"(a null in a non-nullable field must close the connection, as Kafka does); "
                    f"frame {frame!r}")
    pytest.fail(f"SERVER BUG: {case} was answered ({result!r:.80}) instead of closing the connection")


def test_offset_commit_retention_that_overflows_the_expire_timestamp(env: Env) -> None:
    """OffsetCommit v2-v4 with retention_time_ms = 2**63-1: now + retention does not fit the
    int64 expire_timestamp of the offset record; the server must answer (or refuse) the
    commit, not fail encoding the record (struct.error), and later commits must still work."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = OffsetCommitRequest(version=2, group_id="fuzz-retention", generation_id_or_member_epoch=-1,
                              member_id="", retention_time_ms=2**63 - 1, topics=[
                                  T(name=TOPIC, partitions=[P(partition_index=0, committed_offset=1,
                                                              committed_metadata="")])])
    frame = header(ApiKey.OFFSET_COMMIT, 2, 5) + bytes(req.encode(version=2))
    problems = []
    try:
        kind = env.check(frame)
        assert kind in ("ok", "error", "closed"), kind
    except AssertionError as e:
        problems.append(f"OffsetCommit v2 with retention_time_ms=2**63-1: {e}")
    seed = next(s for s in env.seeds if s.api == ApiKey.OFFSET_COMMIT and s.version == 2)
    if env.check(seed.frame) != "ok":
        problems.append("a normal commit after the overflowing one failed")
    # The failed commit must not stay pending: OffsetFetch require_stable would answer
    # UNSTABLE_OFFSET_COMMIT for the partition forever (and retention skips pending offsets).
    fetch = OffsetFetchRequest(version=7, group_id="fuzz-retention", require_stable=True,
                               topics=[OF_T(name=TOPIC, partition_indexes=[0])])
    fframe = header(ApiKey.OFFSET_FETCH, 7, 6) + bytes(fetch.encode(version=7))
    resp = env.loop.run_until_complete(_call(env, fframe))
    check_response(fframe, resp)
    body, _ = _generic_decoder(OffsetFetchResponse, 7)(memoryview(resp), 9)  # header v1: corr + tags
    codes = [(body.error_code, p.error_code) for t in body.topics for p in t.partitions]
    if codes != [(0, 0)]:
        problems.append(f"after it, OffsetFetch v7 require_stable answers (group, partition) error codes "
                        f"{codes} (88 = UNSTABLE_OFFSET_COMMIT: the failed commit is still pending)")
    assert not problems, "SERVER BUG: " + "\n".join(problems)


async def _call(env: Env, frame: bytes) -> Any:
    return env.dispatcher.handle(frame, "127.0.0.1")


def test_create_topics_huge_partition_count(tmp_path) -> None:
    """CreateTopics asking for 2**31-1 partitions must be refused with an error code, not
    attempted: the server creates each partition's log synchronously (~2 ms each here), so
    one such request blocks the event loop for weeks and fills the disk. (The logs' creation
    is stopped after 1,000 partitions to keep this test bounded.)"""
    e = start_env(tmp_path / "data")
    created = 0
    real_create = e.broker.logs.create

    class Runaway(Exception):
        pass

    def counting_create(*args: Any, **kw: Any) -> Any:
        nonlocal created
        created += 1
        if created > 1000:
            raise Runaway
        return real_create(*args, **kw)

    e.broker.logs.create = counting_create  # type: ignore[method-assign]
    req = CreateTopicsRequest(version=7, timeout_ms=5000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(name="fuzz-huge", num_partitions=2**31 - 1, replication_factor=1,
                                           assignments=[], configs=[])])
    frame = header(ApiKey.CREATE_TOPICS, 7, 3) + bytes(req.encode(version=7))
    try:
        try:
            kind = e.check(frame, guard=False)
        except AssertionError as err:
            if isinstance(err.__cause__, Runaway):
                pytest.fail("SERVER BUG: CreateTopics v7 num_partitions=2**31-1 started creating "
                            f"{created - 1} partition logs (and would go on for 2**31-1); frame {frame!r}")
            raise
        assert kind == "error", f"CreateTopics with 2**31-1 partitions answered {kind}"
    finally:
        stop_env(e)
