"""Which config names Apache Kafka's broker knows: the data file beside this module
(kafka_broker_config_names.txt, made from Kafka's ConfigDefs by scripts/kafka_config_names.py).

kcoord reads the settings it uses (server/config.py) and ignores the rest; of those, a name
Kafka knows (offsets.topic.replication.factor, log.cleaner.threads, zookeeper.connect, ...) is
ignored quietly, as a config file written for Kafka is expected to carry them, and only a name
Kafka does not know gets Kafka's warning ("was supplied but isn't a known config")."""
from __future__ import annotations

from functools import cache
from pathlib import Path

_DATA = Path(__file__).with_name("kafka_broker_config_names.txt")


@cache
def kafka_broker_config_names() -> frozenset[str]:
    return frozenset(line.strip() for line in _DATA.read_text().splitlines()
                     if line.strip() and not line.startswith("#"))


def known_to_kafka(name: str) -> bool:
    """A broker config name of Kafka's, also with a listener prefix
    (listener.name.<listener>.<name>, listener.name.<listener>.<mechanism>.<name>)."""
    names = kafka_broker_config_names()
    if name in names:
        return True
    if name.startswith("listener.name."):
        parts = name[len("listener.name."):].split(".", 2)
        if len(parts) >= 2 and parts[0]:
            rest = ".".join(parts[1:])
            return rest in names or (len(parts) == 3 and parts[2] in names)
    return False
