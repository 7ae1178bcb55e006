"""A small blocking Kafka client for the command-line tools: one socket per broker, ApiVersions
to pick each API's version (the highest both sides know, capped at what the tools fill in),
Metadata for leaders, FindCoordinator for groups. Works against any Kafka-protocol server.

Request and response bodies are kafka-python's classes (built from Kafka's JSON schemas); the
headers are written and read here, as the server does (protocol/headers.py).
"""
from __future__ import annotations

import importlib
import re
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.metadata import (
    ApiVersionsRequest,
    FindCoordinatorRequest,
    MetadataRequest,
)

from kcoord.protocol.headers import skip_tagged_fields
from kcoord.server.kafkatools.java_errors import JAVA_ERRORS

# The highest version of each API the tools fill in (what Java kafka-clients 3.9 sends).
CAPS = {
    "Metadata": 12, "CreateTopics": 7, "DeleteTopics": 6, "CreatePartitions": 3, "DescribeConfigs": 4,
    "AlterConfigs": 2, "IncrementalAlterConfigs": 1, "DescribeCluster": 1, "DescribeTopicPartitions": 0,
    "ListGroups": 5, "DescribeGroups": 5, "OffsetFetch": 9, "OffsetCommit": 9, "OffsetDelete": 0,
    "DeleteGroups": 2, "FindCoordinator": 6, "ListOffsets": 9, "ListPartitionReassignments": 0,
}
_RETRIABLE_COORDINATOR = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


class KafkaCallError(Exception):
    """A Kafka error code in a response, printed as the Java client's exception would be."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        name, default = JAVA_ERRORS.get(code, ("UnknownServerException", f"error code {code}"))
        self.java_name = name
        self.message = message or default
        super().__init__(self.message)

    def java(self) -> str:
        """`org.apache.kafka.common.errors.X: message`, the exception's toString()."""
        return f"org.apache.kafka.common.errors.{self.java_name}: {self.message}"


class UnsupportedVersion(KafkaCallError):
    def __init__(self, api: str) -> None:
        key = re.sub(r"(?<!^)(?=[A-Z])", "_", api).upper()  # ApiKeys' name: CreatePartitions -> CREATE_PARTITIONS
        super().__init__(35, f"The node does not support {key}")


def check(code: int, message: str | None = None) -> None:
    if code:
        raise KafkaCallError(code, message)


def _response_class(request_cls: type) -> type:
    module = importlib.import_module(request_cls.__module__)
    return getattr(module, request_cls.__name__.removesuffix("Request") + "Response")


class Connection:
    """One blocking socket to one broker."""

    def __init__(self, host: str, port: int, timeout: float, client_id: str) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.client_id = client_id.encode()
        self._correlation = 0

    def send(self, request_cls: type, version: int, **fields: Any) -> Any:
        self._correlation += 1
        flexible = bool(request_cls.flexible_version_q(version))
        header = struct.pack(">hhih", request_cls.API_KEY, version, self._correlation, len(self.client_id))
        header += self.client_id + (b"\x00" if flexible else b"")
        body = bytes(request_cls(version=version, **fields).encode(version=version))
        frame = header + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._read(4))[0]
        data = self._read(size)
        (correlation,) = struct.unpack_from(">i", data)
        if correlation != self._correlation:
            raise OSError(f"response correlation id {correlation}, expected {self._correlation}")
        pos = 4
        if flexible and request_cls is not ApiVersionsRequest:  # ApiVersions answers with header v0
            pos = skip_tagged_fields(data, pos)
        return _response_class(request_cls).decode(data[pos:], version=version)

    def _read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise OSError("connection closed by the broker")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    elr: list[int] | None = None  # None: not known (Metadata), printed N/A
    last_known_elr: list[int] | None = None


@dataclass
class TopicInfo:
    name: str
    topic_id: Any
    internal: bool
    error: int = 0
    partitions: list[PartitionInfo] = field(default_factory=list)


class Client:
    """The cluster as the tools see it, through one bootstrap connection and a connection per
    broker as needed."""

    def __init__(self, bootstrap: str, timeout: float = 30.0, client_id: str = "kcoord-tools") -> None:
        self.timeout = timeout
        self.client_id = client_id
        self._conns: dict[int, Connection] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        last: Exception | None = None
        self.conn: Connection | None = None
        for spec in (s.strip() for s in bootstrap.split(",") if s.strip()):
            host, _, port = spec.rpartition(":")
            try:
                self.conn = Connection(host.strip("[]") or "localhost", int(port), timeout, client_id)
                break
            except (OSError, ValueError) as e:
                last = e
        if self.conn is None:
            raise OSError(f"cannot connect to any of the bootstrap servers {bootstrap}: {last}")
        resp = self.conn.send(ApiVersionsRequest, 0)
        check(resp.error_code)
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    def close(self) -> None:
        for c in {id(c): c for c in [self.conn, *self._conns.values()] if c is not None}.values():
            c.close()

    # ---- versions and sending ----

    def version(self, request_cls: type, cap: int | None = None) -> int:
        name = request_cls.__name__.removesuffix("Request")
        ours = min(request_cls.max_version, CAPS.get(name, request_cls.max_version) if cap is None else cap)
        theirs = self.versions.get(request_cls.API_KEY)
        if theirs is None or theirs[0] > ours:
            raise UnsupportedVersion(name)
        return min(ours, theirs[1])

    def supports(self, request_cls: type) -> bool:
        return request_cls.API_KEY in self.versions

    def send(self, request_cls: type, node: int | None = None, version: int | None = None, **fields: Any) -> Any:
        v = self.version(request_cls) if version is None else version
        return self.connection(node).send(request_cls, v, **fields)

    def connection(self, node: int | None) -> Connection:
        if node is None:
            assert self.conn is not None
            return self.conn
        conn = self._conns.get(node)
        if conn is None:
            if node not in self.brokers:
                self.metadata([])
            host, port = self.brokers[node]
            conn = Connection(host, port, self.timeout, self.client_id)
            self._conns[node] = conn
        return conn

    # ---- metadata ----

    def metadata(self, topics: list[str] | None) -> dict[str, TopicInfo]:
        """Brokers (kept) and the named topics; all topics when `topics` is None."""
        v = self.version(MetadataRequest)
        names = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        if topics is None and v == 0:
            names = []
        resp = self.send(MetadataRequest, version=v, topics=names, allow_auto_topic_creation=False)
        self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
        self.controller = getattr(resp, "controller_id", -1)
        self.cluster_id = getattr(resp, "cluster_id", None)
        out = {}
        for t in resp.topics:
            parts = [PartitionInfo(p.partition_index, p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
                     for p in sorted(t.partitions, key=lambda p: p.partition_index)]
            out[t.name] = TopicInfo(t.name, getattr(t, "topic_id", None), bool(getattr(t, "is_internal", False)),
                                    t.error_code, parts)
        return out

    def topic_names(self, include_internal: bool = True) -> list[str]:
        return sorted(name for name, t in self.metadata(None).items()
                      if t.error == 0 and (include_internal or not t.internal))

    # ---- groups ----

    def coordinator(self, group: str) -> tuple[int, str, int]:
        """(node id, host, port) of the group's coordinator, retried while it is loading."""
        deadline = time.monotonic() + self.timeout
        while True:
            v = self.version(FindCoordinatorRequest)
            resp = self.send(FindCoordinatorRequest, version=v, key=group, key_type=0, coordinator_keys=[group])
            if v >= 4:
                c = resp.coordinators[0]
                code, msg, node, host, port = c.error_code, c.error_message, c.node_id, c.host, c.port
            else:
                code, msg, node, host, port = resp.error_code, resp.error_message, resp.node_id, resp.host, resp.port
            if code in _RETRIABLE_COORDINATOR and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            check(code, msg)
            self.brokers[node] = (host, port)
            return node, host, port

    def to_coordinator(self, group: str, request_cls: type, **fields: Any) -> Any:
        """Send to the group's coordinator; retried while the coordinator loads or moves."""
        deadline = time.monotonic() + self.timeout
        while True:
            node, _, _ = self.coordinator(group)
            resp = self.send(request_cls, node=node, **fields)
            code = _first_error(resp)
            if code in _RETRIABLE_COORDINATOR and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            return resp


def _first_error(resp: Any) -> int:
    code = getattr(resp, "error_code", 0) or 0
    if code:
        return code
    for g in getattr(resp, "groups", None) or []:
        if getattr(g, "error_code", 0):
            return g.error_code
    return 0
