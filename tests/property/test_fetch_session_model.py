"""Random sequences of incremental fetches (partitions added, altered, forgotten; records
produced and log starts moved between them) answer, for every partition that changed, exactly
what a sessionless full fetch of the session's partitions answers at that moment, and leave out
exactly the partitions with nothing new (no records, no error, the high watermark and log start
offset last sent) — KIP-227's rule, checked against a model of what the client was sent."""
from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DeleteRecordsRequest
from kafka.protocol.consumer import FetchRequest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "unit"))

from test_produce_helpers import batch, call, fetch_req, make_broker, produce  # noqa: E402

from kcoord.protocol.api import ApiKey  # noqa: E402

PARTS = 5

step = st.one_of(
    st.tuples(st.just("produce"), st.integers(0, PARTS - 1), st.integers(1, 4)),
    st.tuples(st.just("alter"), st.integers(0, PARTS - 1), st.one_of(st.just(-1), st.integers(0, 12))),  # -1: log end
    st.tuples(st.just("catch_up"), st.just(0), st.just(0)),  # every session partition to its log end
    st.tuples(st.just("forget"), st.integers(0, PARTS - 1), st.just(0)),
    st.tuples(st.just("trim"), st.integers(0, PARTS - 1), st.integers(0, 12)),  # DeleteRecords, clipped
    st.tuples(st.just("fetch"), st.just(0), st.just(0)),
)


def by_partition(resp) -> dict[int, tuple]:
    return {p.partition_index: (p.error_code, p.high_watermark, p.log_start_offset, p.records or b"")
            for t in resp.responses for p in t.partitions}


async def scenario(tmp: Path, initial: list[int], steps: list[tuple[str, int, int]], version: int) -> None:
    b = await make_broker(tmp)
    try:
        await b.deleter.finish_all()
        b.create_topic("m", PARTS, {})
        key = b.topics.get("m").topic_id if version >= 13 else "m"
        offsets = {p: 0 for p in initial}  # the model session: partition -> fetch offset
        resp = await call(b, ApiKey.FETCH, fetch_req([(key, p, 0) for p in initial], session_id=0, session_epoch=0,
                                                     version=version), version)
        sid, epoch = resp.session_id, 1
        assert sid != 0
        sent = {p: (row[1] if row[0] == 0 else -1, row[2]) for p, row in by_partition(resp).items()}
        pending: dict[int, int] = {}
        forgotten: set[int] = set()
        for op, p, n in steps + [("fetch", 0, 0)]:
            plog = b.logs.get("m", p)
            if op == "produce":
                await produce(b, "m", p, batch([b"v%d" % i for i in range(n)]))
            elif op == "alter":
                pending[p] = plog.log_end_offset if n < 0 else n
                forgotten.discard(p)
            elif op == "catch_up":
                for q in set(offsets) - forgotten:
                    pending[q] = b.logs.get("m", q).log_end_offset
            elif op == "forget":
                if p in offsets and len(set(offsets) - forgotten - {p}) + len(set(pending) - {p}) > 0:
                    forgotten.add(p)
                    pending.pop(p, None)
            elif op == "trim" and plog.log_start_offset < plog.log_end_offset:
                n = max(plog.log_start_offset + 1, min(n, plog.log_end_offset))
                T = DeleteRecordsRequest.DeleteRecordsTopic
                req = DeleteRecordsRequest(version=2, timeout_ms=5000, topics=[
                    T(name="m", partitions=[T.DeleteRecordsPartition(partition_index=p, offset=n)])])
                await call(b, ApiKey.DELETE_RECORDS, req, 2)
            elif op == "fetch":
                for q in forgotten:
                    offsets.pop(q, None)
                    sent.pop(q, None)
                offsets.update(pending)
                # the model: what a full fetch of the session's partitions answers now
                full = await call(b, ApiKey.FETCH, fetch_req([(key, q, o) for q, o in sorted(offsets.items())],
                                                             version=version), version)
                want = {}
                for q, row in by_partition(full).items():
                    last = sent.get(q, (-1, -1))
                    if row[0] != 0 or row[3] or (row[1], row[2]) != last:
                        want[q] = row
                        sent[q] = (row[1] if row[0] == 0 else -1, row[2])
                req = fetch_req([(key, q, o) for q, o in sorted(pending.items())], session_id=sid,
                                session_epoch=epoch, version=version)
                fkey = "topic_id" if version >= 13 else "topic"
                req.forgotten_topics_data = ([FetchRequest.ForgottenTopic(**{fkey: key}, partitions=sorted(forgotten))]
                                             if forgotten else [])
                resp = await call(b, ApiKey.FETCH, req, version)
                assert resp.error_code == 0 and resp.session_id == sid
                assert by_partition(resp) == want, (steps, offsets)
                epoch += 1
                pending, forgotten = {}, set()
    finally:
        await b.stop()


@settings(max_examples=int(os.environ.get("KCOORD_PROPERTY_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.lists(st.integers(0, PARTS - 1), min_size=1, max_size=PARTS, unique=True),
       steps=st.lists(step, max_size=30), version=st.sampled_from([12, 13]))
def test_incremental_fetches_answer_what_changed(initial, steps, version):
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(scenario(Path(d), initial, steps, version))
