"""ACLs enforced API by API, as Kafka enforces them: a matrix of principals x (group, topic,
cluster) operations x (literal, prefixed, wildcard ALLOW; DENY over ALLOW; no ACL), asserting
each API's error code, and that a denied principal's requests change nothing. One in-process
server (SASL/PLAIN users on one listener), one authenticated connection per principal.

Principals and their ACLs (created by the super user through CreateAcls):
    alice    LITERAL:  group g-alice READ; topic t-alice READ+WRITE; topic t-alice-new CREATE;
                       group g-alice-admin DELETE
    bob      PREFIXED: group g-bob* ALL; topic t-bob* ALL
    carol    wildcard: group * READ, topic * READ; with DENY READ on group g-secret*, topic t-secret*
    User:*   topic t-public DESCRIBE
    alice    transactional id tx-alice WRITE; group g-bob-cg DESCRIBE (but none of its topics)
    bob      PREFIXED: transactional id tx-bob* ALL
    carol    CLUSTER_ACTION on the cluster (what a broker's AddPartitionsToTxn v4+ needs)
    mallory  none (allow.everyone.if.no.acl.found=false)
    admin    super.users
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeGroupsRequest,
    DescribeUserScramCredentialsRequest,
    ListGroupsRequest,
)
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
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
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TxnOffsetCommitRequest,
)
from wire import WireClient

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from kcoord.server.app import Server
from kcoord.server.config import Config
from kcoord.server.security.acl import AclOperation as Op
from kcoord.server.security.acl import AclPermissionType as Perm
from kcoord.server.security.acl import PatternType as Pat
from kcoord.server.security.acl import ResourceType as Res

USERS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw", "mallory": "mallory-pw"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
TOPICS = ["t-alice", "t-bob-1", "t-secret-1", "t-public", "t-other"]

ACLS = [  # (principal, resource type, name, pattern, operation, permission)
    ("User:alice", Res.GROUP, "g-alice", Pat.LITERAL, Op.READ, Perm.ALLOW),
    ("User:alice", Res.TOPIC, "t-alice", Pat.LITERAL, Op.READ, Perm.ALLOW),
    ("User:alice", Res.TOPIC, "t-alice", Pat.LITERAL, Op.WRITE, Perm.ALLOW),
    ("User:alice", Res.TOPIC, "t-alice-new", Pat.LITERAL, Op.CREATE, Perm.ALLOW),
    ("User:alice", Res.GROUP, "g-alice-admin", Pat.LITERAL, Op.DELETE, Perm.ALLOW),
    ("User:bob", Res.GROUP, "g-bob", Pat.PREFIXED, Op.ALL, Perm.ALLOW),
    ("User:bob", Res.TOPIC, "t-bob", Pat.PREFIXED, Op.ALL, Perm.ALLOW),
    ("User:carol", Res.GROUP, "*", Pat.LITERAL, Op.READ, Perm.ALLOW),
    ("User:carol", Res.GROUP, "g-secret", Pat.PREFIXED, Op.READ, Perm.DENY),
    ("User:carol", Res.TOPIC, "*", Pat.LITERAL, Op.READ, Perm.ALLOW),
    ("User:carol", Res.TOPIC, "t-secret", Pat.PREFIXED, Op.READ, Perm.DENY),
    ("User:*", Res.TOPIC, "t-public", Pat.LITERAL, Op.DESCRIBE, Perm.ALLOW),
    ("User:alice", Res.TRANSACTIONAL_ID, "tx-alice", Pat.LITERAL, Op.WRITE, Perm.ALLOW),
    ("User:bob", Res.TRANSACTIONAL_ID, "tx-bob", Pat.PREFIXED, Op.ALL, Perm.ALLOW),
    ("User:alice", Res.GROUP, "g-bob-cg", Pat.LITERAL, Op.DESCRIBE, Perm.ALLOW),
    ("User:carol", Res.CLUSTER, "kafka-cluster", Pat.LITERAL, Op.CLUSTER_ACTION, Perm.ALLOW),
]


def creation(principal, rtype, name, pattern, op, perm) -> CreateAclsRequest.AclCreation:
    return CreateAclsRequest.AclCreation(resource_type=int(rtype), resource_name=name,
                                         resource_pattern_type=int(pattern), principal=principal, host="*",
                                         operation=int(op), permission_type=int(perm))


def batch(producer: tuple[int, int] | None = None) -> bytes:
    pid, epoch = producer or (-1, -1)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=int(producer is not None),
                                  producer_id=pid, producer_epoch=epoch, base_sequence=-1 if producer is None else 0,
                                  batch_size=2**31 - 1)
    b.append(0, 1_700_000_000_000, b"k", b"v", [])
    return bytes(b.build())


# ---- one request of each API, returning the error code(s) that matter ----

OC_T, OC_P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
OF_G = OffsetFetchRequest.OffsetFetchRequestGroup


class Calls:
    def __init__(self, c: WireClient) -> None:
        self.c = c

    def find_coordinator(self, group: str) -> int:
        return self.c.call(FindCoordinatorRequest(version=3, key=group, key_type=0), 3).error_code

    def join(self, group: str) -> int:
        return self.c.call(JoinGroupRequest(
            version=5, group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            group_instance_id=None, protocol_type="consumer",
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]), 5).error_code

    def heartbeat(self, group: str) -> int:
        return self.c.call(HeartbeatRequest(version=4, group_id=group, generation_id=1, member_id="m",
                                            group_instance_id=None), 4).error_code

    def sync(self, group: str) -> int:
        return self.c.call(SyncGroupRequest(version=5, group_id=group, generation_id=1, member_id="m",
                                            group_instance_id=None, protocol_type="consumer", protocol_name="range",
                                            assignments=[]), 5).error_code

    def leave(self, group: str) -> int:
        return self.c.call(LeaveGroupRequest(version=5, group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None, reason=None)]), 5).error_code

    def commit(self, group: str, topic: str, offset: int = 1) -> list[int]:
        r = self.c.call(OffsetCommitRequest(
            version=8, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[OC_T(name=topic, partitions=[OC_P(partition_index=0, committed_offset=offset,
                                                      committed_leader_epoch=-1, committed_metadata="")])]), 8)
        return [p.error_code for t in r.topics for p in t.partitions]

    def fetch_offsets(self, group: str, topic: str | None) -> tuple[int, dict[str, list[tuple[int, int]]]]:
        topics = None if topic is None else [OF_G.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])]
        r = self.c.call(OffsetFetchRequest(version=8, require_stable=False, groups=[OF_G(group_id=group,
                                                                                          topics=topics)]), 8)
        g = r.groups[0]
        return g.error_code, {t.name: [(p.error_code, p.committed_offset) for p in t.partitions] for t in g.topics}

    def describe_group(self, group: str) -> tuple[int, str]:
        r = self.c.call(DescribeGroupsRequest(version=5, groups=[group], include_authorized_operations=True), 5)
        return r.groups[0].error_code, r.groups[0].group_state

    def delete_group(self, group: str) -> int:
        return self.c.call(DeleteGroupsRequest(version=2, groups_names=[group]), 2).results[0].error_code

    def offset_delete(self, group: str, topic: str) -> tuple[int, list[int]]:
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        r = self.c.call(OffsetDeleteRequest(version=0, group_id=group, topics=[
            T(name=topic, partitions=[T.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
        return r.error_code, [p.error_code for t in r.topics for p in t.partitions]

    def list_groups(self) -> set[str]:
        r = self.c.call(ListGroupsRequest(version=4, states_filter=[]), 4)
        return {g.group_id for g in r.groups}

    def metadata(self, topics: list[str] | None, auto_create: bool = False) -> dict[str, int]:
        wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        r = self.c.call(MetadataRequest(version=12, topics=wanted, allow_auto_topic_creation=auto_create,
                                        include_topic_authorized_operations=False), 12)
        return {t.name: t.error_code for t in r.topics}

    def produce(self, topic: str, txn: tuple[str, int, int] | None = None) -> int:
        T = ProduceRequest.TopicProduceData
        records = batch() if txn is None else batch(txn[1:])
        r = self.c.call(ProduceRequest(version=9, transactional_id=None if txn is None else txn[0], acks=1,
                                       timeout_ms=5000, topic_data=[
                                           T(name=topic, partition_data=[T.PartitionProduceData(index=0,
                                                                                                records=records)])]), 9)
        return r.responses[0].partition_responses[0].error_code

    def fetch(self, topic: str) -> int:
        T = FetchRequest.FetchTopic
        r = self.c.call(FetchRequest(version=12, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                     isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                         T(topic=topic, partitions=[T.FetchPartition(
                                             partition=0, current_leader_epoch=-1, fetch_offset=0,
                                             last_fetched_epoch=-1, log_start_offset=-1,
                                             partition_max_bytes=1 << 20)])],
                                     forgotten_topics_data=[], rack_id=""), 12)
        return r.responses[0].partitions[0].error_code

    def topic_id(self, topic: str) -> uuid.UUID:
        r = self.c.call(MetadataRequest(version=12, topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                        allow_auto_topic_creation=False, include_topic_authorized_operations=False), 12)
        return r.topics[0].topic_id

    def fetch16(self, topic_id: uuid.UUID) -> int:
        return self.fetch16_partition(topic_id).error_code

    def fetch16_partition(self, topic_id: uuid.UUID) -> Any:
        """Fetch v16 by topic id, without the (tagged) replica state, as consumers send it."""
        T = FetchRequest.FetchTopic
        r = self.c.call(FetchRequest(version=16, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                                     session_id=0, session_epoch=-1, topics=[T(topic_id=topic_id, partitions=[
                                         T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                          last_fetched_epoch=-1, log_start_offset=-1,
                                                          partition_max_bytes=1 << 20)])],
                                     forgotten_topics_data=[], rack_id=""), 16)
        return r.responses[0].partitions[0]

    def list_offsets(self, topic: str) -> tuple[int, int]:
        T = ListOffsetsRequest.ListOffsetsTopic
        r = self.c.call(ListOffsetsRequest(version=7, replica_id=-1, isolation_level=0, topics=[
            T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                             timestamp=-1)])]), 7)
        p = r.topics[0].partitions[0]
        return p.error_code, p.offset

    def create_topic(self, topic: str) -> int:
        T = CreateTopicsRequest.CreatableTopic
        r = self.c.call(CreateTopicsRequest(version=7, timeout_ms=5000, validate_only=False, topics=[
            T(name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])]), 7)
        return r.topics[0].error_code

    def delete_topic(self, topic: str) -> int:
        return self.c.call(DeleteTopicsRequest(version=5, timeout_ms=5000, topic_names=[topic]), 5).responses[0].error_code

    def init_producer_id(self) -> int:
        return self.c.call(InitProducerIdRequest(version=4, transactional_id=None, transaction_timeout_ms=60000,
                                                 producer_id=-1, producer_epoch=-1), 4).error_code

    def create_acl(self, *spec) -> int:
        return self.c.call(CreateAclsRequest(version=3, creations=[creation(*spec)]), 3).results[0].error_code

    def describe_acls(self) -> tuple[int, int]:
        r = self.c.call(DescribeAclsRequest(version=3, resource_type_filter=1, resource_name_filter=None,
                                            pattern_type_filter=1, principal_filter=None, host_filter=None,
                                            operation=1, permission_type=1), 3)
        return r.error_code, sum(len(x.acls) for x in r.resources)

    def delete_acls(self, principal: str) -> int:
        F = DeleteAclsRequest.DeleteAclsFilter
        r = self.c.call(DeleteAclsRequest(version=3, filters=[F(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=principal,
            host_filter=None, operation=1, permission_type=1)]), 3)
        return r.filter_results[0].error_code

    def alter_scram(self, user: str) -> int:
        U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
        r = self.c.call(AlterUserScramCredentialsRequest(deletions=[], upsertions=[
            U(name=user, mechanism=1, iterations=4096, salt=b"salt", salted_password=b"x" * 32)]), 0)
        return r.results[0].error_code

    def describe_scram(self) -> int:
        return self.c.call(DescribeUserScramCredentialsRequest(users=None), 0).error_code

    def alter_quota(self, client_id: str) -> int:
        E = AlterClientQuotasRequest.EntryData
        r = self.c.call(AlterClientQuotasRequest(validate_only=False, entries=[E(
            entity=[E.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[E.OpData(key="producer_byte_rate", value=1e9, remove=False)])]), 1)
        return r.entries[0].error_code

    def describe_quotas(self) -> int:
        return self.c.call(DescribeClientQuotasRequest(components=[], strict=False), 1).error_code

    # -- transactions --

    def find_txn_coordinator(self, tid: str) -> int:
        return self.c.call(FindCoordinatorRequest(version=3, key=tid, key_type=1), 3).error_code

    def init_txn(self, tid: str, version: int = 4) -> tuple[int, int, int]:
        r = self.c.call(InitProducerIdRequest(version=version, transactional_id=tid, transaction_timeout_ms=60000,
                                              producer_id=-1, producer_epoch=-1), version)
        return r.error_code, r.producer_id, r.producer_epoch

    def add_partitions(self, txn: tuple[str, int, int], topics: list[str], version: int = 3) -> dict:
        tid, pid, epoch = txn
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        if version >= 4:
            X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
            r = self.c.call(AddPartitionsToTxnRequest(version=version, transactions=[X(
                transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=True,
                topics=[X.AddPartitionsToTxnTopic(name=t, partitions=[0]) for t in topics])]), version)
            return {"": r.error_code}
        r = self.c.call(AddPartitionsToTxnRequest(version=3, v3_and_below_transactional_id=tid,
                                                  v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
                                                  v3_and_below_topics=[T(name=t, partitions=[0]) for t in topics]), 3)
        return {t.name: t.results_by_partition[0].partition_error_code for t in r.results_by_topic_v3_and_below}

    def add_offsets(self, txn: tuple[str, int, int], group: str) -> int:
        tid, pid, epoch = txn
        return self.c.call(AddOffsetsToTxnRequest(version=3, transactional_id=tid, producer_id=pid,
                                                  producer_epoch=epoch, group_id=group), 3).error_code

    def txn_commit(self, txn: tuple[str, int, int], group: str, topics: list[str]) -> dict:
        tid, pid, epoch = txn
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        P = T.TxnOffsetCommitRequestPartition
        r = self.c.call(TxnOffsetCommitRequest(
            version=3, transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[T(name=t, partitions=[P(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                            committed_metadata="")]) for t in topics]), 3)
        return {t.name: t.partitions[0].error_code for t in r.topics}

    # -- transactions v2 (KIP-890 part 2): Produce v12 adds its partitions, no AddPartitionsToTxn
    # or AddOffsetsToTxn; the brokers' AddPartitionsToTxn v5 verifies

    def produce_v12(self, txn: tuple[str, int, int], topics: list[str]) -> dict[str, int]:
        T = ProduceRequest.TopicProduceData
        r = self.c.call(ProduceRequest(version=12, transactional_id=txn[0], acks=-1, timeout_ms=5000, topic_data=[
            T(name=t, partition_data=[T.PartitionProduceData(index=0, records=batch(txn[1:]))]) for t in topics]), 12)
        return {t.name: t.partition_responses[0].error_code for t in r.responses}

    def verify_v5(self, txn: tuple[str, int, int], topics: list[str]) -> tuple[int, dict[str, int]]:
        X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        r = self.c.call(AddPartitionsToTxnRequest(version=5, transactions=[X(
            transactional_id=txn[0], producer_id=txn[1], producer_epoch=txn[2], verify_only=True,
            topics=[X.AddPartitionsToTxnTopic(name=t, partitions=[0]) for t in topics])]), 5)
        return r.error_code, {t.name: t.results_by_partition[0].partition_error_code
                              for x in r.results_by_transaction for t in x.topic_results}

    def txn_commit_v5(self, txn: tuple[str, int, int], group: str, topics: list[str]) -> dict[str, int]:
        tid, pid, epoch = txn
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        P = T.TxnOffsetCommitRequestPartition
        r = self.c.call(TxnOffsetCommitRequest(
            version=5, transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None,
            topics=[T(name=t, partitions=[P(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                            committed_metadata="")]) for t in topics]), 5)
        return {t.name: t.partitions[0].error_code for t in r.topics}

    def end_txn_v5(self, txn: tuple[str, int, int], commit: bool) -> tuple[int, int, int]:
        tid, pid, epoch = txn
        r = self.c.call(EndTxnRequest(version=5, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                      committed=commit), 5)
        return r.error_code, r.producer_id, r.producer_epoch

    def end_txn(self, txn: tuple[str, int, int], commit: bool) -> int:
        tid, pid, epoch = txn
        return self.c.call(EndTxnRequest(version=3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                         committed=commit), 3).error_code

    def describe_txns(self, tids: list[str]) -> dict:
        r = self.c.call(DescribeTransactionsRequest(version=0, transactional_ids=tids), 0)
        return {s.transactional_id: (s.error_code, s.transaction_state, {t.topic for t in s.topics})
                for s in r.transaction_states}

    def list_txns(self) -> set[str]:
        r = self.c.call(ListTransactionsRequest(version=1, state_filters=[], producer_id_filters=[],
                                                duration_filter=-1), 1)
        return {s.transactional_id for s in r.transaction_states}

    def describe_producers(self, topic: str) -> int:
        T = DescribeProducersRequest.TopicRequest
        r = self.c.call(DescribeProducersRequest(version=0, topics=[T(name=topic, partition_indexes=[0])]), 0)
        return r.topics[0].partitions[0].error_code

    # -- the consumer group protocol (KIP-848) --

    def consumer_heartbeat(self, group: str, topics: list[str]) -> int:
        return self.c.call(ConsumerGroupHeartbeatRequest(
            version=0, group_id=group, member_id=uuid.uuid4().hex[:22], member_epoch=0, instance_id=None,
            rack_id=None, rebalance_timeout_ms=30000, subscribed_topic_names=topics, server_assignor=None,
            topic_partitions=[]), 0).error_code

    def share_heartbeat(self, group: str, topics: list[str]) -> int:
        from kcoord.protocol.share_messages import ShareGroupHeartbeatRequest

        return self.c.call(ShareGroupHeartbeatRequest(
            version=1, group_id=group, member_id=uuid.uuid4().hex[:22], member_epoch=0, rack_id=None,
            subscribed_topic_names=topics), 1).error_code

    def share_describe(self, group: str) -> tuple[int, int]:
        from kcoord.protocol.share_messages import ShareGroupDescribeRequest

        r = self.c.call(ShareGroupDescribeRequest(version=1, group_ids=[group], include_authorized_operations=True), 1)
        return r.groups[0].error_code, r.groups[0].authorized_operations

    def consumer_describe(self, group: str) -> tuple[int, int]:
        r = self.c.call(ConsumerGroupDescribeRequest(version=0, group_ids=[group], include_authorized_operations=True),
                        0)
        return r.groups[0].error_code, r.groups[0].authorized_operations


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """Every check runs once against one server; the tests below assert on the collected results."""
    data = tmp_path_factory.mktemp("acls") / "data"
    results: dict = {}

    async def run() -> None:
        srv = Server(Config({
            "log.dirs": str(data), "offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0,
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin", "auto.create.topics.enable": "true",
        }))
        await srv.start()
        try:
            await asyncio.wait_for(srv.broker._background[0], 30)  # __consumer_offsets loaded
            results.update(await asyncio.to_thread(_checks, f"127.0.0.1:{srv.listener('SASL_PLAINTEXT').bound_port}"))
        finally:
            await srv.stop()

    asyncio.run(run())
    return results


def _checks(bootstrap: str) -> dict:
    conns = {}
    for user, pw in USERS.items():
        c = WireClient(bootstrap, client_id=f"acl-{user}")
        c.authenticate("PLAIN", user, pw)
        conns[user] = Calls(c)
    admin = conns["admin"]
    out: dict = {"setup": [admin.create_topic(t) for t in TOPICS]}
    out["acls_created"] = [admin.create_acl(*a) for a in ACLS]
    out["admin_produce"] = admin.produce("t-alice")
    out["bob_commit_existing"] = conns["bob"].commit("g-bob-x", "t-bob-1")  # a group that exists
    out["alice_commit_existing"] = conns["alice"].commit("g-alice-admin", "t-alice", 1)  # (denied: no READ)
    out["admin_commit_existing"] = admin.commit("g-alice-admin", "t-alice", 1)

    group_apis = {
        "find_coordinator": lambda c, g: c.find_coordinator(g),
        "join": lambda c, g: c.join(g),
        "heartbeat": lambda c, g: c.heartbeat(g),
        "sync": lambda c, g: c.sync(g),
        "leave": lambda c, g: c.leave(g),
        "describe_group": lambda c, g: c.describe_group(g)[0],
    }
    cases = [("alice", "g-alice"), ("alice", "g-bob-1"), ("bob", "g-bob-1"), ("carol", "g-anything"),
             ("carol", "g-secret-1"), ("mallory", "g-alice"), ("admin", "g-admin")]
    out["groups"] = {(u, g, api): fn(conns[u], g) for u, g in cases for api, fn in group_apis.items()}
    out["commit"] = {(u, g, t): conns[u].commit(g, t, 7) for u, g, t in [
        ("alice", "g-alice", "t-alice"), ("alice", "g-alice", "t-bob-1"), ("alice", "g-bob-1", "t-alice"),
        ("bob", "g-bob-2", "t-bob-1"), ("carol", "g-carol", "t-other"), ("carol", "g-carol", "t-secret-1"),
        ("carol", "g-secret-2", "t-other"), ("mallory", "g-mallory", "t-alice")]}
    out["fetch_offsets"] = {(u, g, t): conns[u].fetch_offsets(g, t) for u, g, t in [
        ("alice", "g-alice", "t-alice"), ("alice", "g-alice", "t-bob-1"), ("alice", "g-alice", None),
        ("alice", "g-bob-2", "t-bob-1"), ("carol", "g-secret-2", "t-other"), ("mallory", "g-alice", "t-alice")]}
    out["offset_delete"] = {(u, g, t): conns[u].offset_delete(g, t) for u, g, t in [
        ("alice", "g-alice-admin", "t-bob-1"), ("mallory", "g-alice-admin", "t-alice"),
        ("alice", "g-alice", "t-alice")]}
    out["list_groups"] = {u: conns[u].list_groups() for u in USERS}
    out["delete_group"] = {(u, g): conns[u].delete_group(g) for u, g in [
        ("alice", "g-bob-x"), ("mallory", "g-bob-x"), ("carol", "g-bob-x")]}
    out["after_denied_deletes"] = admin.describe_group("g-bob-x")

    out["metadata_all"] = {u: set(conns[u].metadata(None)) for u in USERS}
    out["metadata_named"] = {u: conns[u].metadata(["t-alice", "t-bob-1", "t-public", "t-nonexistent"]) for u in USERS}
    out["metadata_autocreate"] = {u: conns[u].metadata([f"t-auto-{u}"], auto_create=True) for u in ("alice", "bob")}
    out["produce"] = {(u, t): conns[u].produce(t) for u, t in [
        ("alice", "t-alice"), ("alice", "t-other"), ("bob", "t-bob-1"), ("carol", "t-other"), ("mallory", "t-alice")]}
    out["fetch"] = {(u, t): conns[u].fetch(t) for u, t in [
        ("alice", "t-alice"), ("alice", "t-other"), ("carol", "t-other"), ("carol", "t-secret-1"),
        ("mallory", "t-public")]}
    ids = {t: admin.topic_id(t) for t in ("t-alice", "t-other")}
    out["fetch16"] = {(u, t): conns[u].fetch16(ids[t]) for u, t in [
        ("alice", "t-alice"), ("alice", "t-other"), ("carol", "t-other")]}
    denied = conns["alice"].fetch16_partition(ids["t-other"])
    out["fetch16_denied"] = (denied.error_code, denied.high_watermark, denied.records)
    out["list_offsets"] = {(u, t): conns[u].list_offsets(t)[0] for u, t in [
        ("alice", "t-alice"), ("mallory", "t-public"), ("mallory", "t-alice"), ("carol", "t-secret-1")]}
    out["create_topic"] = {(u, t): conns[u].create_topic(t) for u, t in [
        ("alice", "t-alice-new"), ("alice", "t-alice-other"), ("bob", "t-bob-new"), ("mallory", "t-mallory")]}
    out["delete_topic"] = {(u, t): conns[u].delete_topic(t) for u, t in [
        ("alice", "t-alice"), ("mallory", "t-other"), ("bob", "t-bob-new")]}
    out["init_producer_id"] = {u: conns[u].init_producer_id() for u in USERS}
    n_before = admin.describe_acls()[1]
    out["acl_apis"] = {u: (conns[u].create_acl("User:" + u, Res.CLUSTER, "kafka-cluster", Pat.LITERAL, Op.ALL,
                                               Perm.ALLOW),
                           conns[u].describe_acls()[0], conns[u].delete_acls("User:alice")) for u in USERS
                       if u != "admin"}
    out["acl_count"] = (n_before, admin.describe_acls()[1])
    out["scram_apis"] = {u: (conns[u].alter_scram(f"made-by-{u}"), conns[u].describe_scram()) for u in USERS}
    # ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster; once the admin's quota exists, every
    # request after it takes the quota path behind the authorizer
    out["quota_apis"] = {u: (conns[u].alter_quota(f"made-by-{u}"), conns[u].describe_quotas()) for u in USERS}

    _txn_checks(conns, out)
    _consumer_protocol_checks(conns, out)
    _txn_v2_checks(conns, out)

    # what the denied requests would have changed, seen by the super user
    out["after"] = {
        "commit_mallory": admin.fetch_offsets("g-mallory", "t-alice"),
        "commit_alice_to_bob_group": admin.fetch_offsets("g-bob-1", "t-alice"),
        "produce_mallory": admin.list_offsets("t-alice"),
        "topics": set(admin.metadata(None)),
        "join_mallory": admin.describe_group("g-alice"),
        "offsets_alice_admin": admin.fetch_offsets("g-alice-admin", "t-alice"),
    }
    for c in conns.values():
        c.c.close()
    return out


def _retrying(call, retriable=(E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
                                E.NOT_COORDINATOR, E.CONCURRENT_TRANSACTIONS)):
    """The transaction coordinator's first answers while __transaction_state is being made."""
    deadline = time.monotonic() + 30
    while True:
        got = call()
        code = got[0] if isinstance(got, tuple) else got
        if code not in retriable or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def _txn_checks(conns: dict, out: dict) -> None:
    alice, bob, mallory, admin = conns["alice"], conns["bob"], conns["mallory"], conns["admin"]
    out["txn_find"] = {(u, t): _retrying(lambda u=u, t=t: conns[u].find_txn_coordinator(t)) for u, t in [
        ("alice", "tx-alice"), ("bob", "tx-bob-1"), ("mallory", "tx-alice"), ("carol", "tx-bob-1")]}
    code, pid, epoch = _retrying(lambda: alice.init_txn("tx-alice"))
    out["txn_init"] = {"alice": code, "bob": _retrying(lambda: bob.init_txn("tx-bob-1"))[0],
                       "mallory": mallory.init_txn("tx-alice")[0], "bob-on-alice's": bob.init_txn("tx-alice")[0]}
    txn = ("tx-alice", pid, epoch)
    out["txn_add_partitions"] = {
        "alice-denied-topic": alice.add_partitions(txn, ["t-alice", "t-other"]),
        "mallory": mallory.add_partitions(txn, ["t-alice"]),
        "alice-v4": alice.add_partitions(txn, ["t-alice"], version=4),  # brokers only: CLUSTER_ACTION
        "alice": alice.add_partitions(txn, ["t-alice"]),
    }
    out["txn_produce"] = {"mallory": mallory.produce("t-alice", txn), "alice": alice.produce("t-alice", txn)}
    out["txn_add_offsets"] = {"alice-other-group": alice.add_offsets(txn, "g-bob-1"),
                              "mallory": mallory.add_offsets(txn, "g-alice"),
                              "alice": alice.add_offsets(txn, "g-alice")}
    out["txn_offset_commit"] = {"alice": alice.txn_commit(txn, "g-alice", ["t-alice", "t-bob-1"]),
                                "alice-other-group": alice.txn_commit(txn, "g-bob-1", ["t-alice"]),
                                "mallory": mallory.txn_commit(txn, "g-alice", ["t-alice"])}
    out["txn_describe"] = {u: conns[u].describe_txns(["tx-alice", "tx-bob-1"]) for u in ("alice", "admin")}
    out["txn_list"] = {u: conns[u].list_txns() for u in ("alice", "bob", "mallory", "admin")}
    out["txn_end"] = {"mallory": mallory.end_txn(txn, False)}
    out["txn_after_denied_end"] = admin.describe_txns(["tx-alice"])["tx-alice"][1]
    out["txn_end"]["alice"] = _retrying(lambda: alice.end_txn(txn, False))
    out["describe_producers"] = {(u, t): conns[u].describe_producers(t) for u, t in [
        ("alice", "t-alice"), ("alice", "t-other"), ("mallory", "t-alice"), ("admin", "t-other")]}


def _txn_v2_checks(conns: dict, out: dict) -> None:
    """bob's transaction tx-bob-v2 on transactions v2; the others try to use it."""
    alice, bob, carol, mallory, admin = (conns[u] for u in ("alice", "bob", "carol", "mallory", "admin"))
    tid = "tx-bob-v2"
    _retrying(lambda: bob.find_txn_coordinator(tid))
    code, pid, epoch = _retrying(lambda: bob.init_txn(tid, 5))
    out["v2_init"] = {"bob": code, "mallory": mallory.init_txn(tid, 5)[0], "alice": alice.init_txn(tid, 5)[0]}
    txn = (tid, pid, epoch)
    out["v2_producer"] = (pid, epoch)
    out["v2_produce"] = {"mallory": mallory.produce_v12(txn, ["t-bob-1"]),
                         "alice": alice.produce_v12(txn, ["t-alice"]),  # WRITE on the topic, not on the id
                         "bob": bob.produce_v12(txn, ["t-bob-1", "t-alice"])}  # WRITE on t-bob* only
    out["v2_partitions"] = admin.describe_txns([tid])[tid]
    # the brokers' verification: CLUSTER_ACTION (carol, who may not even describe tx-bob-v2), not
    # WRITE on the transactional id (bob)
    out["v2_verify"] = {"carol": carol.verify_v5(txn, ["t-bob-1", "t-alice"]), "bob": bob.verify_v5(txn, ["t-bob-1"])}
    out["v2_offset_commit"] = {"mallory": mallory.txn_commit_v5(txn, "g-bob-v2", ["t-bob-1"]),
                               "bob-alice's-group": bob.txn_commit_v5(txn, "g-alice", ["t-bob-1"]),
                               "bob": bob.txn_commit_v5(txn, "g-bob-v2", ["t-bob-1", "t-alice"])}
    out["v2_end"] = {"mallory": mallory.end_txn_v5(txn, True), "alice": alice.end_txn_v5(txn, True)}
    out["v2_after_denied_end"] = admin.describe_txns([tid])[tid][1]
    out["v2_end"]["bob"] = _retrying(lambda: bob.end_txn_v5(txn, True))
    # EndTxn is answered once PrepareCommit is durable (as Kafka); the offsets count once the
    # transaction completes: wait for that, the commit's markers are written right after.
    deadline = time.monotonic() + 60
    while admin.describe_txns([tid])[tid][1] != "CompleteCommit" and time.monotonic() < deadline:
        time.sleep(0.05)
    out["v2_committed"] = admin.fetch_offsets("g-bob-v2", None)


def _consumer_protocol_checks(conns: dict, out: dict) -> None:
    out["cg_heartbeat"] = {(u, g, tuple(ts)): conns[u].consumer_heartbeat(g, ts) for u, g, ts in [
        ("bob", "g-bob-cg", ["t-bob-1"]), ("bob", "g-bob-cg2", ["t-bob-1", "t-alice"]),
        ("alice", "g-bob-cg", ["t-bob-1"]), ("mallory", "g-bob-cg", ["t-public"])]}
    out["cg_describe"] = {u: conns[u].consumer_describe("g-bob-cg") for u in USERS}
    out["cg_after"] = conns["admin"].consumer_describe("g-bob-cg2")[0]
    # share groups (KIP-932): the same rules, READ to heartbeat, DESCRIBE to describe
    out["sg_heartbeat"] = {(u, g, tuple(ts)): conns[u].share_heartbeat(g, ts) for u, g, ts in [
        ("bob", "g-bob-sg", ["t-bob-1"]), ("bob", "g-bob-sg2", ["t-bob-1", "t-alice"]),
        ("alice", "g-bob-sg", ["t-bob-1"]), ("mallory", "g-bob-sg", ["t-public"])]}
    out["sg_describe"] = {u: conns[u].share_describe("g-bob-sg") for u in USERS}
    out["sg_after"] = conns["admin"].share_describe("g-bob-sg2")[0]


def test_setup(matrix):
    assert matrix["setup"] == [0] * len(TOPICS)
    assert matrix["acls_created"] == [0] * len(ACLS)
    assert matrix["admin_produce"] == 0
    assert matrix["bob_commit_existing"] == [0]
    assert matrix["alice_commit_existing"] == [E.GROUP_AUTHORIZATION_FAILED]  # DELETE does not give READ
    assert matrix["admin_commit_existing"] == [0]


OK_JOIN, OK_MEMBER = E.MEMBER_ID_REQUIRED, E.UNKNOWN_MEMBER_ID  # authorized: the coordinator's own answer
GROUP_OK = {"find_coordinator": 0, "join": OK_JOIN, "heartbeat": OK_MEMBER, "sync": OK_MEMBER,
            "leave": 0, "describe_group": 0}  # LeaveGroup v5: the member's error is per member
GROUP_DENIED = {api: E.GROUP_AUTHORIZATION_FAILED for api in GROUP_OK}


@pytest.mark.parametrize("user, group, expected", [
    ("alice", "g-alice", GROUP_OK),  # LITERAL ALLOW READ (DESCRIBE implied)
    ("alice", "g-bob-1", GROUP_DENIED),  # no ACL for alice
    ("bob", "g-bob-1", GROUP_OK),  # PREFIXED ALLOW ALL
    ("carol", "g-anything", GROUP_OK),  # wildcard ALLOW READ
    # DENY READ beats the wildcard ALLOW; DESCRIBE (implied by the ALLOW READ) is not denied
    ("carol", "g-secret-1", {**GROUP_DENIED, "find_coordinator": 0, "describe_group": 0}),
    ("mallory", "g-alice", GROUP_DENIED),  # no ACL at all
    ("admin", "g-admin", GROUP_OK),  # super user
])
def test_group_apis(matrix, user, group, expected):
    got = {api: matrix["groups"][(user, group, api)] for api in expected}
    assert got == expected


def test_offset_commit_and_fetch(matrix):
    c = matrix["commit"]
    assert c[("alice", "g-alice", "t-alice")] == [0]
    assert c[("alice", "g-alice", "t-bob-1")] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert c[("alice", "g-bob-1", "t-alice")] == [E.GROUP_AUTHORIZATION_FAILED]
    assert c[("bob", "g-bob-2", "t-bob-1")] == [0]
    assert c[("carol", "g-carol", "t-other")] == [0]
    assert c[("carol", "g-carol", "t-secret-1")] == [E.TOPIC_AUTHORIZATION_FAILED]
    assert c[("carol", "g-secret-2", "t-other")] == [E.GROUP_AUTHORIZATION_FAILED]
    assert c[("mallory", "g-mallory", "t-alice")] == [E.GROUP_AUTHORIZATION_FAILED]
    f = matrix["fetch_offsets"]
    assert f[("alice", "g-alice", "t-alice")] == (0, {"t-alice": [(0, 7)]})
    assert f[("alice", "g-alice", "t-bob-1")] == (0, {"t-bob-1": [(E.TOPIC_AUTHORIZATION_FAILED, -1)]})
    assert f[("alice", "g-alice", None)] == (0, {"t-alice": [(0, 7)]})
    assert f[("alice", "g-bob-2", "t-bob-1")] == (E.GROUP_AUTHORIZATION_FAILED, {})
    assert f[("carol", "g-secret-2", "t-other")] == (0, {"t-other": [(0, -1)]})  # DESCRIBE is not denied
    assert f[("mallory", "g-alice", "t-alice")] == (E.GROUP_AUTHORIZATION_FAILED, {})


def test_group_admin_apis(matrix):
    d = matrix["offset_delete"]
    assert d[("alice", "g-alice-admin", "t-bob-1")] == (0, [E.TOPIC_AUTHORIZATION_FAILED])
    assert d[("mallory", "g-alice-admin", "t-alice")] == (E.GROUP_AUTHORIZATION_FAILED, [])
    assert d[("alice", "g-alice", "t-alice")] == (E.GROUP_AUTHORIZATION_FAILED, [])  # READ is not DELETE
    lg = matrix["list_groups"]
    assert lg["mallory"] == set()
    assert lg["alice"] >= {"g-alice", "g-alice-admin"} and not any(g.startswith("g-bob") for g in lg["alice"])
    assert {"g-bob-x", "g-bob-2"} <= lg["bob"] and all(g.startswith("g-bob") for g in lg["bob"])
    assert "g-secret-2" not in lg["admin"]  # carol's denied commit made no group
    assert lg["admin"] >= lg["alice"] | lg["bob"]
    assert matrix["delete_group"] == {("alice", "g-bob-x"): E.GROUP_AUTHORIZATION_FAILED,
                                      ("mallory", "g-bob-x"): E.GROUP_AUTHORIZATION_FAILED,
                                      ("carol", "g-bob-x"): E.GROUP_AUTHORIZATION_FAILED}
    assert matrix["after_denied_deletes"] == (0, "Empty")  # still there


def test_metadata_shows_only_what_may_be_described(matrix):
    everything = set(TOPICS) | {"__consumer_offsets"}
    all_ = matrix["metadata_all"]
    assert all_["admin"] >= everything
    assert all_["alice"] == {"t-alice", "t-public"}
    assert all_["bob"] == {"t-bob-1", "t-public"} | ({"t-bob-new"} & all_["admin"])
    assert all_["carol"] >= {"t-alice", "t-other", "t-public"}  # READ * implies DESCRIBE
    assert all_["mallory"] == {"t-public"}
    named = matrix["metadata_named"]
    # a topic the principal may not describe is TOPIC_AUTHORIZATION_FAILED whether it exists or not
    assert named["alice"] == {"t-alice": 0, "t-bob-1": E.TOPIC_AUTHORIZATION_FAILED, "t-public": 0,
                              "t-nonexistent": E.TOPIC_AUTHORIZATION_FAILED}
    assert named["mallory"] == {"t-alice": E.TOPIC_AUTHORIZATION_FAILED, "t-bob-1": E.TOPIC_AUTHORIZATION_FAILED,
                                "t-public": 0, "t-nonexistent": E.TOPIC_AUTHORIZATION_FAILED}
    assert named["admin"]["t-nonexistent"] == E.UNKNOWN_TOPIC_OR_PARTITION
    auto = matrix["metadata_autocreate"]
    assert auto["alice"] == {"t-auto-alice": E.TOPIC_AUTHORIZATION_FAILED}  # no DESCRIBE
    assert auto["bob"] == {"t-auto-bob": E.TOPIC_AUTHORIZATION_FAILED}  # DESCRIBE (t-bob*) but no CREATE here


def test_data_apis(matrix):
    assert matrix["produce"] == {("alice", "t-alice"): 0, ("alice", "t-other"): E.TOPIC_AUTHORIZATION_FAILED,
                                 ("bob", "t-bob-1"): 0, ("carol", "t-other"): E.TOPIC_AUTHORIZATION_FAILED,
                                 ("mallory", "t-alice"): E.TOPIC_AUTHORIZATION_FAILED}
    assert matrix["fetch"] == {("alice", "t-alice"): 0, ("alice", "t-other"): E.TOPIC_AUTHORIZATION_FAILED,
                               ("carol", "t-other"): 0, ("carol", "t-secret-1"): E.TOPIC_AUTHORIZATION_FAILED,
                               ("mallory", "t-public"): E.TOPIC_AUTHORIZATION_FAILED}  # DESCRIBE is not READ
    assert matrix["fetch16"] == {("alice", "t-alice"): 0, ("alice", "t-other"): E.TOPIC_AUTHORIZATION_FAILED,
                                 ("carol", "t-other"): 0}
    # A refused partition carries empty records, not null (Kafka's FetchResponse.partitionResponse
    # goes out as MemoryRecords.EMPTY; librdkafka fails the whole response on a null record set).
    assert matrix["fetch16_denied"] == (E.TOPIC_AUTHORIZATION_FAILED, -1, b"")
    assert matrix["list_offsets"] == {("alice", "t-alice"): 0, ("mallory", "t-public"): 0,
                                      ("mallory", "t-alice"): E.TOPIC_AUTHORIZATION_FAILED,
                                      ("carol", "t-secret-1"): 0}  # DESCRIBE survives a DENY READ


def test_topic_admin_apis(matrix):
    assert matrix["create_topic"] == {("alice", "t-alice-new"): 0, ("alice", "t-alice-other"): E.TOPIC_AUTHORIZATION_FAILED,
                                      ("bob", "t-bob-new"): 0, ("mallory", "t-mallory"): E.TOPIC_AUTHORIZATION_FAILED}
    assert matrix["delete_topic"] == {("alice", "t-alice"): E.TOPIC_AUTHORIZATION_FAILED,
                                      ("mallory", "t-other"): E.TOPIC_AUTHORIZATION_FAILED, ("bob", "t-bob-new"): 0}


def test_cluster_apis(matrix):
    # idempotent producers: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (alice, bob)
    assert matrix["init_producer_id"] == {"admin": 0, "alice": 0, "bob": 0,
                                          "carol": E.CLUSTER_AUTHORIZATION_FAILED,
                                          "mallory": E.CLUSTER_AUTHORIZATION_FAILED}
    denied = (E.CLUSTER_AUTHORIZATION_FAILED,) * 3
    assert matrix["acl_apis"] == {"alice": denied, "bob": denied, "carol": denied, "mallory": denied}
    assert matrix["scram_apis"] == {"admin": (0, 0), **{u: (E.CLUSTER_AUTHORIZATION_FAILED,) * 2
                                                        for u in ("alice", "bob", "carol", "mallory")}}
    assert matrix["quota_apis"] == {"admin": (0, 0), **{u: (E.CLUSTER_AUTHORIZATION_FAILED,) * 2
                                                        for u in ("alice", "bob", "carol", "mallory")}}


TXN_AUTH = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_transaction_apis(matrix):
    assert matrix["txn_find"] == {("alice", "tx-alice"): 0, ("bob", "tx-bob-1"): 0, ("mallory", "tx-alice"): TXN_AUTH,
                                  ("carol", "tx-bob-1"): TXN_AUTH}
    assert matrix["txn_init"] == {"alice": 0, "bob": 0, "mallory": TXN_AUTH, "bob-on-alice's": TXN_AUTH}
    assert matrix["txn_add_partitions"] == {
        "alice-denied-topic": {"t-alice": E.OPERATION_NOT_ATTEMPTED, "t-other": E.TOPIC_AUTHORIZATION_FAILED},
        "mallory": {"t-alice": TXN_AUTH},
        "alice-v4": {"": E.CLUSTER_AUTHORIZATION_FAILED},
        "alice": {"t-alice": 0}}
    assert matrix["txn_produce"] == {"mallory": TXN_AUTH, "alice": 0}
    assert matrix["txn_add_offsets"] == {"alice-other-group": E.GROUP_AUTHORIZATION_FAILED, "mallory": TXN_AUTH,
                                         "alice": 0}
    assert matrix["txn_offset_commit"] == {"alice": {"t-alice": 0, "t-bob-1": E.TOPIC_AUTHORIZATION_FAILED},
                                           "alice-other-group": {"t-alice": E.GROUP_AUTHORIZATION_FAILED},
                                           "mallory": {"t-alice": TXN_AUTH}}
    # WRITE implies DESCRIBE; the partitions of topics it may not describe (__consumer_offsets) are left out
    assert matrix["txn_describe"]["alice"] == {"tx-alice": (0, "Ongoing", {"t-alice"}),
                                               "tx-bob-1": (TXN_AUTH, "", set())}
    assert matrix["txn_describe"]["admin"]["tx-alice"] == (0, "Ongoing", {"t-alice", "__consumer_offsets"})
    lists = matrix["txn_list"]
    assert lists["alice"] == {"tx-alice"} and lists["bob"] == {"tx-bob-1"} and lists["mallory"] == set()
    assert lists["admin"] >= {"tx-alice", "tx-bob-1"}
    assert matrix["txn_end"] == {"mallory": TXN_AUTH, "alice": 0}
    assert matrix["txn_after_denied_end"] == "Ongoing"  # mallory's EndTxn changed nothing
    assert matrix["describe_producers"] == {("alice", "t-alice"): 0, ("alice", "t-other"): E.TOPIC_AUTHORIZATION_FAILED,
                                            ("mallory", "t-alice"): E.TOPIC_AUTHORIZATION_FAILED, ("admin", "t-other"): 0}


def test_transactions_v2_apis(matrix):
    """InitProducerId v5, Produce v12 (its partitions join the transaction), the brokers'
    AddPartitionsToTxn v5, TxnOffsetCommit v5 and EndTxn v5, as KafkaApis authorizes them."""
    assert matrix["v2_init"] == {"bob": 0, "mallory": TXN_AUTH, "alice": TXN_AUTH}
    assert matrix["v2_produce"] == {"mallory": {"t-bob-1": TXN_AUTH}, "alice": {"t-alice": TXN_AUTH},
                                    "bob": {"t-bob-1": 0, "t-alice": E.TOPIC_AUTHORIZATION_FAILED}}
    # only the partition bob may write joined the transaction; the refused requests added nothing
    assert matrix["v2_partitions"] == (0, "Ongoing", {"t-bob-1"})
    assert matrix["v2_verify"] == {"carol": (0, {"t-bob-1": 0, "t-alice": E.TRANSACTION_ABORTABLE}),
                                   "bob": (E.CLUSTER_AUTHORIZATION_FAILED, {})}
    assert matrix["v2_offset_commit"] == {"mallory": {"t-bob-1": TXN_AUTH},
                                          "bob-alice's-group": {"t-bob-1": E.GROUP_AUTHORIZATION_FAILED},
                                          "bob": {"t-bob-1": 0, "t-alice": E.TOPIC_AUTHORIZATION_FAILED}}
    pid, epoch = matrix["v2_producer"]
    assert matrix["v2_end"] == {"mallory": (TXN_AUTH, -1, -1), "alice": (TXN_AUTH, -1, -1),
                                "bob": (0, pid, epoch + 1)}  # v2: the epoch bumped with every EndTxn
    assert matrix["v2_after_denied_end"] == "Ongoing"
    assert matrix["v2_committed"] == (0, {"t-bob-1": [(0, 1)]})  # not t-alice's refused offset


def test_consumer_group_protocol_apis(matrix):
    assert matrix["cg_heartbeat"] == {
        ("bob", "g-bob-cg", ("t-bob-1",)): 0,
        ("bob", "g-bob-cg2", ("t-bob-1", "t-alice")): E.TOPIC_AUTHORIZATION_FAILED,  # may not describe t-alice
        ("alice", "g-bob-cg", ("t-bob-1",)): E.GROUP_AUTHORIZATION_FAILED,  # DESCRIBE is not READ
        ("mallory", "g-bob-cg", ("t-public",)): E.GROUP_AUTHORIZATION_FAILED}
    d = matrix["cg_describe"]
    # ALL, as a group's operations (Kafka 4: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
    bob_ops = sum(1 << op for op in (Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
    assert d["bob"] == (0, bob_ops) and d["admin"] == (0, bob_ops)
    assert d["alice"] == (E.TOPIC_AUTHORIZATION_FAILED, -2**31)  # its member's topic t-bob-1 is not alice's
    assert d["carol"] == (0, (1 << Op.READ) | (1 << Op.DESCRIBE))  # READ * on groups and topics
    assert d["mallory"] == (E.GROUP_AUTHORIZATION_FAILED, -2**31)
    assert matrix["cg_after"] == E.GROUP_ID_NOT_FOUND  # the refused heartbeat made no group


def test_share_group_apis(matrix):
    assert matrix["sg_heartbeat"] == {
        ("bob", "g-bob-sg", ("t-bob-1",)): 0,
        ("bob", "g-bob-sg2", ("t-bob-1", "t-alice")): E.TOPIC_AUTHORIZATION_FAILED,  # may not describe t-alice
        ("alice", "g-bob-sg", ("t-bob-1",)): E.GROUP_AUTHORIZATION_FAILED,  # DESCRIBE is not READ
        ("mallory", "g-bob-sg", ("t-public",)): E.GROUP_AUTHORIZATION_FAILED}
    d = matrix["sg_describe"]
    bob_ops = sum(1 << op for op in (Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
    assert d["bob"] == (0, bob_ops) and d["admin"] == (0, bob_ops)
    assert d["alice"] == (E.GROUP_AUTHORIZATION_FAILED, -2**31)  # no DESCRIBE on g-bob-sg
    assert d["carol"] == (0, (1 << Op.READ) | (1 << Op.DESCRIBE))  # READ * on groups and topics
    assert d["mallory"] == (E.GROUP_AUTHORIZATION_FAILED, -2**31)
    assert matrix["sg_after"] == E.GROUP_ID_NOT_FOUND  # the refused heartbeat made no group


def test_denied_requests_changed_nothing(matrix):
    after = matrix["after"]
    assert after["commit_mallory"] == (0, {"t-alice": [(0, -1)]})
    assert after["commit_alice_to_bob_group"] == (0, {"t-alice": [(0, -1)]})
    # t-alice holds the super user's record, alice's, and alice's transactional one with its abort
    # marker (mallory's produce, plain or transactional, did not land)
    assert after["produce_mallory"] == (0, 4)
    assert "t-mallory" not in after["topics"] and "t-alice-other" not in after["topics"]
    assert {"t-alice", "t-other"} <= after["topics"]  # the denied deletes
    assert "t-auto-alice" not in after["topics"] and "t-auto-bob" not in after["topics"]
    assert after["join_mallory"][1] in ("Dead", "Empty")  # mallory's join added no member
    assert after["offsets_alice_admin"] == (0, {"t-alice": [(0, 1)]})  # the denied OffsetDelete
    assert matrix["acl_count"][0] == matrix["acl_count"][1] == len(ACLS) + 0  # nothing created or deleted
    assert matrix["scram_apis"]["admin"] == (0, 0)


def test_denials_are_logged_as_kafkas_authorizer_does(tmp_path, caplog):
    """One line per denied action with principal, operation, host and resource."""
    caplog.set_level(logging.INFO, "kcoord.authorizer")

    async def run() -> list[str]:
        srv = Server(Config({"log.dirs": str(tmp_path / "d"), "offsets.topic.num.partitions": 2,
                             "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                             "authorizer.class.name": "kcoord"}))
        await srv.start()
        try:
            def call() -> int:
                with WireClient(f"127.0.0.1:{srv.listener('SASL_PLAINTEXT').bound_port}") as c:
                    c.authenticate("PLAIN", "mallory", USERS["mallory"])
                    return Calls(c).heartbeat("g-" + uuid.uuid4().hex[:6])
            assert await asyncio.to_thread(call) == E.GROUP_AUTHORIZATION_FAILED
        finally:
            await srv.stop()
        return [r.getMessage() for r in caplog.records if r.name == "kcoord.authorizer"]
    lines = asyncio.run(run())
    assert len(lines) == 1, lines
    assert lines[0].startswith("Principal = User:mallory is Denied operation = READ from host = 127.0.0.1 on "
                               "resource = Group:LITERAL:g-") and "for request = Heartbeat" in lines[0]
