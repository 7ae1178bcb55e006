"""Share-group consumption (KIP-932) beside consumer-group consumption of the same records, in
one run against one server: records per second

- through ShareFetch + ShareAcknowledge from three share consumers (raw requests: each fetch
  carries the explicit ACCEPT of everything the previous one acquired, so every
  acknowledgement is durable before the next records come), against
- plain Fetch + OffsetCommit of the same records by one consumer (the ceiling here: the same
  reads, and one durable commit per 500 records read, as a consumer committing after every
  poll of max.poll.records=500 makes; the share fetches ask for 500 records too).

Target (issue 25): share >= 50% of the ceiling. Also printed: the fdatasync calls on internal
topics (`kcoord_log_fsyncs{kind="internal"}`) during each phase beside the number of durable
writes asked for, which shows acknowledgements share group-committed fdatasyncs.
"""
from __future__ import annotations

import argparse
import re
import struct
import threading
import time
import urllib.request

from _util import SyncClient, create_topic, free_port, start_kcoord, stop, table
from kafka.protocol.consumer import FetchRequest, OffsetCommitRequest

from kcoord.protocol.share_messages import AlterShareGroupOffsetsRequest, ShareFetchRequest

TOPIC = "bench-share"
PARTITIONS = 2
ACCEPT = 1
POLL_RECORDS = 500  # max.poll.records; the share fetches' max_records


def produce(port: int, n: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 50, "batch.num.messages": 500})
    for i in range(n):
        p.produce(TOPIC, value=b"x" * 100, partition=i % PARTITIONS)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0


def fsyncs(metrics_port: int) -> int:
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).read().decode()
    m = re.search(r'^kcoord_log_fsyncs_total\{kind="internal"\} ([0-9.e+]+)$', text, re.M)
    return int(float(m.group(1))) if m else -1


def records_in(data: bytes) -> int:
    """Records in whole batches (record count at byte 57 of a v2 batch)."""
    pos, n = 0, 0
    while len(data) - pos >= 61:
        length = struct.unpack_from(">i", data, pos + 8)[0]
        n += struct.unpack_from(">i", data, pos + 57)[0]
        pos += 12 + length
    return n


def classic(port: int, total: int) -> tuple[float, int]:
    """One consumer: Fetch v12 of both partitions, then an OffsetCommit v8 per 500 records read."""
    c = SyncClient(port)
    offsets = dict.fromkeys(range(PARTITIONS), 0)
    got, commits = 0, 0
    FT, FP = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition
    CT = OffsetCommitRequest.OffsetCommitRequestTopic
    CP = CT.OffsetCommitRequestPartition
    started = time.perf_counter()
    while got < total:
        r = c.call(FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                                topics=[FT(topic=TOPIC, partitions=[FP(partition=p, current_leader_epoch=-1,
                                                                        fetch_offset=offsets[p], last_fetched_epoch=-1,
                                                                        log_start_offset=-1,
                                                                        partition_max_bytes=1 << 19)
                                                                     for p in range(PARTITIONS)])]), 12)
        read = 0
        for p in r.responses[0].partitions:
            data = bytes(p.records or b"")
            n = records_in(data)
            read += n
            offsets[p.partition_index] += n
        got += read
        # a Java consumer hands out max.poll.records (500) per poll and commits after each
        for _ in range(max(1, -(-read // POLL_RECORDS))):
            c.call(OffsetCommitRequest(group_id="bench-classic", generation_id_or_member_epoch=-1, member_id="",
                                       group_instance_id=None, topics=[CT(name=TOPIC, partitions=[
                                           CP(partition_index=p, committed_offset=o, committed_leader_epoch=-1,
                                              committed_metadata="") for p, o in offsets.items()])]), 8)
            commits += 1
    elapsed = time.perf_counter() - started
    c.close()
    return got / elapsed, commits


def share(port: int, total: int, consumers: int, topic_id) -> tuple[float, int]:
    """`consumers` share consumers; each ShareFetch accepts what the previous one acquired."""
    c = SyncClient(port)
    T = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
    r = c.call(AlterShareGroupOffsetsRequest(group_id="bench-share", topics=[T(topic_name=TOPIC, partitions=[
        T.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=0) for p in range(PARTITIONS)])]), 0)
    assert r.error_code == 0, r
    c.close()
    accepted = [0] * consumers
    acks = [0] * consumers
    done = threading.Event()
    finished: list[float] = []  # when the last record was accepted
    FP = ShareFetchRequest.FetchTopic.FetchPartition

    def run(i: int) -> None:
        cl = SyncClient(port)
        epoch, pending = 0, {}
        while not done.is_set():
            parts = [FP(partition_index=p, acknowledgement_batches=[
                FP.AcknowledgementBatch(first_offset=f, last_offset=t, acknowledge_types=[ACCEPT])
                for f, t in pending.get(p, [])]) for p in range(PARTITIONS)]
            resp = cl.call(ShareFetchRequest(
                version=2, group_id="bench-share", member_id=f"m{i}", share_session_epoch=epoch, max_wait_ms=200,
                min_bytes=1, max_bytes=1 << 20, max_records=POLL_RECORDS, batch_size=POLL_RECORDS, share_acquire_mode=0,
                is_renew_ack=False, topics=[ShareFetchRequest.FetchTopic(topic_id=topic_id, partitions=parts)]
                if epoch == 0 or pending else [], forgotten_topics_data=[]), 2)
            assert resp.error_code == 0, resp
            if pending:
                acks[i] += 1
                accepted[i] += sum(t - f + 1 for rs in pending.values() for f, t in rs)
                if sum(accepted) >= total and not done.is_set():
                    finished.append(time.perf_counter())
                    done.set()
            epoch = 1 if epoch == 0 else epoch + 1
            pending = {}
            for t in resp.responses:
                for p in t.partitions:
                    assert p.acknowledge_error_code == 0, p
                    if p.acquired_records:
                        pending[p.partition_index] = [(a.first_offset, a.last_offset) for a in p.acquired_records]
        cl.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # until the last acceptance: not the long polls the other consumers then wait out (max_wait_ms)
    elapsed = finished[0] - started
    return sum(accepted) / elapsed, sum(acks)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--consumers", type=int, default=3)
    args = ap.parse_args()
    metrics_port = free_port()
    proc, port, _ = start_kcoord({"kcoord.metrics.listener": f"127.0.0.1:{metrics_port}"})
    try:
        create_topic(port, TOPIC, PARTITIONS)
        produce(port, args.records)
        from kafka.protocol.metadata import MetadataRequest

        c = SyncClient(port)
        md = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=None, name=TOPIC)],
                                    allow_auto_topic_creation=False, include_topic_authorized_operations=False), 12)
        topic_id = md.topics[0].topic_id
        c.close()
        s0 = fsyncs(metrics_port)
        classic_rate, commits = classic(port, args.records)
        s1 = fsyncs(metrics_port)
        share_rate, acks = share(port, args.records, args.consumers, topic_id)
        s2 = fsyncs(metrics_port)
        print(f"{args.records:,} records of 100 bytes on {PARTITIONS} partitions, one server, one run")
        print(table(["consumption", "records/s", "% of ceiling", "durable writes", "internal fdatasyncs"], [
            ["Fetch + OffsetCommit, 1 consumer (ceiling)", classic_rate, 100.0, commits, s1 - s0],
            [f"ShareFetch + ACCEPT, {args.consumers} share consumers", share_rate, 100.0 * share_rate / classic_rate,
             acks, s2 - s1],
        ]))
        print(f"target: share >= 50% of the ceiling -> {'met' if share_rate >= 0.5 * classic_rate else 'NOT met'}")
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
