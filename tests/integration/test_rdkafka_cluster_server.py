"""scripts/rdkafka_suite.py's three-node cluster for librdkafka's three-broker tests: what the
test runner is given (every node's listener of each protocol, BROKER_ADDRESS_<id>, ZK_ADDRESS),
the nodes set up as librdkafka's clusters (SASL/PLAIN on SASL_PLAINTEXT, broker.rack=RACK<id>,
replication factor 3), a node that stops answering replaced with the whole cluster, and the
cluster stopped when no test id uses it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import rdkafka_security as sec  # noqa: E402
import rdkafka_suite as suite  # noqa: E402

pytestmark = pytest.mark.integration


def test_the_suite_cluster_serves_three_nodes_as_librdkafka_clusters_are(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    conf = suite.load_suite_toml()["cluster"]
    server = suite.ClusterServer("default", tmp_path, {k: str(v) for k, v in conf["settings"].items()}, None,
                                 conf["nodes"], conf["node_settings"])
    try:
        addresses = server.acquire()
        assert set(addresses) == {"PLAINTEXT", "SASL_PLAINTEXT"}
        for bootstrap in addresses.values():
            assert len(bootstrap.split(",")) == 3
        assert all(suite.answers(int(a.rsplit(":", 1)[1])) for a in addresses["PLAINTEXT"].split(","))
        env = server.env("SASL_PLAINTEXT")
        assert [env[f"BROKER_ADDRESS_{i}"] for i in (1, 2, 3)] == addresses["SASL_PLAINTEXT"].split(",")
        assert env["ZK_ADDRESS"] == server.cluster.zookeeper

        # As 0142 connects: SASL/PLAIN with the suite's user; a topic of replication factor 3.
        lines, _ = sec.client("SASL_PLAINTEXT", None)
        client = dict(line.split("=", 1) for line in lines)
        admin = AdminClient({"bootstrap.servers": addresses["SASL_PLAINTEXT"], **client})
        admin.create_topics([NewTopic("rf3", 2, 3)])["rf3"].result(60)
        md = admin.list_topics("rf3", timeout=30)
        assert all(len(p.replicas) == 3 for p in md.topics["rf3"].partitions.values())
        racks = admin.describe_configs([ConfigResource("BROKER", "2")])
        entries = next(iter(racks.values())).result(30)
        assert entries["broker.rack"].value == "RACK2"

        # A node gone: the next test id gets a fresh cluster.
        first = server.cluster
        server.cluster.kill(2)
        again = server.ensure()
        assert server.restarts == 1 and server.cluster is not first
        assert all(suite.answers(int(a.rsplit(":", 1)[1])) for a in again["PLAINTEXT"].split(","))
    finally:
        nodes = list(server.cluster.nodes.values()) if server.cluster else []
        server.release()
    assert server.cluster is None and nodes and not any(n.alive() for n in nodes)
