"""Kafka's ZooKeeper layout (ZooKeeper mode, Kafka 2.x-3.x): the znode paths and the JSON each
holds, encoded and decoded here and nowhere else, so `zookeeper-shell` shows what it shows on a
Kafka cluster.

    /cluster/id                                   {"version":"1","id":CLUSTER_ID}
    /controller                 (ephemeral)       {"version":2,"brokerid":ID,"timestamp":MS,"kraftControllerEpoch":-1}
    /controller_epoch                             "N" (a decimal number)
    /brokers/ids/<id>           (ephemeral)       endpoints, listener map, rack, version 5
    /brokers/topics/<T>                           {"version":3,"topic_id":..,"partitions":{"0":[1,2]},..}
    /brokers/topics/<T>/partitions/<P>/state      {"controller_epoch":..,"leader":..,"version":1,
                                                   "leader_epoch":..,"isr":[..]}
    /admin/delete_topics/<T>                      (empty: a deletion the controller carries out)
    /config/topics/<T>                            {"version":1,"config":{..}}
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"topics/T"}
"""
from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass, field

from kcoord.server.cluster.partition_state import PartitionState

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
DELETE_TOPICS = "/admin/delete_topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
ISR_CHANGES = "/isr_change_notification"
# what a Kafka broker creates at start-up (KafkaZkClient's persistent paths)
# (not /admin/reassign_partitions: its existence is a reassignment request for the controller)
PERSISTENT = ("/consumers", BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS,
              "/brokers/seqid", ISR_CHANGES, "/latest_producer_id_block", "/log_dir_event_notification",
              CONFIG_TOPICS, "/config/clients", "/config/users", "/config/brokers", "/config/ips")


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def _dump(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(int(time.time() * 1000))


# ---- brokers


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A live broker as its registration says: endpoints by listener name, and its rack."""

    broker_id: int
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port), in registration order
    security: dict[str, str] = field(default_factory=dict)  # listener name -> security protocol
    rack: str | None = None

    def endpoint(self, listener: str | None) -> tuple[str, int] | None:
        """The endpoint on that listener name; the first one when no name is given."""
        if listener is None:
            return next(iter(self.endpoints.values()), None)
        return self.endpoints.get(listener)


def encode_broker(info: BrokerInfo) -> bytes:
    endpoints = [f"{name}://{host}:{port}" for name, (host, port) in info.endpoints.items()]
    # host and port: the first listener whose security protocol is PLAINTEXT (older clients')
    plain = next((ep for name, ep in info.endpoints.items() if info.security.get(name, name) == "PLAINTEXT"), None)
    obj: dict[str, object] = {
        "features": {},
        "listener_security_protocol_map": {n: info.security.get(n, n) for n in info.endpoints},
        "endpoints": endpoints,
        "jmx_port": -1,
        "port": plain[1] if plain else -1,
        "host": plain[0] if plain else None,
        "version": 5,
        "timestamp": _now_ms(),
    }
    if info.rack is not None:  # Kafka writes the key only for a broker with a rack
        obj["rack"] = info.rack
    return _dump(obj)


def decode_broker(broker_id: int, data: bytes) -> BrokerInfo:
    obj = json.loads(data)
    endpoints: dict[str, tuple[str, int]] = {}
    for spec in obj.get("endpoints", []):
        name, _, addr = spec.partition("://")
        host, _, port = addr.rpartition(":")
        endpoints[name] = (host.strip("[]"), int(port))
    if not endpoints and obj.get("host"):  # version 1 registrations
        endpoints["PLAINTEXT"] = (obj["host"], int(obj["port"]))
    return BrokerInfo(broker_id, endpoints, dict(obj.get("listener_security_protocol_map") or {}), obj.get("rack"))


# ---- the controller


def encode_controller(broker_id: int) -> bytes:
    return _dump({"version": 2, "brokerid": broker_id, "timestamp": _now_ms(), "kraftControllerEpoch": -1})


def decode_controller(data: bytes) -> int:
    return int(json.loads(data)["brokerid"])


def encode_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_epoch(data: bytes) -> int:
    return int(data.decode().strip())


PRODUCER_ID_BLOCK = "/latest_producer_id_block"


def encode_producer_id_block(broker_id: int, first: int, last: int) -> bytes:
    """/latest_producer_id_block: the last block of producer ids a broker claimed (both ends
    inclusive, as decimal strings: Kafka's ProducerIdBlockZNode)."""
    return json.dumps({"version": 1, "broker": broker_id, "block_start": str(first),
                       "block_end": str(last)}).encode()


def decode_producer_id_block(data: bytes) -> tuple[int, int, int] | None:
    """(broker, first, last) of the block, None when no block was claimed yet (empty znode)."""
    if not data.strip():
        return None
    d = json.loads(data)
    return int(d["broker"]), int(d["block_start"]), int(d["block_end"])


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(json.loads(data)["id"])


# ---- topics


def topic_id_to_text(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_text(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """/brokers/topics/T: the topic's id and each partition's replicas, preferred leader first."""

    name: str
    topic_id: uuid.UUID
    replicas: dict[int, tuple[int, ...]]  # partition -> replicas (during a reassignment: target + origin)
    # a reassignment in progress (Kafka 2.4+): partition -> the replicas being added / removed
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return len(self.replicas)

    def reassigning(self, partition: int) -> bool:
        return bool(self.adding.get(partition) or self.removing.get(partition))


def encode_topic(t: TopicAssignment) -> bytes:
    return _dump({
        "partitions": {str(p): list(r) for p, r in sorted(t.replicas.items())},
        "topic_id": topic_id_to_text(t.topic_id),
        # only the partitions being reassigned, as Kafka writes them
        "adding_replicas": {str(p): list(r) for p, r in sorted(t.adding.items()) if r},
        "removing_replicas": {str(p): list(r) for p, r in sorted(t.removing.items()) if r},
        "version": 3,
    })


def decode_topic(name: str, data: bytes) -> TopicAssignment:
    obj = json.loads(data)
    tid = obj.get("topic_id")
    topic_id = topic_id_from_text(tid) if tid else uuid.UUID(int=0)
    def by_partition(key: str) -> dict[int, tuple[int, ...]]:
        got = {int(p): tuple(int(b) for b in r) for p, r in (obj.get(key) or {}).items()
               if r or key == "partitions"}
        return dict(sorted(got.items()))

    return TopicAssignment(name, topic_id, by_partition("partitions"), by_partition("adding_replicas"),
                           by_partition("removing_replicas"))


def encode_state(s: PartitionState) -> bytes:
    return _dump({"controller_epoch": s.controller_epoch, "leader": s.leader, "version": 1,
                  "leader_epoch": s.leader_epoch, "isr": list(s.isr)})


def decode_state(topic: str, partition: int, replicas: tuple[int, ...], data: bytes, zk_version: int) -> PartitionState:
    obj = json.loads(data)
    return PartitionState(topic, partition, int(obj["leader"]), int(obj["leader_epoch"]),
                          tuple(int(b) for b in obj["isr"]), replicas, int(obj["controller_epoch"]), zk_version)


def encode_topic_config(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(configs)})


def decode_topic_config(data: bytes) -> dict[str, str]:
    return {str(k): str(v) for k, v in json.loads(data).get("config", {}).items()}


def encode_config_change(topic: str) -> bytes:
    return _dump({"version": 2, "entity_path": f"topics/{topic}"})
