"""A partition refuses a transaction marker from an older coordinator epoch than the last
one its producer state saw for that producer (Kafka's ProducerAppendInfo
checkCoordinatorEpoch: TRANSACTION_COORDINATOR_FENCED), in a data partition and in
__consumer_offsets alike, and nothing is appended; the epoch survives a reload of the
producer state from the log. Over a real broker's marker path (the one WriteTxnMarkers
uses) and real logs in tmp_path. On one node every marker carries epoch 0: nothing changes."""
from __future__ import annotations

from test_txn_broker import begin, loaded, markers
from test_txn_broker import broker as broker  # the fixture
from txn_client import TxnClient

from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.deferred import wait
from kcoord.server.producers import PartitionProducerState
from kcoord.storage.log import PartitionLog
from kcoord.storage.txn_batches import build_marker, build_transactional_batch

PID, PEPOCH = 4242, 1


async def write(b, tp: tuple[str, int], coordinator_epoch: int, commit: bool = False) -> E | None:
    writer = b.parts.txn.get().markers
    (d,) = writer.write_here(PID, PEPOCH, commit, [tp], coordinator_epoch).values()
    return await wait(d)


async def test_a_marker_from_an_older_coordinator_epoch_is_fenced(broker):
    c = TxnClient(broker)
    await begin(c, "a")  # __transaction_state and __consumer_offsets exist and are loaded
    await loaded(broker)
    for tp in (("t", 0), (OFFSETS_TOPIC, 0)):
        assert await write(broker, tp, 5) is None
        before = markers(broker, *tp)
        assert await write(broker, tp, 4) == E.TRANSACTION_COORDINATOR_FENCED
        assert markers(broker, *tp) == before  # nothing appended
        assert await write(broker, tp, 5) is None  # the same epoch again, and newer ones, pass
        assert await write(broker, tp, 6) is None
        assert await write(broker, tp, 5) == E.TRANSACTION_COORDINATOR_FENCED
    # another producer's markers are not fenced by this one's epoch
    writer = broker.parts.txn.get().markers
    (d,) = writer.write_here(PID + 1, 0, False, [("t", 0)], 0).values()
    assert await wait(d) is None


def test_the_coordinator_epoch_is_loaded_from_the_log(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    try:
        plog.append_batches(build_transactional_batch([(b"k", b"v")], PID, PEPOCH, 1000), None, 0)
        plog.append_batches(build_marker(PID, PEPOCH, True, 7, 1000), None, 0)
        state = PartitionProducerState("t", 0)
        state.load(plog, 1000)
        assert state.entries[PID].coordinator_epoch == 7
        state.check_marker(PID, 7)
        try:
            state.check_marker(PID, 6)
            raise AssertionError("an older coordinator epoch passed")
        except Exception as e:  # noqa: BLE001
            assert getattr(e, "code", None) == E.TRANSACTION_COORDINATOR_FENCED
        state.check_marker(PID + 1, 0)  # unknown producer: nothing to fence with
        # a follower's replicated marker (epoch not read) keeps the known epoch
        state.apply_marker(PID, PEPOCH, 1001)
        assert state.entries[PID].coordinator_epoch == 7
    finally:
        plog.close()
