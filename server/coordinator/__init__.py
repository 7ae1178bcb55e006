"""The coordinator runtime, generic over a shard (Kafka's CoordinatorRuntime): the group
coordinator over __consumer_offsets and the transaction coordinator over __transaction_state
both run on it. result.py: what a shard's method hands back; writer.py: durable, coalesced
appends of its records; runtime.py: submitting results, loading partitions, periodic tasks."""
