"""Replication (issue 23): partitions with several replicas, a leader and followers, Kafka's
ReplicaManager / Partition / ReplicaFetcherThread. docs/replication.md describes it."""
