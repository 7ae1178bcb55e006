"""kcoord demo clients (confluent-kafka): `produce` writes N messages to a topic; `consume`
joins a consumer group, prints what it reads and commits after each message.

    python examples/python/demo.py produce demo 100
    python examples/python/demo.py consume demo demo-group [MAX_MESSAGES]

The broker address comes from KAFKA_BOOTSTRAP (default 127.0.0.1:9092).
"""
from __future__ import annotations

import os
import sys

from confluent_kafka import Consumer, Producer

BOOTSTRAP = os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:9092")


def produce(topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(n):
        p.produce(topic, key=f"key-{i}".encode(), value=f"message {i}".encode())
        p.poll(0)
    p.flush(30)
    print(f"produced {n} messages to {topic}", flush=True)


def consume(topic: str, group: str, limit: int) -> None:
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    seen = 0
    try:
        while limit <= 0 or seen < limit:
            msg = c.poll(1.0)
            if msg is None or msg.error():
                continue
            print(f"{msg.topic()}[{msg.partition()}]@{msg.offset()} {msg.key().decode()} = {msg.value().decode()}",
                  flush=True)
            c.commit(message=msg, asynchronous=False)
            seen += 1
    finally:
        c.close()


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "produce":
        produce(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "consume":
        consume(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    else:
        sys.exit(__doc__)
