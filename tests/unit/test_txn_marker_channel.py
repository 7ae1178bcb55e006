"""The transaction marker channel of a cluster node (server/cluster/txn_markers.py): the
markers of one transaction are grouped per leading node (one WriteTxnMarkers request each),
the partitions this node leads are written here, and a partition answered
NOT_LEADER_OR_FOLLOWER goes, at the next attempt, to the leader the metadata names then.
The other nodes are real loopback servers answering WriteTxnMarkers frames (decoded and
encoded with the API table's classes, as the server does); the metadata is a dict."""
from __future__ import annotations

import asyncio
import struct

from kafka.protocol.producer.transaction import WriteTxnMarkersResponse

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.cluster.txn_markers import NO_LEADER, MarkerChannel, route
from kcoord.server.deferred import Deferred
from kcoord.server.txn.result import MarkerJob

ME = 1
SPEC = API_TABLE[ApiKey.WRITE_TXN_MARKERS]
Result = WriteTxnMarkersResponse.WritableTxnMarkerResult


class MarkerNode:
    """A node answering WriteTxnMarkers: `codes[(topic, partition)]` (NONE by default);
    every request it got is kept."""

    def __init__(self) -> None:
        self.codes: dict[tuple[str, int], E] = {}
        self.requests: list = []
        self.server: asyncio.Server | None = None

    async def start(self) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[:2]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                key, version, correlation, n = struct.unpack_from(">hhih", frame)
                assert key == ApiKey.WRITE_TXN_MARKERS
                pos = 10 + n + (1 if SPEC.request_header_version(version) >= 2 else 0)
                req = SPEC.request.decode(frame[pos:], version=version)
                self.requests.append(req)
                Topic = Result.WritableTxnMarkerTopicResult
                body = WriteTxnMarkersResponse(version=version, markers=[Result(producer_id=m.producer_id, topics=[
                    Topic(name=t.name, partitions=[Topic.WritableTxnMarkerPartitionResult(
                        partition_index=p, error_code=self.codes.get((t.name, p), E.NONE))
                        for p in t.partition_indexes]) for t in m.topics]) for m in req.markers]).encode(version=version)
                head = struct.pack(">i", correlation) + (b"\x00" if SPEC.response_header_version(version) >= 1 else b"")
                writer.write(struct.pack(">i", len(head) + len(body)) + head + bytes(body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def sent(self) -> list[tuple[str, int]]:
        return sorted((t.name, p) for r in self.requests for m in r.markers for t in m.topics
                      for p in t.partition_indexes)

    def close(self) -> None:
        assert self.server is not None
        self.server.close()


class Here:
    """This node's own marker writes (write_here)."""

    def __init__(self) -> None:
        self.calls: list = []

    def __call__(self, pid, epoch, commit, tps, coordinator_epoch):
        tps = list(tps)
        self.calls.append((pid, epoch, commit, tps, coordinator_epoch))
        out = {}
        for tp in tps:
            d: Deferred = Deferred()
            d.complete(None)
            out[tp] = d
        return out


def job(*tps: tuple[str, int]) -> MarkerJob:
    return MarkerJob("tx", 7, 3, True, frozenset(tps), coordinator_epoch=4)


def test_route_groups_partitions_per_leading_node():
    leaders = {("a", 0): 2, ("a", 1): 3, ("a", 2): 2, ("b", 0): ME, ("b", 1): NO_LEADER}
    r = route(list(leaders) + [("gone", 0)], lambda t, p: leaders.get((t, p)), ME)
    assert r.here == [("b", 0)]
    assert r.by_node == {2: [("a", 0), ("a", 2)], 3: [("a", 1)]}
    assert r.unroutable == {("b", 1): E.NOT_LEADER_OR_FOLLOWER, ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}


async def test_one_request_per_node_and_the_local_partitions_written_here():
    nodes = {2: MarkerNode(), 3: MarkerNode()}
    endpoints = {b: await n.start() for b, n in nodes.items()}
    leaders = {("a", 0): 2, ("a", 1): 3, ("a", 2): 2, ("a", 3): ME}
    here = Here()
    channel = MarkerChannel(ME, lambda t, p: leaders.get((t, p)), endpoints.get, here)
    try:
        errors = await channel.write(job(*leaders))
        assert errors == dict.fromkeys(leaders)  # every marker written
        assert [len(n.requests) for n in nodes.values()] == [1, 1]
        assert nodes[2].sent() == [("a", 0), ("a", 2)] and nodes[3].sent() == [("a", 1)]
        m = nodes[2].requests[0].markers[0]
        assert (m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch) == (7, 3, True, 4)
        assert here.calls == [(7, 3, True, [("a", 3)], 4)]
    finally:
        channel.close()
        for n in nodes.values():
            n.close()


async def test_a_partition_whose_leader_moved_goes_to_the_new_leader_at_the_next_attempt():
    nodes = {2: MarkerNode(), 3: MarkerNode()}
    endpoints = {b: await n.start() for b, n in nodes.items()}
    leaders = {("a", 0): 2, ("a", 1): 2}
    nodes[2].codes[("a", 1)] = E.NOT_LEADER_OR_FOLLOWER  # node 2 no longer leads a-1
    channel = MarkerChannel(ME, lambda t, p: leaders.get((t, p)), endpoints.get, Here())
    try:
        errors = await channel.write(job(*leaders))
        assert errors == {("a", 0): None, ("a", 1): E.NOT_LEADER_OR_FOLLOWER}
        leaders[("a", 1)] = 3  # the metadata names the new leader
        errors = await channel.write(job(("a", 1)))  # the marker writer retries what is left
        assert errors == {("a", 1): None}
        assert nodes[3].sent() == [("a", 1)] and len(nodes[2].requests) == 1
    finally:
        channel.close()
        for n in nodes.values():
            n.close()


async def test_a_partition_gone_from_the_metadata_is_skipped_one_unknown_to_its_leader_retried():
    node = MarkerNode()
    endpoints = {2: await node.start()}
    node.codes[("a", 0)] = E.UNKNOWN_TOPIC_OR_PARTITION  # its leader has not learnt it yet
    leaders = {("a", 0): 2}
    channel = MarkerChannel(ME, lambda t, p: leaders.get((t, p)), endpoints.get, Here())
    try:
        errors = await channel.write(job(("a", 0), ("deleted", 0)))
        assert errors == {("a", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("deleted", 0): None}
        assert node.sent() == [("a", 0)]
    finally:
        channel.close()
        node.close()


async def test_a_node_that_cannot_be_reached_or_is_gone_leaves_its_partitions_to_retry():
    node = MarkerNode()
    endpoint = await node.start()
    node.close()  # nobody listens there any more
    await asyncio.sleep(0)
    leaders = {("a", 0): 2, ("a", 1): 3}
    channel = MarkerChannel(ME, lambda t, p: leaders.get((t, p)), {2: endpoint}.get, Here(), timeout_s=5)
    try:
        errors = await channel.write(job(*leaders))
        assert errors == {("a", 0): E.NETWORK_EXCEPTION, ("a", 1): E.NOT_LEADER_OR_FOLLOWER}
    finally:
        channel.close()
