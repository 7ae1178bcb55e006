"""Transactional-id authorization in every served version of the transaction APIs (KafkaApis:
WRITE on the TransactionalId for InitProducerId, AddPartitionsToTxn v0-v3, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn and a Produce carrying transactional batches; CLUSTER_ACTION for the
brokers' AddPartitionsToTxn v4+; DESCRIBE for DescribeTransactions and ListTransactions).

Each policy of server/security/policies/ is run against a real Authorizer: a principal
without the ACL is refused with the API's own error shape, and the refusal encodes and decodes
at that version with the error where a client looks for it; with the ACL the request passes
unchanged. The allowed paths through the handlers are in tests/integration/test_acls.py."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kafka.protocol.admin.transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
)
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TxnOffsetCommitRequest,
)

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.handlers.routes import POLICIES
from kcoord.server.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from kcoord.server.security.authorizer import Authorizer
from kcoord.server.security.guard import PASS as _PASS
from kcoord.server.security.guard import Access, Guarded

Op, Res = AclOperation, ResourceType
TXN_AUTH = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
TID = "tx-app"


def versions(api: ApiKey) -> list[int]:
    spec = API_TABLE[api]
    return list(range(spec.min_version, spec.max_version + 1))


def grant(log_dir: Path, *acls: tuple[str, ResourceType, str, AclOperation]) -> Authorizer:
    a = Authorizer(log_dir, "", False)
    records, results = a.create([StandardAcl(rtype, name, PatternType.LITERAL, principal, "*", op,
                                             AclPermissionType.ALLOW) for principal, rtype, name, op in acls])
    assert all(code == 0 for code, _ in results), results
    asyncio.run(a.commit(records))
    return a


# app: WRITE on its transactional id, READ on its group and topic; other: nothing at all;
# broker: CLUSTER_ACTION only (what a broker's AddPartitionsToTxn v4+ runs as)
AUTHORIZER_ACLS = [("User:app", Res.TRANSACTIONAL_ID, TID, Op.WRITE), ("User:app", Res.GROUP, "g", Op.READ),
                   ("User:app", Res.TOPIC, "t", Op.READ), ("User:app", Res.TOPIC, "t", Op.WRITE),
                   ("User:broker", Res.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)]


@pytest.fixture(scope="module")
def authorizer(tmp_path_factory) -> Authorizer:
    return grant(tmp_path_factory.mktemp("txn-authz"), *AUTHORIZER_ACLS)


def decide(authorizer: Authorizer, principal: str, api: ApiKey, req, version: int) -> Guarded:
    access = Access(authorizer, principal, "10.0.0.1", API_TABLE[api].name, None)  # type: ignore[arg-type]
    return POLICIES[api](access, req, version)


def roundtrip(resp, version: int):
    """The refusal as the client decodes it."""
    return type(resp).decode(bytes(resp.encode(version=version)), version=version)


def txn_batch(pid: int = 7, epoch: int = 0) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=0, batch_size=2**31 - 1)
    b.append(0, 1_700_000_000_000, b"k", b"v", [])
    return bytes(b.build())


# ---- one request per API and version ----


def init_producer_id(v: int, tid: str | None = TID):
    return InitProducerIdRequest(version=v, transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1,
                                 producer_epoch=-1)


def add_offsets(v: int, group: str = "g"):
    return AddOffsetsToTxnRequest(version=v, transactional_id=TID, producer_id=7, producer_epoch=0, group_id=group)


def txn_offset_commit(v: int, group: str = "g"):
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    return TxnOffsetCommitRequest(version=v, transactional_id=TID, group_id=group, producer_id=7, producer_epoch=0,
                                  generation_id=-1, member_id="", group_instance_id=None, topics=[
                                      T(name="t", partitions=[T.TxnOffsetCommitRequestPartition(
                                          partition_index=p, committed_offset=5, committed_leader_epoch=-1,
                                          committed_metadata="") for p in (0, 1)])])


def end_txn(v: int):
    return EndTxnRequest(version=v, transactional_id=TID, producer_id=7, producer_epoch=0, committed=True)


def produce(v: int, acks: int = -1):
    T = ProduceRequest.TopicProduceData
    return ProduceRequest(version=v, transactional_id=TID, acks=acks, timeout_ms=5000, topic_data=[
        T(name="t", partition_data=[T.PartitionProduceData(index=p, records=txn_batch()) for p in (0, 1)])])


def add_partitions(v: int, tid: str = TID):
    T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    if v >= 4:
        X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        return AddPartitionsToTxnRequest(version=v, transactions=[X(
            transactional_id=tid, producer_id=7, producer_epoch=0, verify_only=True,
            topics=[X.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])])])
    return AddPartitionsToTxnRequest(version=v, v3_and_below_transactional_id=tid, v3_and_below_producer_id=7,
                                     v3_and_below_producer_epoch=0, v3_and_below_topics=[T(name="t", partitions=[0, 1])])


# ---- WRITE on the transactional id, every version ----


@pytest.mark.parametrize("v", versions(ApiKey.INIT_PRODUCER_ID))
def test_init_producer_id_needs_write_on_its_transactional_id(authorizer, v):
    assert decide(authorizer, "User:app", ApiKey.INIT_PRODUCER_ID, init_producer_id(v), v) is _PASS
    g = decide(authorizer, "User:other", ApiKey.INIT_PRODUCER_ID, init_producer_id(v), v)
    r = roundtrip(g.refusal, v)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (TXN_AUTH, -1, -1)
    # WRITE on another id is no help
    g = decide(authorizer, "User:app", ApiKey.INIT_PRODUCER_ID, init_producer_id(v, "tx-else"), v)
    assert roundtrip(g.refusal, v).error_code == TXN_AUTH


@pytest.mark.parametrize("v", versions(ApiKey.INIT_PRODUCER_ID))
def test_idempotent_init_producer_id_needs_idempotent_write_or_a_topic_write(authorizer, tmp_path, v):
    assert decide(authorizer, "User:app", ApiKey.INIT_PRODUCER_ID, init_producer_id(v, None), v) is _PASS  # WRITE t
    g = decide(authorizer, "User:broker", ApiKey.INIT_PRODUCER_ID, init_producer_id(v, None), v)
    assert roundtrip(g.refusal, v).error_code == E.CLUSTER_AUTHORIZATION_FAILED  # CLUSTER_ACTION is not it
    writer = grant(tmp_path, ("User:w", Res.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE))
    assert decide(writer, "User:w", ApiKey.INIT_PRODUCER_ID, init_producer_id(v, None), v) is _PASS


@pytest.mark.parametrize("v", versions(ApiKey.ADD_OFFSETS_TO_TXN))
def test_add_offsets_needs_write_on_the_id_then_read_on_the_group(authorizer, v):
    assert decide(authorizer, "User:app", ApiKey.ADD_OFFSETS_TO_TXN, add_offsets(v), v) is _PASS
    g = decide(authorizer, "User:other", ApiKey.ADD_OFFSETS_TO_TXN, add_offsets(v), v)
    assert roundtrip(g.refusal, v).error_code == TXN_AUTH
    g = decide(authorizer, "User:app", ApiKey.ADD_OFFSETS_TO_TXN, add_offsets(v, "g-else"), v)
    assert roundtrip(g.refusal, v).error_code == E.GROUP_AUTHORIZATION_FAILED


@pytest.mark.parametrize("v", versions(ApiKey.TXN_OFFSET_COMMIT))
def test_txn_offset_commit_needs_write_on_the_id_and_read_on_group_and_topics(authorizer, v):
    assert decide(authorizer, "User:app", ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit(v), v) is _PASS
    for principal, group, code in [("User:other", "g", TXN_AUTH), ("User:app", "g-else", E.GROUP_AUTHORIZATION_FAILED)]:
        g = decide(authorizer, principal, ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit(v, group), v)
        r = roundtrip(g.refusal, v)
        assert [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions] == \
            [("t", 0, code), ("t", 1, code)]


@pytest.mark.parametrize("v", versions(ApiKey.END_TXN))
def test_end_txn_needs_write_on_its_transactional_id(authorizer, v):
    assert decide(authorizer, "User:app", ApiKey.END_TXN, end_txn(v), v) is _PASS
    r = roundtrip(decide(authorizer, "User:other", ApiKey.END_TXN, end_txn(v), v).refusal, v)
    assert r.error_code == TXN_AUTH
    if v >= 5:  # transactions v2: no new producer id or epoch comes with a refusal
        assert (r.producer_id, r.producer_epoch) == (-1, -1)


@pytest.mark.parametrize("v", versions(ApiKey.PRODUCE))
def test_transactional_produce_needs_write_on_its_transactional_id(authorizer, v):
    """Every version, v12 (transactions v2, whose partitions join the transaction) included: the
    whole request is refused, every partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    assert decide(authorizer, "User:app", ApiKey.PRODUCE, produce(v), v) is _PASS
    r = roundtrip(decide(authorizer, "User:other", ApiKey.PRODUCE, produce(v), v).refusal, v)
    assert [(t.name, p.index, p.error_code) for t in r.responses for p in t.partition_responses] == \
        [("t", 0, TXN_AUTH), ("t", 1, TXN_AUTH)]
    # transactional batches without a transactional id: refused the same way (Kafka's null check)
    req = produce(v)
    req.transactional_id = None
    assert roundtrip(decide(authorizer, "User:app", ApiKey.PRODUCE, req, v).refusal, v).responses[0] \
        .partition_responses[0].error_code == TXN_AUTH


def test_transactional_produce_with_acks_0_closes_the_connection(authorizer):
    from kcoord.server.dispatch import CloseConnection

    with pytest.raises(CloseConnection):
        decide(authorizer, "User:other", ApiKey.PRODUCE, produce(12, acks=0), 12)


@pytest.mark.parametrize("v", [v for v in versions(ApiKey.ADD_PARTITIONS_TO_TXN) if v < 4])
def test_clients_add_partitions_needs_write_on_its_transactional_id(authorizer, v):
    r = roundtrip(decide(authorizer, "User:other", ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions(v), v).refusal, v)
    assert [(t.name, p.partition_index, p.partition_error_code) for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition] == [("t", 0, TXN_AUTH), ("t", 1, TXN_AUTH)]
    # CLUSTER_ACTION (a broker's right) does not stand in for the transactional id's WRITE
    r = roundtrip(decide(authorizer, "User:broker", ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions(v), v).refusal, v)
    assert {p.partition_error_code for t in r.results_by_topic_v3_and_below for p in t.results_by_partition} == \
        {TXN_AUTH}


@pytest.mark.parametrize("v", [v for v in versions(ApiKey.ADD_PARTITIONS_TO_TXN) if v >= 4])
def test_brokers_add_partitions_needs_cluster_action_not_the_transactional_id(authorizer, v):
    """v4+ (batched; verify_only from brokers, KIP-890) come only from brokers: Kafka authorizes
    CLUSTER_ACTION on the cluster for the whole request and then neither the transactional ids
    nor the topics (KafkaApis: `version < 4 && !authorize(WRITE, TRANSACTIONAL_ID)`)."""
    assert decide(authorizer, "User:broker", ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions(v), v) is _PASS
    for principal in ("User:app", "User:other"):  # WRITE on the id is no help: not a broker
        r = roundtrip(decide(authorizer, principal, ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions(v), v).refusal, v)
        assert (r.error_code, r.results_by_transaction) == (E.CLUSTER_AUTHORIZATION_FAILED, [])


# ---- DESCRIBE on the transactional id ----


def test_describe_transactions_refuses_each_id_it_may_not_describe(authorizer):
    State = DescribeTransactionsResponse.TransactionState
    T = State.TopicData
    req = DescribeTransactionsRequest(version=0, transactional_ids=["tx-else", TID, "tx-other"])
    g = decide(authorizer, "User:app", ApiKey.DESCRIBE_TRANSACTIONS, req, 0)
    assert g.request.transactional_ids == [TID]  # the coordinator is asked only about what may be described
    handled = DescribeTransactionsResponse(version=0, throttle_time_ms=0, transaction_states=[State(
        error_code=0, transactional_id=TID, transaction_state="Ongoing", transaction_timeout_ms=60000,
        transaction_start_time_ms=1, producer_id=7, producer_epoch=0,
        topics=[T(topic="t", partitions=[0]), T(topic="__consumer_offsets", partitions=[3])])])
    r = roundtrip(g.after(handled), 0)
    assert [(s.transactional_id, s.error_code) for s in r.transaction_states] == \
        [("tx-else", TXN_AUTH), (TID, 0), ("tx-other", TXN_AUTH)]  # the request's order
    assert [t.topic for t in r.transaction_states[1].topics] == ["t"]  # only topics it may describe
    g = decide(authorizer, "User:other", ApiKey.DESCRIBE_TRANSACTIONS, req, 0)
    assert [s.error_code for s in roundtrip(g.refusal, 0).transaction_states] == [TXN_AUTH] * 3


@pytest.mark.parametrize("v", versions(ApiKey.LIST_TRANSACTIONS))
def test_list_transactions_shows_only_what_may_be_described(authorizer, v):
    S = ListTransactionsResponse.TransactionState
    listed = ListTransactionsResponse(version=v, throttle_time_ms=0, error_code=0, unknown_state_filters=[],
                                      transaction_states=[S(transactional_id=t, producer_id=i, transaction_state="Ongoing")
                                                          for i, t in enumerate([TID, "tx-else"])])
    g = decide(authorizer, "User:app", ApiKey.LIST_TRANSACTIONS, None, v)
    assert [s.transactional_id for s in roundtrip(g.after(listed), v).transaction_states] == [TID]
    listed.transaction_states = [S(transactional_id=TID, producer_id=1, transaction_state="Ongoing")]
    g = decide(authorizer, "User:other", ApiKey.LIST_TRANSACTIONS, None, v)
    assert roundtrip(g.after(listed), v).transaction_states == []
