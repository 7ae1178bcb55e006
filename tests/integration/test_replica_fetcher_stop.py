"""A replica fetcher stops when told, even when its task swallows the cancellation.

Python 3.11's asyncio.wait_for returns the result instead of raising when the task is
cancelled in the same loop turn as the awaited operation completes (a fetch answer arriving, a
wake-up): the fetcher's loop then went on forever, its stop() never returned, and a node's
SIGTERM shutdown hung after "Controlled shutdown ... succeeded" until it was SIGKILLed (found
by the Jepsen-style test, test_jepsen.py). Here the cancellation lands while the fetcher waits
in its back-off (its leader's endpoint unknown) in the same turn as a wake-up."""
from __future__ import annotations

import asyncio

from test_replication_cluster import cluster, until  # noqa: F401 - the fixture


async def test_a_fetcher_stops_even_when_its_cancellation_is_swallowed(cluster):  # noqa: F811
    ctl = cluster
    rm = ctl.rm(2)
    await until(lambda: 1 in rm.fetchers.fetchers, "node 2 to fetch from node 1")
    fetcher = rm.fetchers.fetchers[1]
    rm.endpoints.pop(1)  # no connection: the fetcher backs off in a loop
    fetcher._client = None  # noqa: SLF001 - the next turn asks for a connection again
    for _ in range(20):
        await asyncio.sleep(0.05)
    fetcher.wake()  # completes the back-off's wait in the same turn as stop()'s cancel
    stopping = asyncio.ensure_future(fetcher.stop())
    done, _ = await asyncio.wait({stopping}, timeout=10)
    assert stopping in done, "the fetcher's stop() did not return"
    assert fetcher._task.done()  # noqa: SLF001
    rm.endpoints[1] = ctl.nodes[1].bound[0]
