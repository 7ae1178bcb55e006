"""A transactional client for in-process tests: each call goes through the real handler of its
API (requests and responses encoded and decoded at the version given) against a Broker with
real logs on tmp_path, and waits for a parked answer."""
from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    TxnOffsetCommitRequest,
)
from test_produce_helpers import batch, call, fetch_req, produce, settle

from kcoord.protocol.api import ApiKey
from kcoord.server.broker import Broker


class TxnClient:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.seq: dict[tuple[str, int], int] = {}

    async def ask(self, api: ApiKey, req: Any, version: int) -> Any:
        return await settle(await call(self.broker, api, req, version))

    async def find(self, key: str, key_type: int = 1, version: int = 3) -> Any:
        return await self.ask(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
            version=version, key=key, key_type=key_type), version)

    async def init(self, tid: str, timeout: int = 60000, pid: int = -1, epoch: int = -1, version: int = 4) -> Any:
        return await self.ask(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(
            version=version, transactional_id=tid, transaction_timeout_ms=timeout, producer_id=pid,
            producer_epoch=epoch), version)

    async def add(self, tid: str, pid: int, epoch: int, parts: dict[str, list[int]], version: int = 3) -> dict:
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        r = await self.ask(ApiKey.ADD_PARTITIONS_TO_TXN, AddPartitionsToTxnRequest(
            version=version, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in parts.items()]), version)
        return {(t.name, p.partition_index): p.partition_error_code
                for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}

    async def add_offsets(self, tid: str, pid: int, epoch: int, group: str, version: int = 3) -> int:
        r = await self.ask(ApiKey.ADD_OFFSETS_TO_TXN, AddOffsetsToTxnRequest(
            version=version, transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group), version)
        return r.error_code

    async def produce(self, tid: str | None, topic: str, p: int, values: list[bytes], pid: int, epoch: int,
                      transactional: bool = True, version: int = 9) -> Any:
        seq = self.seq.get((topic, p), 0)
        resp = await produce(self.broker, topic, p, batch(values, pid=pid, epoch=epoch, seq=seq,
                                                          transactional=transactional),
                             acks=-1, transactional_id=tid, version=version)
        if resp.error_code == 0:
            self.seq[(topic, p)] = seq + len(values)
        return resp

    async def commit_offsets(self, tid: str, pid: int, epoch: int, group: str, offsets: dict[tuple[str, int], int],
                             version: int = 3, member_id: str = "", generation: int = -1) -> dict:
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        P = T.TxnOffsetCommitRequestPartition
        by_topic: dict[str, list[Any]] = {}
        for (t, p), off in offsets.items():
            by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=off, committed_leader_epoch=-1,
                                                committed_metadata=""))
        r = await self.ask(ApiKey.TXN_OFFSET_COMMIT, TxnOffsetCommitRequest(
            version=version, transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=generation, member_id=member_id, group_instance_id=None,
            topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()]), version)
        return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}

    async def end(self, tid: str, pid: int, epoch: int, commit: bool, version: int = 3,
                  until_complete: bool = True) -> Any:
        """EndTxn; answered once the Prepare state is durable, as Kafka answers it. With
        until_complete, return once the markers and the Complete state are written too (what
        the tests below look at; a client sees it with require_stable or read_committed)."""
        r = await self.ask(ApiKey.END_TXN, EndTxnRequest(
            version=version, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit), version)
        completing = self.broker.parts.txn.get().coordinator.completing(tid)
        if until_complete and completing is not None and not completing.done:
            fut = asyncio.get_running_loop().create_future()
            completing.add_callback(lambda _: fut.done() or fut.set_result(None))
            await fut
        return r

    async def offsets(self, group: str, parts: dict[str, list[int]], require_stable: bool = True) -> dict:
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        r = await self.ask(ApiKey.OFFSET_FETCH, OffsetFetchRequest(
            version=7, group_id=group, require_stable=require_stable,
            topics=[T(name=t, partition_indexes=ps) for t, ps in parts.items()]), 7)
        return {(t.name, p.partition_index): (p.committed_offset, p.error_code) for t in r.topics for p in t.partitions}

    async def fetch(self, topic: str, p: int, offset: int = 0, isolation: int = 1) -> Any:
        r = await self.ask(ApiKey.FETCH, fetch_req([(topic, p, offset)], isolation_level=isolation), 12)
        return r.responses[0].partitions[0]

    async def describe(self, *tids: str) -> Any:
        from kafka.protocol.admin.transactions import DescribeTransactionsRequest

        r = await self.ask(ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(
            version=0, transactional_ids=list(tids)), 0)
        return {s.transactional_id: s for s in r.transaction_states}

    async def list(self, states: list[str] | None = None, pids: list[int] | None = None, duration: int = -1,
                   version: int = 1) -> Any:
        from kafka.protocol.admin.transactions import ListTransactionsRequest

        return await self.ask(ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest(
            version=version, state_filters=states or [], producer_id_filters=pids or [], duration_filter=duration),
            version)

    async def producers(self, topic: str, *parts: int) -> Any:
        from kafka.protocol.admin.transactions import DescribeProducersRequest

        r = await self.ask(ApiKey.DESCRIBE_PRODUCERS, DescribeProducersRequest(version=0, topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=list(parts))]), 0)
        return {p.partition_index: p for p in r.topics[0].partitions}
