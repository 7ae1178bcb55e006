"""A transactional producer's sequence survives DeleteRecords moving the log start past its
batches, over a real socket (kafka-python's request classes, as librdkafka speaks them).

librdkafka's 0103_transactions (do_test_fatal_idempo_error_without_kip360) commits 6 records,
deletes the records below offset 6 and produces the next transaction's first record at
sequence 6. EndTxn is answered before the commit marker is written, so the marker can land
after the deletion (on a cluster it comes from another node through WriteTxnMarkers). Kafka
keeps a producer's state when the log start moves (ProducerStateManager's
onLogStartOffsetIncremented leaves its map alone; producers leave it only when they expire),
so the marker finds the producer with its last sequence 5 and sequence 6 follows. Here the
deletion is made to come before the marker for certain: DeleteRecords runs while the
transaction is still open (Kafka allows it up to the high watermark), then EndTxn."""
from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic
from conftest import call, unique
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest, EndTxnRequest

from kcoord.protocol.errors import ErrorCode as E


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    bb = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=pid,
                                   producer_epoch=epoch, base_sequence=seq, batch_size=2**31 - 1)
    now = int(time.time() * 1000)
    for i, v in enumerate(values):
        bb.append(i, now, None, v, [])
    return bytes(bb.build())


class V1Producer:
    """A transactions v1 producer spoken by hand: InitProducerId v4, AddPartitionsToTxn v3,
    Produce v9, EndTxn v3 (the epoch stays across transactions; sequences go on)."""

    def __init__(self, bootstrap: str, tid: str, topic: str) -> None:
        self.b, self.tid, self.topic = bootstrap, tid, topic
        assert call(bootstrap, FindCoordinatorRequest(version=3, key=tid, key_type=1), 3).error_code == 0
        r = call(bootstrap, InitProducerIdRequest(version=4, transactional_id=tid, transaction_timeout_ms=60000,
                                                  producer_id=-1, producer_epoch=-1), 4)
        assert r.error_code == 0
        self.pid, self.epoch = r.producer_id, r.producer_epoch

    def add_partition(self) -> None:
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        r = call(self.b, AddPartitionsToTxnRequest(
            version=3, v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch, v3_and_below_topics=[T(name=self.topic, partitions=[0])]), 3)
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0

    def produce(self, seq: int, values: list[bytes]) -> tuple[int, int]:
        T = ProduceRequest.TopicProduceData
        r = call(self.b, ProduceRequest(version=9, transactional_id=self.tid, acks=-1, timeout_ms=10000, topic_data=[
            T(name=self.topic, partition_data=[T.PartitionProduceData(
                index=0, records=txn_batch(self.pid, self.epoch, seq, values))])]), 9)
        p = r.responses[0].partition_responses[0]
        return p.error_code, p.base_offset

    def commit(self) -> None:
        r = call(self.b, EndTxnRequest(version=3, transactional_id=self.tid, producer_id=self.pid,
                                       producer_epoch=self.epoch, committed=True), 3)
        assert r.error_code == 0
        deadline = time.monotonic() + 30  # EndTxn is answered before the marker is written
        while call(self.b, DescribeTransactionsRequest(version=0, transactional_ids=[self.tid]),
                   0).transaction_states[0].transaction_state != "CompleteCommit":
            assert time.monotonic() < deadline, "the commit marker was never written"
            time.sleep(0.02)


def delete_records(bootstrap: str, topic: str, offset: int) -> tuple[int, int]:
    T = DeleteRecordsRequest.DeleteRecordsTopic
    r = call(bootstrap, DeleteRecordsRequest(version=2, timeout_ms=10000, topics=[
        T(name=topic, partitions=[T.DeleteRecordsPartition(partition_index=0, offset=offset)])]), 2)
    p = r.topics[0].partitions[0]
    return p.error_code, p.low_watermark


def test_sequence_continues_after_delete_records_and_a_later_marker(kcoord):
    b = kcoord.bootstrap
    topic = unique("delrec-seq")
    admin = AdminClient({"bootstrap.servers": b})
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    pr = V1Producer(b, unique("delrec-tx"), topic)
    pr.add_partition()
    for seq in range(6):  # one record a batch, as the librdkafka test's batch.num.messages=1
        assert pr.produce(seq, [f"t1-{seq}".encode()]) == (0, seq)
    # the records of the open transaction are deleted, so its marker comes after the deletion
    assert delete_records(b, topic, 6) == (0, 6)
    pr.commit()  # the COMMIT marker at offset 6
    pr.add_partition()
    # the producer's last sequence is still 5: 6 follows it, a gap does not
    assert pr.produce(6, [b"t2-6"]) == (0, 7)
    assert pr.produce(9, [b"gap"])[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert pr.produce(7, [b"t2-7"]) == (0, 8)
    # a retry of the batch at sequence 6 is a duplicate: its original offset, not appended again
    assert pr.produce(6, [b"t2-6"]) == (0, 7)
    pr.commit()
