"""Group -> __consumer_offsets partition, exactly as Kafka computes it.

Kafka: `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`, where String.hashCode
runs over UTF-16 code units with signed 32-bit overflow.
"""
from __future__ import annotations

INT_MIN = -(2**31)


def java_string_hashcode(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 instead of overflowing."""
    return 0 if n == INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions
