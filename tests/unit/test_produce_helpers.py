"""Helpers for the data-plane handler tests: a real Broker on tmp_path with a FakeClock, and
requests that go through encode/decode on the way in and out (no sockets)."""
from __future__ import annotations

from typing import Any

from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.producer import ProduceRequest

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.server.broker import Broker
from kcoord.server.clock import FakeClock
from kcoord.server.config import Config
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import DataPlane
from kcoord.server.deferred import Deferred
from kcoord.server.handlers import NO_RESPONSE
from kcoord.server.handlers.routes import handler_of

NOW = 1_700_000_000_000


async def make_broker(tmp_path, **overrides: Any) -> Broker:
    cfg = {"log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": 1}
    cfg.update({k.replace("_", "."): v for k, v in overrides.items()})
    broker = Broker(Config(cfg))
    broker.clock = FakeClock(NOW)
    await broker.start()
    return broker


def data_plane(broker: Broker) -> DataPlane:
    """The node's data plane (built now if it was not)."""
    return broker.parts.data_plane.get()


def batch(values: list[bytes], *, pid: int = -1, epoch: int = -1, seq: int = -1, ts: int = NOW,
          keys: list[bytes | None] | None = None, compression: int = 0, transactional: bool = False) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=int(transactional),
                                  producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=2**31 - 1)
    for i, v in enumerate(values):
        b.append(i, ts + i, (keys[i] if keys else b"k%d" % i), v, [])
    return bytes(b.build())


def decode_records(data: bytes) -> list[tuple[int, int, bytes | None]]:
    """(offset, timestamp, value) of every record of every batch in `data`."""
    out = []
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8:pos + 12], "big") + 12
        for r in DefaultRecordBatch(data[pos:pos + size]):
            out.append((r.offset, r.timestamp, r.value))
        pos += size
    return out


def _roundtrip_request(req: Any, version: int) -> Any:
    return type(req).decode(memoryview(req.encode(version=version)), version=version)


def _decode_response(api: ApiKey, resp: Any, version: int) -> Any:
    cls = API_TABLE[api].response
    return cls.decode(memoryview(resp.encode(version=version)), version=version)


# the APIs whose answers wait for I/O (a durable append, a file written): their handlers return
# a Deferred like every other parked answer, which call() waits for
_WAITED = {ApiKey.PRODUCE, ApiKey.DELETE_TOPICS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
           ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.SHARE_FETCH,
           ApiKey.SHARE_ACKNOWLEDGE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS,
           ApiKey.DELETE_SHARE_GROUP_OFFSETS, ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE,
           ApiKey.WRITE_SHARE_GROUP_STATE, ApiKey.DELETE_SHARE_GROUP_STATE}


async def call(broker: Broker, api: ApiKey, req: Any, version: int) -> Any:
    """Run one request through its handler; returns the decoded response, NO_RESPONSE, or for a
    parked request a Deferred of the decoded response."""
    ctx = RequestContext(version, 1, "unit-test", "127.0.0.1")
    res = handler_of(broker.parts.areas, api)(ctx, _roundtrip_request(req, version), version)
    if api in _WAITED:
        res = await settle(res)
    if res is NO_RESPONSE:
        return res
    if isinstance(res, Deferred):
        out: Deferred[Any] = Deferred()
        res.add_callback(lambda r: out.complete(_decode_response(api, r, version)))
        return out
    return _decode_response(api, res, version)


async def settle(answer: Any, timeout: float = 10.0) -> Any:
    """The answer itself, or what a Deferred answer completes with (on the running loop)."""
    import asyncio

    if not isinstance(answer, Deferred):
        return answer
    fut = asyncio.get_running_loop().create_future()
    answer.add_callback(lambda r: fut.done() or fut.set_result(r))
    return await asyncio.wait_for(fut, timeout)


def produce_req(topic: str, partition: int, records: bytes | None, acks: int = 1, *,
                transactional_id: str | None = None, timeout_ms: int = 5000, version: int = 9) -> Any:
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    return ProduceRequest(version=version, transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
                          topic_data=[T(name=topic, partition_data=[P(index=partition, records=records)])])


async def produce(broker: Broker, topic: str, partition: int, records: bytes | None, acks: int = 1,
                  version: int = 9, **kw: Any) -> Any:
    """The one partition response (or NO_RESPONSE)."""
    resp = await call(broker, ApiKey.PRODUCE, produce_req(topic, partition, records, acks, version=version, **kw),
                      version)
    if resp is NO_RESPONSE:
        return resp
    return resp.responses[0].partition_responses[0]


def fetch_req(parts: list[tuple[Any, int, int]], *, version: int = 12, max_wait_ms: int = 0, min_bytes: int = 1,
              max_bytes: int = 50 * 2**20, partition_max_bytes: int = 2**20, session_id: int = 0,
              session_epoch: int = -1, isolation_level: int = 0, current_leader_epoch: int = -1) -> Any:
    """parts: (topic name or topic id, partition, offset)."""
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    topics: list[Any] = []
    for topic, p, offset in parts:
        part = P(partition=p, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
                 last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=partition_max_bytes)
        key = "topic_id" if version >= 13 else "topic"
        if topics and getattr(topics[-1], key) == topic:
            topics[-1].partitions.append(part)
        else:
            topics.append(T(**{key: topic}, partitions=[part]))
    return FetchRequest(version=version, replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                        max_bytes=max_bytes, isolation_level=isolation_level, session_id=session_id,
                        session_epoch=session_epoch, topics=topics, forgotten_topics_data=[], rack_id="")


def list_offsets_req(parts: list[tuple[str, int, int]], *, version: int = 7, max_num_offsets: int = 1,
                     current_leader_epoch: int = -1) -> Any:
    T = ListOffsetsRequest.ListOffsetsTopic
    P = T.ListOffsetsPartition
    topics: list[Any] = []
    for topic, p, ts in parts:
        part = P(partition_index=p, current_leader_epoch=current_leader_epoch, timestamp=ts,
                 max_num_offsets=max_num_offsets)
        if topics and topics[-1].name == topic:
            topics[-1].partitions.append(part)
        else:
            topics.append(T(name=topic, partitions=[part]))
    return ListOffsetsRequest(version=version, replica_id=-1, isolation_level=0, topics=topics, timeout_ms=0)
