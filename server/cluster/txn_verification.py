"""A data partition's leader asks the transaction coordinator on another node about a
producer's partitions (Kafka's AddPartitionsToTxnManager): before a producer's first
transactional batch in a partition is appended, the coordinator of its transactional id either
checks that the partition is in the ongoing transaction (KIP-890 verification, Produce v11 and
below, verify_only) or adds it (transactions v2, Produce v12). One AddPartitionsToTxn v5 (the
broker form, a batch of transactions) to the leader of the id's __transaction_state partition
on the inter-broker listener; the answer is an error per partition, as the local coordinator's
(server/handlers/produce_txn.py turns it into Produce's codes). A coordinator that cannot be
reached answers NOT_COORDINATOR for every partition: retriable, the producer sends again."""
from __future__ import annotations

import logging
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.partitioner import partition_for
from kcoord.protocol.topics import TXN_TOPIC
from kcoord.server.cluster.broker_clients import BrokerClients, BrokerConnectionError

log = logging.getLogger("kcoord.txn.verification")

TopicPartition = tuple[str, int]
ADD_PARTITIONS_VERSION = 5


class RemoteTxnPartitions:
    def __init__(self, node: Any, timeout_s: float = 30.0) -> None:
        self.node = node  # the ClusterNode: its metadata cache and inter-broker endpoints
        self.clients = BrokerClients(f"kcoord-txn-verify-{node.broker_id}", timeout_s)

    def coordinator_of(self, transactional_id: str) -> int | None:
        """The node leading the id's __transaction_state partition, None when none is known."""
        topic = self.node.topic(TXN_TOPIC)
        if topic is None:
            return None
        st = self.node.cache.state(TXN_TOPIC, partition_for(transactional_id, topic.partitions))
        return st.leader if st is not None and st.leader in self.node.cache.live else None

    def elsewhere(self, transactional_id: str) -> bool:
        """Whether another node coordinates the id (else this node answers itself)."""
        c = self.coordinator_of(transactional_id)
        return c is not None and c != self.node.broker_id

    async def add(self, transactional_id: str, producer_id: int, producer_epoch: int,
                  partitions: list[TopicPartition], verify_only: bool) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's answer for each partition; never raises."""
        from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest

        node = self.coordinator_of(transactional_id)
        endpoint = None if node is None else self.node.endpoints().get(node)
        if node is None or endpoint is None:
            return dict.fromkeys(partitions, ErrorCode.NOT_COORDINATOR)
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        X = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
        request = AddPartitionsToTxnRequest(version=ADD_PARTITIONS_VERSION, transactions=[X(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=verify_only,
            topics=[X.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])
        try:
            response = await self.clients.request(node, endpoint, request, ADD_PARTITIONS_VERSION)
        except BrokerConnectionError as e:
            log.info("AddPartitionsToTxn to node %d failed: %s", node, e)
            return dict.fromkeys(partitions, ErrorCode.NOT_COORDINATOR)
        except Exception as e:  # noqa: BLE001 - an answer it cannot read: the producer retries
            log.warning("AddPartitionsToTxn to node %d failed: %r", node, e)
            return dict.fromkeys(partitions, ErrorCode.NOT_COORDINATOR)
        if response.error_code:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        out = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
        for txn in response.results_by_transaction:
            for t in txn.topic_results:
                for r in t.results_by_partition:
                    if (t.name, r.partition_index) in out:
                        out[(t.name, r.partition_index)] = ErrorCode(r.partition_error_code)
        return out

    def close(self) -> None:
        self.clients.close()
