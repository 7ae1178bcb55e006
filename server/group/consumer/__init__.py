"""The consumer group type (KIP-848): members heartbeat with ConsumerGroupHeartbeat, the
coordinator computes the assignment (assignors.py) and walks each member to it (reconcile.py);
stored as the ConsumerGroup* records of __consumer_offsets (Kafka's ConsumerGroup)."""
