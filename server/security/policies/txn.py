"""Who may use transactions and idempotence (Kafka's KafkaApis.handle*TxnRequest,
handleDescribe/ListTransactions): WRITE on the transactional id, WRITE on each topic written,
IDEMPOTENT_WRITE on the cluster for an idempotent producer."""
from __future__ import annotations

from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.acl import AclOperation
from kcoord.server.security.guard import (
    DESCRIBE,
    GROUP,
    PASS,
    READ,
    TOPIC,
    TXN,
    WRITE,
    Access,
    Guarded,
    clone,
    refused,
)
from kcoord.server.security.policies.topics import per_topic


def init_producer_id(a: Access, req: Any, version: int) -> Guarded:
    if req.transactional_id is not None:
        if not a.allowed(WRITE, TXN, req.transactional_id):
            return refused(a, req, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return PASS
    if a.cluster(AclOperation.IDEMPOTENT_WRITE, log=False) or \
            a.authorizer.authorize_by_resource_type(a.principal, a.host, WRITE, TOPIC):
        return PASS
    return refused(a, req, version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def add_partitions_to_txn(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.producer.transaction import AddPartitionsToTxnResponse

    from kcoord.server.data_plane import log_of

    Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
    TopicResult = Result.AddPartitionsToTxnTopicResult
    PartResult = TopicResult.AddPartitionsToTxnPartitionResult
    if version >= 4:  # from brokers (KIP-890): CLUSTER_ACTION
        if a.cluster(AclOperation.CLUSTER_ACTION):
            return PASS
        return Guarded(refusal=AddPartitionsToTxnResponse(
            version=version, throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[]))
    partitions = list(dict.fromkeys((t.name, p) for t in req.v3_and_below_topics for p in t.partitions))

    def answer(errors: dict[tuple[str, int], ErrorCode]) -> Guarded:
        by_topic: dict[str, list[Any]] = {}
        for (t, p), code in errors.items():
            by_topic.setdefault(t, []).append(PartResult(partition_index=p, partition_error_code=int(code)))
        return Guarded(refusal=AddPartitionsToTxnResponse(version=version, throttle_time_ms=0, results_by_topic_v3_and_below=[
            TopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]))

    if not a.allowed(WRITE, TXN, req.v3_and_below_transactional_id):
        return answer(dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    parts = a.parts
    internal = {t for t, _ in partitions if (topic := parts.topics.get(t)) is not None and topic.internal}
    allowed = a.allowed_names(WRITE, TOPIC, (t for t, _ in partitions if t not in internal))
    if not internal and len(allowed) == len({t for t, _ in partitions}):
        return PASS
    errors: dict[tuple[str, int], ErrorCode] = {}
    for t, p in partitions:  # denied, then missing; the others are not attempted
        topic = parts.topics.get(t)
        if t not in allowed:
            errors[(t, p)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif topic is None or log_of(parts.logs, topic, p) is None:
            errors[(t, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            errors[(t, p)] = ErrorCode.OPERATION_NOT_ATTEMPTED
    return answer(errors)


def add_offsets_to_txn(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.producer.transaction import AddOffsetsToTxnResponse

    if not a.allowed(WRITE, TXN, req.transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not a.allowed(READ, GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        return PASS
    return Guarded(refusal=AddOffsetsToTxnResponse(version=version, throttle_time_ms=0, error_code=int(code)))


def end_txn(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.producer.transaction import EndTxnResponse

    if a.allowed(WRITE, TXN, req.transactional_id):
        return PASS
    return Guarded(refusal=EndTxnResponse(version=version, throttle_time_ms=0,
                                          error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                          producer_id=-1, producer_epoch=-1))


def txn_offset_commit(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.producer.transaction import TxnOffsetCommitResponse

    T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition

    def rows(topics: Any, code: ErrorCode) -> list[Any]:
        return [T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=int(code))
                                           for p in t.partitions]) for t in topics]

    def whole(code: ErrorCode) -> Guarded:
        return Guarded(refusal=TxnOffsetCommitResponse(version=version, throttle_time_ms=0,
                                                       topics=rows(req.topics, code)))

    if not a.allowed(WRITE, TXN, req.transactional_id):
        return whole(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not a.allowed(READ, GROUP, req.group_id):
        return whole(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    allowed = a.allowed_names(READ, TOPIC, (t.name for t in req.topics))
    denied = [t for t in req.topics if t.name not in allowed]
    if not denied:
        return PASS
    errors = rows(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    kept = [t for t in req.topics if t.name in allowed]
    if not kept:
        return Guarded(refusal=TxnOffsetCommitResponse(version=version, throttle_time_ms=0, topics=errors))

    def merge(resp: Any) -> Any:
        resp.topics = list(resp.topics) + errors
        return resp
    return Guarded(request=clone(req, topics=kept), after=merge)


def describe_producers(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.transactions import DescribeProducersResponse

    T = DescribeProducersResponse.TopicResponse
    P = T.PartitionResponse
    return per_topic(a, req, version, READ, "topics", lambda t: T(name=t.name, partitions=[
        P(partition_index=p, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None, active_producers=[])
        for p in t.partition_indexes]), "topics",
        lambda v, errors: DescribeProducersResponse(version=v, throttle_time_ms=0, topics=errors))


def describe_transactions(a: Access, req: Any, version: int) -> Guarded:
    from kafka.protocol.admin.transactions import DescribeTransactionsResponse

    State = DescribeTransactionsResponse.TransactionState
    ids = list(req.transactional_ids)
    denied = {t for t in ids if not a.allowed(DESCRIBE, TXN, t)}

    def refused(tid: str) -> Any:
        return State(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=tid,
                     transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0,
                     producer_epoch=0, topics=[])

    def finish(resp: Any) -> Any:
        got = iter(resp.transaction_states)
        out = []
        for tid in ids:  # in the request's order
            if tid in denied:
                out.append(refused(tid))
                continue
            s = next(got)
            # only the partitions of topics the principal may describe
            s.topics = [t for t in s.topics if a.allowed(DESCRIBE, TOPIC, t.topic, log=False)]
            out.append(s)
        resp.transaction_states = out
        return resp

    kept = [t for t in ids if t not in denied]
    if not kept:
        return Guarded(refusal=DescribeTransactionsResponse(version=version, throttle_time_ms=0,
                                                            transaction_states=[refused(t) for t in ids]))
    return Guarded(request=clone(req, transactional_ids=kept) if denied else None, after=finish)


def list_transactions(a: Access, req: Any, version: int) -> Guarded:
    def keep_describable(resp: Any) -> Any:
        resp.transaction_states = [s for s in resp.transaction_states
                                   if a.allowed(DESCRIBE, TXN, s.transactional_id, log=False)]
        return resp
    return Guarded(after=keep_describable)


def write_txn_markers(a: Access, req: Any, version: int) -> Guarded:
    """From a transaction coordinator on another broker: CLUSTER_ACTION (Kafka's
    handleWriteTxnMarkersRequest)."""
    from kafka.protocol.producer.transaction import WriteTxnMarkersResponse

    if a.cluster(AclOperation.CLUSTER_ACTION):
        return PASS
    Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
    TopicResult = Result.WritableTxnMarkerTopicResult
    PartResult = TopicResult.WritableTxnMarkerPartitionResult
    return Guarded(refusal=WriteTxnMarkersResponse(version=version, markers=[
        Result(producer_id=m.producer_id, topics=[
            TopicResult(name=t.name, partitions=[
                PartResult(partition_index=p, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                for p in t.partition_indexes]) for t in m.topics]) for m in req.markers]))
