"""server/cluster/stray_logs.py: which local topics are strays, and when a log directory's
data counts as the cluster's (meta.properties' cluster.id against /cluster/id)."""
from __future__ import annotations

import uuid

from kcoord.server.cluster import znodes
from kcoord.server.cluster.stray_logs import belongs, gone, meta_cluster_id, recreated
from kcoord.server.topics import Topic, load_or_create_meta


def test_gone_and_recreated():
    a, b = uuid.uuid4(), uuid.uuid4()
    local = {"t": Topic("t", a, 1), "u": Topic("u", a, 1), "__consumer_offsets": Topic("__consumer_offsets", b, 3)}
    cluster = {"u": znodes.TopicAssignment("u", b, {0: (1,)})}
    assert gone(local, cluster) == ["t"]  # internal topics are every node's own until the cluster's arrive
    assert recreated(local["u"], cluster["u"])
    assert not recreated(local["__consumer_offsets"], znodes.TopicAssignment("__consumer_offsets", a, {0: (1,)}))
    assert not recreated(Topic("u", b, 1), cluster["u"])


def test_a_fresh_directory_joins_the_cluster_and_one_with_topics_of_its_own_does_not(tmp_path):
    fresh, used = tmp_path / "fresh", tmp_path / "used"
    fresh.mkdir()
    used.mkdir()
    load_or_create_meta(fresh, 1)
    load_or_create_meta(used, 2)
    assert meta_cluster_id(fresh) != "CLUSTER"
    assert belongs(fresh, "CLUSTER", ["__consumer_offsets"])
    assert meta_cluster_id(fresh) == "CLUSTER"
    assert load_or_create_meta(fresh, 1) == "CLUSTER"  # the next start-up reads it back
    assert belongs(fresh, "CLUSTER", ["orders"])  # from now on its topics are the cluster's
    own = meta_cluster_id(used)
    assert not belongs(used, "CLUSTER", ["orders", "__consumer_offsets"])
    assert meta_cluster_id(used) == own
    assert not belongs(used, "CLUSTER", [], configured_id=own)  # a configured cluster.id is left alone
