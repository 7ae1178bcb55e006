"""The cluster layer (ZooKeeper mode, docs/cluster.md): membership, the controller and the
metadata a node learns from it. Unused while `zookeeper.connect` is unset (one node)."""
