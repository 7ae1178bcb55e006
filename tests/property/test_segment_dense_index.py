"""The active segment's dense batch index (storage/segment.py) answers every read exactly as
the sparse index and header reads do once the segment is sealed: same bytes for any offset,
max_bytes and min_one_batch, same batch start positions."""
from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.storage.batch import build_batch, split_batches
from kcoord.storage.segment import LogSegment

batches = st.lists(st.lists(st.binary(max_size=300), min_size=1, max_size=8), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches, interval=st.sampled_from([0, 64, 4096]),
       reads=st.lists(st.tuples(st.integers(0, 220), st.integers(0, 4000), st.booleans()), min_size=1, max_size=30),
       reopen=st.booleans(), limit=st.sampled_from([3, 1 << 20]))
def test_dense_and_sparse_reads_agree(batches, interval, reads, reopen, limit):
    # limit: the dense index's cap (LogSegment.dense_limit); past it the sparse index serves
    with tempfile.TemporaryDirectory() as d:
        seg = LogSegment(d, 5, index_interval_bytes=interval, create=True)
        seg.dense_limit = limit
        offset = 5
        for values in batches:
            data = build_batch([(b"k", v, 1000) for v in values], offset, 0)
            seg.append(data, split_batches(data))
            offset += len(values)
        if reopen:  # the dense index rebuilt by recovery, as at start-up
            seg.close()
            seg = LogSegment(d, 5, index_interval_bytes=interval)
            seg.dense_limit = limit
            assert seg.recover() == 0
        assert seg._dense == (len(batches) <= limit)
        reads = [(5 + o, m, one) for o, m, one in reads]
        dense = [seg.read(o, m, one) for o, m, one in reads]
        starts = [seg.batch_start(o) for o, _, _ in reads]
        seg.seal()
        assert not seg._dense
        assert [seg.read(o, m, one) for o, m, one in reads] == dense
        assert [seg.batch_start(o) for o, _, _ in reads] == starts
        seg.close()
