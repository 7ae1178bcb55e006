"""Property: start-up loading replays only the last value of each key (Kafka's
loadGroupsAndOffsets); for any history the coordinator writes, that rebuilds exactly the state
a replay of every record rebuilds, and so the live state."""
from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "unit"))

from test_group_helpers import Harness  # noqa: E402
from test_group_replay import apply, op, snapshot  # noqa: E402

from kcoord.protocol.coordinator_codec import decode_record, encode_key, encode_value  # noqa: E402
from kcoord.server.clock import FakeClock  # noqa: E402
from kcoord.server.coordinator.runtime import keep_latest  # noqa: E402
from kcoord.server.group.coordinator import GroupCoordinator  # noqa: E402


def reload_latest_per_key(h: Harness) -> GroupCoordinator:
    fresh = GroupCoordinator(h.config, FakeClock(h.clock.now_ms() + 12345), h.coord.num_partitions)
    latest_by_partition: dict[int, dict[bytes, bytes | None]] = {}
    for r in h.log:  # through the real bytes, as the log holds them
        key = encode_key(r.key)
        value = None if r.value is None else encode_value(r.value)
        keep_latest(latest_by_partition.setdefault(fresh.partition_of(r.key.group), {}), key, value)
    for p in range(fresh.num_partitions):
        fresh.begin_loading(p)
        for key, value in latest_by_partition.get(p, {}).items():
            record = decode_record(key, value)
            if record is not None:
                fresh.replay(record)
        fresh.end_loading(p)
    return fresh


@settings(max_examples=int(os.environ.get("KCOORD_PROPERTY_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=25))
def test_latest_per_key_loading_rebuilds_the_live_state(actions: list[tuple]) -> None:
    h = Harness(group_initial_rebalance_delay_ms=0, offsets_retention_minutes=1)
    for action in actions:
        apply(h, action)
    assert snapshot(reload_latest_per_key(h)) == snapshot(h.coord)
