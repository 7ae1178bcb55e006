"""Without zookeeper.connect a server is one node as before: nothing of the cluster layer
(nor its ZooKeeper client) is imported, and Metadata names this node alone."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_server_without_zookeeper_connect_imports_no_cluster_code(tmp_path):
    code = """
import asyncio, sys
from kafka.admin import KafkaAdminClient
from kcoord.server.app import Server
from kcoord.server.config import Config

async def main():
    srv = Server(Config({"log.dirs": sys.argv[1], "listeners": "PLAINTEXT://127.0.0.1:0"}))
    await srv.start()
    host, port = srv.bound[0]
    def describe():
        admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=10000)
        try:
            return admin.describe_cluster()
        finally:
            admin.close()
    cluster = await asyncio.get_running_loop().run_in_executor(None, describe)
    assert [b.get("node_id", b.get("broker_id")) for b in cluster["brokers"]] == [1] and cluster["controller_id"] == 1, cluster
    await srv.stop()
    loaded = sorted(m for m in sys.modules if m.startswith(("kcoord.server.cluster", "kazoo")))
    assert not loaded, loaded
    print("ok")

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "data")], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
