"""The chained ETL that used to fall into a slow mode (issue 28): consumer groups of
confluent-kafka (cooperative-sticky, KIP-848) and kafka-python members chained through three
topics of 7-31 partitions, each member consuming, producing onward with an idempotent acks=all
producer and committing (kcoord/testing/etl.py). Every produce used to wait for an fdatasync and
every fetch read batch headers one pread at a time, so the requests grew slower as the batches
grew smaller, and the chain could crawl at full server CPU. It must finish, every time, well
within a deadline generous enough for a busy machine."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer, TopicPartition
from conftest import KcoordProcess

from kcoord.testing.etl import STAGES, TOPICS, create_topics, run_chain

pytestmark = pytest.mark.integration

RECORDS = 60_000
DEADLINE_S = 300.0


def end_offsets(bootstrap: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "etl-check"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(TOPICS[topic])]
    finally:
        c.close()


def test_the_chained_etl_finishes_within_its_deadline(tmp_path):
    srv = KcoordProcess(tmp_path / "data").start()
    try:
        create_topics(srv.bootstrap)
        r = run_chain(srv.bootstrap, RECORDS, 20, STAGES, DEADLINE_S)
        assert srv.alive(), srv.log_text()[-3000:]
        assert r["finished"], f"the chain did not finish in {DEADLINE_S:.0f} s: {r}"
        # every record went all the way (at least once: a rebalance may repeat some)
        assert sum(end_offsets(srv.bootstrap, "etl-a")) == RECORDS
        assert sum(end_offsets(srv.bootstrap, "etl-c")) >= RECORDS
        assert r["consumed"] >= RECORDS
        print(f"\nETL of {RECORDS:,} records through 3 groups: {r['wall']:.1f} s")
    finally:
        srv.stop()
