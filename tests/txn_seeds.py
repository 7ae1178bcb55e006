"""Seeds of the transaction APIs for the dispatch fuzzers (tests/property/test_fuzz_dispatch.py):
one valid request per served version. They name a transactional id the coordinator does not
know, so most are answered with an error by design (ERROR_BY_DESIGN: INVALID_PRODUCER_ID_MAPPING,
TRANSACTIONAL_ID_NOT_FOUND, COORDINATOR_NOT_AVAILABLE): that still proves each decoded and
reached the transaction coordinator."""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)

from kcoord.protocol.api import ApiKey

TXN_APIS = frozenset({ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
                      ApiKey.TXN_OFFSET_COMMIT, ApiKey.DESCRIBE_PRODUCERS, ApiKey.DESCRIBE_TRANSACTIONS,
                      ApiKey.LIST_TRANSACTIONS, ApiKey.WRITE_TXN_MARKERS})
# seeds answered with an error by design (the id is unknown, or no transaction coordinator yet)
ERROR_BY_DESIGN = ("ADD_PARTITIONS_TO_TXN", "ADD_OFFSETS_TO_TXN", "END_TXN", "TXN_OFFSET_COMMIT",
                   "DESCRIBE_TRANSACTIONS", "LIST_TRANSACTIONS")
TID = "fuzz-tx"


def txn_request(api: int, v: int, topic: str, group: str) -> Any:
    if api == ApiKey.ADD_PARTITIONS_TO_TXN:
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        if v >= 4:
            X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
            return AddPartitionsToTxnRequest(version=v, transactions=[
                X(transactional_id=TID, producer_id=1, producer_epoch=0, verify_only=False,
                  topics=[X.AddPartitionsToTxnTopic(name=topic, partitions=[0])])])
        return AddPartitionsToTxnRequest(version=v, v3_and_below_transactional_id=TID, v3_and_below_producer_id=1,
                                         v3_and_below_producer_epoch=0,
                                         v3_and_below_topics=[T(name=topic, partitions=[0])])
    if api == ApiKey.ADD_OFFSETS_TO_TXN:
        return AddOffsetsToTxnRequest(version=v, transactional_id=TID, producer_id=1, producer_epoch=0,
                                      group_id=group)
    if api == ApiKey.END_TXN:
        return EndTxnRequest(version=v, transactional_id=TID, producer_id=1, producer_epoch=0, committed=True)
    if api == ApiKey.TXN_OFFSET_COMMIT:
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        P = T.TxnOffsetCommitRequestPartition
        return TxnOffsetCommitRequest(
            version=v, transactional_id=TID, group_id=group, producer_id=1, producer_epoch=0, generation_id=-1,
            member_id="", group_instance_id=None,
            topics=[T(name=topic, partitions=[P(partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                                                 committed_metadata="")])])
    if api == ApiKey.DESCRIBE_PRODUCERS:
        T = DescribeProducersRequest.TopicRequest
        return DescribeProducersRequest(version=v, topics=[T(name=topic, partition_indexes=[0])])
    if api == ApiKey.DESCRIBE_TRANSACTIONS:
        return DescribeTransactionsRequest(version=v, transactional_ids=[TID])
    if api == ApiKey.LIST_TRANSACTIONS:
        return ListTransactionsRequest(version=v, state_filters=[], producer_id_filters=[], duration_filter=-1)
    if api == ApiKey.WRITE_TXN_MARKERS:  # another node's coordinator: an ABORT marker, written here
        M = WriteTxnMarkersRequest.WritableTxnMarker
        return WriteTxnMarkersRequest(version=v, markers=[M(
            producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=[M.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])])
    raise AssertionError(f"not a transaction API: {api}")
