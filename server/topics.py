"""The topic registry: names, stable topic ids, partition counts and per-topic configs, and
the deletions not yet finished.

Persisted as one JSON file in the log directory, replaced atomically (write, fsync, rename)
so a crash leaves either the old or the new registry. The cluster id and node id live in
Kafka's `meta.properties` beside it.

A topic deletion is committed by the write that moves the topic from `topics` to `deleting`
(server/topic_deletion.py finishes it: files, committed offsets); until the deletion is
finished the name cannot be created again (Kafka's "marked for deletion").
"""
from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kcoord.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from kcoord.protocol.coordinator_records import TopicMetadata

REGISTRY_FILE = "kcoord-topics.json"
DYNAMIC_FILE = "kcoord-broker-configs.json"  # the dynamic broker configs (server/config_layers.py)
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")

def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate rules; raises INVALID_TOPIC_EXCEPTION with Kafka's wording."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}",
        )
    if not _LEGAL.match(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name \"{name}\" is illegal, it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'",
        )


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False

    def config(self, name: str, default: str | None = None) -> str | None:
        return self.configs.get(name, default)


@dataclass(frozen=True, slots=True)
class PendingDeletion:
    """A deleted topic whose partition files or committed offsets may still exist."""
    name: str
    topic_id: uuid.UUID
    partitions: int


class TopicRegistry:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.deleting: dict[uuid.UUID, PendingDeletion] = {}
        self._path = log_dir / REGISTRY_FILE
        # bumped on every creation, deletion and partition change: consumer groups re-read
        # their subscribed topics' metadata (and re-match their regexes) when it moves
        self.changes = 0

    def load(self) -> None:
        if not self._path.exists():
            return
        data = json.loads(self._path.read_text())
        for t in data.get("topics", []):
            self._add(
                Topic(
                    name=t["name"],
                    topic_id=uuid.UUID(t["topic_id"]),
                    partitions=int(t["partitions"]),
                    configs=dict(t.get("configs", {})),
                    internal=bool(t.get("internal", False)),
                )
            )
        for d in data.get("deleting", []):
            pending = PendingDeletion(d["name"], uuid.UUID(d["topic_id"]), int(d["partitions"]))
            self.deleting[pending.topic_id] = pending

    def _add(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic
        self.changes += 1

    # ---- what the group coordinator reads (server/group/consumer/protocol.TopicSource)

    def metadata(self, name: str) -> TopicMetadata | None:
        from kcoord.protocol.coordinator_records import TopicMetadata  # loaded with the consumer groups

        t = self.topics.get(name)
        return None if t is None else TopicMetadata(t.topic_id, t.name, t.partitions)

    def names(self) -> list[str]:
        return list(self.topics)

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        t = self.by_id.get(topic_id)
        return None if t is None else t.name

    def save(self) -> None:
        data = {
            "version": 1,
            "topics": [
                {
                    "name": t.name,
                    "topic_id": str(t.topic_id),
                    "partitions": t.partitions,
                    "configs": t.configs,
                    "internal": t.internal,
                }
                for t in self.topics.values()
            ],
            "deleting": [
                {"name": d.name, "topic_id": str(d.topic_id), "partitions": d.partitions}
                for d in self.deleting.values()
            ],
        }
        atomic_write(self._path, json.dumps(data, indent=1, sort_keys=True).encode())

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def colliding(self, name: str) -> str | None:
        """Kafka refuses names that differ from an existing one only by '.' vs '_' (metric
        names would collide)."""
        norm = name.replace(".", "_")
        for other in self.topics:
            if other != name and other.replace(".", "_") == norm:
                return other
        return None

    def create(
        self, name: str, partitions: int, configs: dict[str, str] | None = None, internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> Topic:
        if self.is_deleting(name):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion.")
        topic = Topic(name, topic_id or uuid.uuid4(), partitions, dict(configs or {}), internal)
        self._add(topic)
        self.save()
        return topic

    # ---- lifecycle after creation (server/topic_deletion.py, handlers/create_partitions.py)

    def is_deleting(self, name: str) -> bool:
        return any(d.name == name for d in self.deleting.values())

    def begin_delete(self, topic: Topic) -> PendingDeletion:
        """The commit point of a deletion: the topic is gone from the registry once this
        returns. On a failed write nothing changes (the error is raised)."""
        pending = PendingDeletion(topic.name, topic.topic_id, topic.partitions)
        del self.topics[topic.name]
        del self.by_id[topic.topic_id]
        self.changes += 1
        self.deleting[topic.topic_id] = pending
        try:
            self.save()
        except BaseException:
            del self.deleting[topic.topic_id]
            self._add(topic)
            raise
        return pending

    def end_delete(self, topic_id: uuid.UUID) -> None:
        """The deletion left nothing behind: forget it."""
        if self.deleting.pop(topic_id, None) is not None:
            self.save()

    def set_partitions(self, topic: Topic, partitions: int) -> None:
        """A larger partition count (CreatePartitions); on a failed write nothing changes."""
        old = topic.partitions
        topic.partitions = partitions
        self.changes += 1
        try:
            self.save()
        except BaseException:
            topic.partitions = old
            raise


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def load_or_create_meta(log_dir: Path, node_id: int, cluster_id: str = "") -> str:
    """Kafka's meta.properties: the cluster id is made once and kept across restarts."""
    path = log_dir / "meta.properties"
    if path.exists():
        props = {}
        for line in path.read_text().splitlines():
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                props[k.strip()] = v.strip()
        existing = props.get("cluster.id", "")
        if cluster_id and existing and cluster_id != existing:
            raise ValueError(
                f"cluster.id {cluster_id} does not match {existing} in {path} (INCONSISTENT_CLUSTER_ID)"
            )
        if existing:
            return existing
    cid = cluster_id or uuid_to_base64(uuid.uuid4())
    text = f"#\n#{time.strftime('%a %b %d %H:%M:%S UTC %Y', time.gmtime())}\nnode.id={node_id}\nversion=1\ncluster.id={cid}\n"
    atomic_write(path, text.encode())
    return cid


def uuid_to_base64(u: uuid.UUID) -> str:
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")
