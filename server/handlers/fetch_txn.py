"""What Fetch does for transactions (called by server/handlers/fetch.py), as Kafka's
LocalLog.read with FetchIsolation.TXN_COMMITTED does:

- Every partition reports its last stable offset (LSO: the first offset of the oldest open
  transaction, the log end offset when none is open).
- isolation_level=1 (read_committed) returns only the batches that start below the LSO, and
  the aborted transactions overlapping what it returns (producer id and first offset, from
  the partition's transaction index) so the consumer can drop their records; an empty read
  reports none. read_uncommitted reads to the log end and reports no aborted transactions.
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from kafka.protocol.consumer import FetchResponse

from kcoord.storage.log import PartitionLog

if TYPE_CHECKING:
    from kcoord.server.data_plane import DataPlane

READ_COMMITTED = 1
_BASE_AND_LENGTH = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")
Aborted = FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction


def lso(dp: DataPlane, topic: str, partition: int, plog: PartitionLog) -> int:
    return dp.txns.lso(topic, partition, plog)


def below(data: bytes, limit: int) -> tuple[bytes, int]:
    """The whole batches of `data` that start below offset `limit`, and the offset after the
    last one kept (-1 when none is)."""
    pos, n, end = 0, len(data), -1
    while n - pos >= 27:
        base, length = _BASE_AND_LENGTH.unpack_from(data, pos)
        if base >= limit:
            break
        end = base + _LAST_DELTA.unpack_from(data, pos + 23)[0] + 1
        pos += length + 12
    return (data if pos >= n else data[:pos]), end


def committed_read(dp: DataPlane, topic: str, partition: int, plog: PartitionLog, offset: int,
                   data: bytes, stable: int) -> tuple[bytes, list[Aborted]]:
    """A read_committed view of `data` (read at `offset`): the part below the LSO and the
    aborted transactions it overlaps."""
    if stable >= plog.log_end_offset and not data:
        return data, []
    data, upper = below(data, stable)
    if not data:
        return data, []
    state = dp.txns.loaded(topic, partition)
    if state is None or not state.aborted:
        return data, []
    return data, [Aborted(producer_id=e.producer_id, first_offset=e.first_offset)
                  for e in state.collect_aborted(offset, upper)]
