"""The control API's moves on a cluster node (zookeeper.connect set): a partition's leader,
or a group's coordinator (its __consumer_offsets partition), moved to another node through the
controller, as an operator would with `kafka-reassign-partitions` then `kafka-leader-election
--election-type preferred`:

1. the partition's replicas are reordered with the target first (AlterPartitionReassignments
   to the controller: the same replicas, so nothing is copied; the target becomes the
   preferred leader, so auto.leader.rebalance.enable keeps it there);
2. a preferred-leader election (ElectLeaders to the controller) makes it the leader, in a new
   leader epoch; the old leader becomes a follower (a coordinator unloads its groups, which
   answer NOT_COORDINATOR there) and the new one loads them;
3. the call waits until this node's metadata names the target as leader, and for a group until
   the target answers for it (OffsetFetch answered, not NOT_COORDINATOR or
   COORDINATOR_LOAD_IN_PROGRESS).

Any node's control API does it: the requests go over the Kafka protocol to whichever node is the
controller now (again to the next one if it moves meanwhile). Refused, changing nothing: a node
that is not a live broker (400), a topic or partition that does not exist (404), a target that
holds no replica of the partition, is not in its ISR, or a partition being reassigned (409).
Not led by the target by the deadline: 504."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.topics import OFFSETS_TOPIC
from kcoord.server.cluster import znodes
from kcoord.server.control.faults import BadRule
from kcoord.server.control.refusals import NotFound, Refused

if TYPE_CHECKING:
    from kcoord.server.cluster.node import ClusterNode

log = logging.getLogger("kcoord.control")

DEFAULT_TIMEOUT_MS = 30_000
_RETRY_S = 0.2  # between tries of a request to the controller (it moved, was not elected yet)
_NOT_CONTROLLER = ErrorCode.NOT_CONTROLLER
_LOADING = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)
# an election answer the caller's loop decides again from the metadata (the controller's view
# may lag: PREFERRED_LEADER_NOT_AVAILABLE while it has not seen the target join the ISR)
_ELECT_RETRIED = (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.NOT_CONTROLLER,
                  ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)


class ClusterMoves:
    """Built by the composition root (server/node.py, `control_plane`) with the node's
    ClusterNode (read at each use: set once the node has joined)."""

    def __init__(self, cluster: Callable[[], ClusterNode | None], client_id: str) -> None:
        self._cluster = cluster
        self._client_id = client_id
        self._clients: Any = None  # server/cluster/broker_clients.BrokerClients, at the first move

    def node(self) -> ClusterNode:
        node = self._cluster()
        if node is None:
            raise Refused(409, "this node has not joined its cluster yet")
        return node

    def summary(self) -> dict[str, Any] | None:
        """The controller and the live brokers (GET /status); None until the node has joined."""
        node = self._cluster()
        if node is None:
            return None
        return {"controller": node.controller_id, "brokers": sorted(b.broker_id for b in node.brokers)}

    def brokers(self) -> list[dict[str, Any]]:
        """The cluster's live brokers as this node's metadata has them."""
        node = self.node()
        return [{"node_id": b.broker_id, "endpoints": {name: f"{h}:{p}" for name, (h, p) in b.endpoints.items()},
                 "rack": b.rack, "controller": b.broker_id == node.controller_id} for b in node.brokers]

    async def move_leader(self, topic: str, partition: int, target: Any, timeout_ms: Any) -> dict[str, Any]:
        deadline = time.monotonic() + _timeout_s(timeout_ms)
        target = self._target(target)
        previous = await self._move(topic, partition, target, deadline)
        return {"topic": topic, "partition": partition, "leader": target, "previous": previous}

    async def move_coordinator(self, group_id: str, target: Any, timeout_ms: Any) -> dict[str, Any]:
        deadline = time.monotonic() + _timeout_s(timeout_ms)
        target = self._target(target)
        partition = self._partition_of(group_id)
        previous = await self._move(OFFSETS_TOPIC, partition, target, deadline)
        await self._until_answering(group_id, partition, target, deadline)
        return {"group_id": group_id, "partition": partition, "coordinator": target, "previous": previous}

    # ---- the steps

    def _partition_of(self, group_id: str) -> int:
        """The group's __consumer_offsets partition, of the cluster's partition count."""
        from kcoord.protocol.partitioner import partition_for

        offsets = self.node().topic(OFFSETS_TOPIC)
        if offsets is None:
            raise Refused(409, f"{OFFSETS_TOPIC} does not exist yet: it is created once "
                               f"offsets.topic.replication.factor brokers are up")
        return partition_for(group_id, offsets.partitions)

    def _target(self, value: Any) -> int:
        node = self.node()
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        live = sorted(b.broker_id for b in node.brokers)
        if isinstance(value, bool) or not isinstance(value, int):
            raise BadRule(f"'node' must be a broker id (live brokers: {live})")
        if value not in live:
            raise BadRule(f"node {value} is not a live broker of the cluster (live brokers: {live})")
        return value

    async def _check(self, topic: str, partition: int, target: int) -> tuple[tuple[int, ...], int]:
        """(replicas, leader) now; refused when the target cannot be made the leader. The
        replicas as ZooKeeper has them; the ISR and leader as this node's metadata has them, or,
        where that says no, as ZooKeeper has them now (a node's view lags ZooKeeper by a watch)."""
        node = self.node()
        assignment = None
        if topic not in node.cache.deleting:  # the replicas as ZooKeeper has them (what the reorder replaces)
            got = await node.zk.get_or_none(znodes.topic_path(topic))
            assignment = None if got is None else znodes.decode_topic(topic, got[0])
        if assignment is None:
            raise NotFound(f"no topic {topic} in the cluster")
        if partition not in assignment.replicas:
            raise NotFound(f"topic {topic} has partitions 0 to {assignment.partitions - 1}")
        tp = f"{topic}-{partition}"
        if partition in assignment.adding or partition in assignment.removing:
            raise Refused(409, f"a reassignment of {tp} is in progress; wait until it completes")
        replicas = assignment.replicas[partition]
        if target not in replicas:
            raise Refused(409, f"node {target} holds no replica of {tp} (replicas {list(replicas)}); "
                               f"reassign the partition to it first")
        st = node.cache.state(topic, partition)
        if st is None or st.leader < 0 or target not in st.isr:
            st = await self._stored_state(topic, partition, replicas) or st
        if st is None or st.leader < 0:
            raise Refused(409, f"{tp} has no leader now (its replicas {list(replicas)} are offline)")
        if target not in st.isr:
            raise Refused(409, f"node {target} is not in the ISR {list(st.isr)} of {tp}: it would lose "
                               f"records as leader (wait until it has caught up)")
        return replicas, st.leader

    async def _stored_state(self, topic: str, partition: int, replicas: tuple[int, ...]) -> Any:
        got = await self.node().zk.get_or_none(znodes.state_path(topic, partition))
        return None if got is None else znodes.decode_state(topic, partition, replicas, got[0], got[1])

    async def _move(self, topic: str, partition: int, target: int, deadline: float) -> int:
        """The target leads the partition (in this node's metadata); returns the leader before."""
        replicas, previous = await self._check(topic, partition, target)
        if replicas[0] != target:
            order = (target, *(r for r in replicas if r != target))
            await self._reassign(topic, partition, order, deadline)
            log.info("%s-%d: replicas reordered %s -> %s (control API)", topic, partition, list(replicas), list(order))
        node = self.node()
        while True:
            st = node.cache.state(topic, partition)
            if st is not None and st.leader == target:
                break
            await self._check(topic, partition, target)  # the target may have left the ISR meanwhile
            await self._elect(topic, partition, deadline)
            await self._until(lambda: (s := node.cache.state(topic, partition)) is not None and s.leader == target,
                              min(deadline, time.monotonic() + 1.0))
            if time.monotonic() > deadline:
                st = node.cache.state(topic, partition)
                raise Refused(504, f"{topic}-{partition}: node {target} did not become its leader in time "
                                   f"(leader now {st.leader if st is not None else -1})")
        if previous != target:
            log.info("%s-%d: leader %d -> %d (control API)", topic, partition, previous, target)
        return previous

    async def _reassign(self, topic: str, partition: int, order: tuple[int, ...], deadline: float) -> None:
        from kafka.protocol.admin.topics import AlterPartitionReassignmentsRequest as Req

        request = Req(version=0, timeout_ms=30_000, topics=[Req.ReassignableTopic(
            name=topic, partitions=[Req.ReassignableTopic.ReassignablePartition(
                partition_index=partition, replicas=list(order))])])
        while True:
            r = await self._to_controller(request, 0, deadline)
            if r is not None and r.error_code == 0:
                p = r.responses[0].partitions[0]
                if p.error_code == 0:
                    return
                if p.error_code != _NOT_CONTROLLER:
                    raise Refused(409, f"the controller refused to reorder the replicas of {topic}-{partition}: "
                                       f"{_name(p.error_code)} {p.error_message or ''}".rstrip())
            await self._pause(deadline, f"reordering the replicas of {topic}-{partition}")

    async def _elect(self, topic: str, partition: int, deadline: float) -> None:
        """One preferred-leader election request; what the controller could not do is decided
        again by the caller's loop from the metadata."""
        from kafka.protocol.admin.topics import ElectLeadersRequest as Req

        request = Req(version=1, election_type=0, timeout_ms=30_000,
                      topic_partitions=[Req.TopicPartitions(topic=topic, partitions=[partition])])
        r = await self._to_controller(request, 1, deadline)
        if r is None:
            return
        for t in r.replica_election_results:
            for p in t.partition_result:
                if p.error_code not in _ELECT_RETRIED:
                    raise Refused(409, f"the controller refused the election of {topic}-{partition}: "
                                       f"{_name(p.error_code)} {p.error_message or ''}".rstrip())

    async def _until_answering(self, group_id: str, partition: int, target: int, deadline: float) -> None:
        """The target has loaded the group's partition: it answers an OffsetFetch for the group."""
        from kafka.protocol.consumer import OffsetFetchRequest

        request = OffsetFetchRequest(version=7, group_id=group_id, topics=[], require_stable=False)
        node = self.node()
        while True:
            endpoint = node.endpoints().get(target)
            if endpoint is not None:
                try:
                    r = await self._request(target, endpoint, request, 7, deadline)
                    if r.error_code not in _LOADING:
                        return
                except (OSError, TimeoutError):
                    pass
            st = node.cache.state(OFFSETS_TOPIC, partition)
            if st is not None and st.leader != target:
                raise Refused(409, f"{OFFSETS_TOPIC}-{partition} moved on to node {st.leader} before node "
                                   f"{target} answered for group {group_id}")
            await self._pause(deadline, f"node {target} to load group {group_id}")

    # ---- requests

    async def _to_controller(self, request: Any, version: int, deadline: float) -> Any:
        """The controller's answer; None when there is no controller now or it cannot be reached."""
        node = self.node()
        cid = node.controller_id
        endpoint = node.endpoints().get(cid)
        if cid < 0 or endpoint is None:
            return None
        try:
            r = await self._request(cid, endpoint, request, version, deadline)
        except (OSError, TimeoutError):
            return None
        return None if getattr(r, "error_code", 0) == _NOT_CONTROLLER else r

    async def _request(self, broker: int, endpoint: tuple[str, int], request: Any, version: int,
                       deadline: float) -> Any:
        if self._clients is None:
            from kcoord.server.cluster.broker_clients import BrokerClients

            self._clients = BrokerClients(self._client_id, timeout_s=10.0)
        left = max(0.1, deadline - time.monotonic())
        try:
            return await asyncio.wait_for(self._clients.request(broker, endpoint, request, version), left)
        except TimeoutError:
            self._clients.drop(broker)
            raise

    async def _pause(self, deadline: float, what: str) -> None:
        if time.monotonic() + _RETRY_S > deadline:
            raise Refused(504, f"timed out {what}")
        await asyncio.sleep(_RETRY_S)

    async def _until(self, cond: Callable[[], bool], until: float) -> None:
        while not cond() and time.monotonic() < until:
            await asyncio.sleep(0.02)

    def close(self) -> None:
        if self._clients is not None:
            self._clients.close()


def _timeout_s(value: Any) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_MS / 1000
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 600_000:
        raise BadRule("'timeout_ms' must be how long to wait for the move, 1 to 600000")
    return value / 1000


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
