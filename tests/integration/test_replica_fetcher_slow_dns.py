"""A follower whose leaders' host names resolve slowly, or not at all, still stops at once.

In docker compose a stopped node's container name is looked up by Docker's DNS, which forwards
it to resolvers that do not answer: a lookup takes ~10 s. The fetchers resolved through
asyncio.open_connection (loop.getaddrinfo in the default executor): stopping cancelled the
wait but not the thread, asyncio.run's exit then waited for it (the process lived on for
seconds after "kcoord shut down"), and the abandoned lookup's gaierror was logged as an ERROR
"Future exception was never retrieved".

Here a child process (a real asyncio.run, as the node's main) runs a ReplicaManager following
two partitions: leader 2's name fails to resolve at once, leader 3's lookup blocks 20 s. The
child's socket.getaddrinfo is replaced by one that behaves so for those two names (what a
resolver does, without depending on the machine's DNS). Checked: stop() returns and the
process exits within seconds, leader 2's failures are one WARNING line, and nothing is logged
at ERROR."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CHILD = textwrap.dedent('''
    import asyncio, logging, socket, sys, threading, time

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
    real = socket.getaddrinfo
    calls = {"bad-leader.test": 0, "slow-leader.test": 0}
    blocked = threading.Event()

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "bad-leader.test":
            calls[host] += 1
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if host == "slow-leader.test":
            calls[host] += 1
            blocked.set()
            time.sleep(20)  # an unanswering resolver's timeouts
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, port, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo

    from kcoord.server.clock import SystemClock
    from kcoord.server.cluster.partition_state import PartitionState
    from kcoord.server.replication.replica_manager import DataHooks, ReplicaManager, ReplicationSettings
    from kcoord.storage.log_manager import LogManager

    async def main():
        logs = LogManager(sys.argv[1])
        for p in (0, 1):
            logs.create("t", p)

        async def alter_isr(state, isr):
            return None

        hooks = DataHooks(log_for=lambda t, p: logs.get(t, p), woken=lambda t, p: None,
                          truncated=lambda t, p: None, replicated=lambda *a: None)
        rm = ReplicaManager(1, SystemClock(), alter_isr, hooks, ReplicationSettings(replica_fetch_backoff_ms=50))
        rm.start()
        rm.apply([PartitionState("t", 0, 2, 1, (1, 2), (1, 2), 1, 0),
                  PartitionState("t", 1, 3, 1, (1, 3), (1, 3), 1, 0)],
                 {2: ("bad-leader.test", 9092), 3: ("slow-leader.test", 9092)})
        deadline = time.monotonic() + 30
        while (calls["bad-leader.test"] < 5 or not blocked.is_set()) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert calls["bad-leader.test"] >= 5 and blocked.is_set(), calls
        started = time.monotonic()
        await rm.stop()
        print(f"stopped {time.monotonic() - started:.3f}", flush=True)
        logs.close()

    asyncio.run(main())
    print("exiting", flush=True)
''')


def test_stopping_does_not_wait_for_slow_name_resolution(tmp_path):
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    stopped_at = None
    lines = []
    assert child.stdout is not None
    for line in child.stdout:
        lines.append(line.strip())
        if line.startswith("stopped"):
            stopped_at = time.monotonic()
    out, err = child.communicate(timeout=60)
    exited_at = time.monotonic()
    assert child.returncode == 0, err
    assert stopped_at is not None, (lines, err)
    stop_s = float(lines[0].split()[1])
    assert stop_s < 2.0, f"the replica manager took {stop_s:.1f} s to stop"
    assert exited_at - stopped_at < 5.0, f"the process lived {exited_at - stopped_at:.1f} s after stopping"
    assert exited_at - started < 20.0, "the process waited for the blocked lookup"  # it blocks 20 s
    records = err.splitlines()
    assert not [r for r in records if r.startswith(("ERROR", "CRITICAL")) or "never retrieved" in r
                or "Traceback" in r], err
    warnings = [r for r in records if r.startswith("WARNING") and "bad-leader.test" in r]
    assert len(warnings) == 1, err
