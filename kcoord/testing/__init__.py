"""kcoord for test suites: the pytest plugin (plugin.py, registered as the `pytest11` entry
point `kcoord`), the server as a child process (process.py), and the control API's clients.

    def test_commit_survives_a_coordinator_error(kcoord):
        kcoord.control.inject_error("OffsetCommit", "NOT_COORDINATOR", count=3)
        consumer = Consumer({"bootstrap.servers": kcoord.bootstrap, ...})
"""
from kcoord.server.control.client import AsyncControlClient, ControlClient, ControlError
from kcoord.testing.process import KcoordProcess, free_port

__all__ = ["AsyncControlClient", "ControlClient", "ControlError", "KcoordProcess", "free_port"]
