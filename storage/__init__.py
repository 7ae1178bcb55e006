"""Append-only partition logs in Kafka's on-disk format: segments, recovery, reading,
retention, group-commit durability, and a dump tool for __consumer_offsets."""
