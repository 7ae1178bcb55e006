"""Producer ids on a cluster (Kafka ZooKeeper mode's ZkProducerIdManager): every node hands out
ids from blocks of 1000 it claims in /latest_producer_id_block, so no two nodes ever give the
same id to two producers (an idempotent producer's sequences, a transactional id's fencing,
are per producer id in every partition).

A claim reads the znode (the last block anyone claimed; empty: none yet), and writes the next
block, [last + 1, last + 1000], at the version it read; a claim that lost the race to another
node reads again. A node claims its first block when it joins and its next one when a tenth of
the current block is left, so handing out an id never waits for ZooKeeper; if the block runs
out before the next claim is back (a thousand ids faster than one ZooKeeper round trip), an id
is refused with NoProducerIdBlock until it is (the request is answered with an error and
retried by the client)."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from kcoord.server.cluster import znodes
from kcoord.server.cluster.zk import BadVersionError, NodeExistsError

log = logging.getLogger("kcoord.cluster.producer_ids")

BLOCK_SIZE = 1000


class NoProducerIdBlock(OSError):
    """This node's block of producer ids is used up and the next one is not claimed yet."""


class ZkProducerIdBlocks:
    def __init__(self, zk: Any, broker_id: int, block_size: int = BLOCK_SIZE) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.block_size = block_size
        self._next = 0
        self._end = 0  # exclusive: the current block is [_next, _end)
        self._claimed: tuple[int, int] | None = None  # the next block, claimed ahead
        self._claiming: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Claim the first block (the node is joining)."""
        first, last = await self._claim()
        self._next, self._end = first, last + 1

    def take(self) -> int:
        """The next producer id; raises NoProducerIdBlock while none is claimed."""
        if self._next >= self._end and self._claimed is not None:
            (self._next, last), self._claimed = self._claimed, None
            self._end = last + 1
        if self._next >= self._end:
            self._claim_soon()
            raise NoProducerIdBlock("the producer id block is used up; claiming the next one")
        pid = self._next
        self._next += 1
        if self._end - self._next <= self.block_size // 10 and self._claimed is None:
            self._claim_soon()
        return pid

    def _claim_soon(self) -> None:
        if self._claiming is None or self._claiming.done():
            self._claiming = asyncio.ensure_future(self._claim_next())

    async def _claim_next(self) -> None:
        try:
            self._claimed = await self._claim()
        except Exception as e:  # noqa: BLE001 - claimed again at the next id handed out
            log.warning("Claiming a producer id block failed: %r", e)

    async def _claim(self) -> tuple[int, int]:
        while True:
            got = await self.zk.get_or_none(znodes.PRODUCER_ID_BLOCK)
            current = None if got is None else znodes.decode_producer_id_block(got[0])
            first = 0 if current is None else current[2] + 1
            last = first + self.block_size - 1
            data = znodes.encode_producer_id_block(self.broker_id, first, last)
            try:
                if got is None:
                    await self.zk.create(znodes.PRODUCER_ID_BLOCK, data, makepath=True)
                else:
                    await self.zk.set(znodes.PRODUCER_ID_BLOCK, data, version=got[1])
            except (BadVersionError, NodeExistsError):
                continue  # another node claimed one meanwhile: read again
            log.info("Claimed producer ids %d-%d", first, last)
            return first, last
