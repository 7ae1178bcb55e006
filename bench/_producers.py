"""The producer processes of bench_produce_consume.py's small-record table, one per process so
several of them can load one server (a single client process is the bottleneck otherwise).

    raw PORT TOPIC PARTITIONS CONNS RECORDS START END [--no-init]
        CONNS connections, each an idempotent acks=all producer speaking the wire protocol
        itself: InitProducerId v1, then Produce v7 requests of one batch of RECORDS records of
        100 B to partition (connection index % PARTITIONS), one request outstanding per
        connection (the next sent when the answer lands), each batch's base sequence the next
        one (so every request is a new append, not a duplicate). The batch is built once per
        connection; each request patches its base sequence and CRC. Answers are checked for
        error code 0. Counts the answers that land between the wall-clock times START and END
        and stops sending at END. --no-init (the bare ceiling, which answers every frame alike):
        no InitProducerId, no error check.
    confluent PORT TOPIC N START FLUSH_EVERY
        a confluent-kafka producer (idempotent, acks=all, linger.ms=0) that produces N records of
        100 B from wall-clock time START (partitioner: librdkafka's default, keyless records
        spread over the partitions) and flushes; with FLUSH_EVERY > 0 it also flushes after
        every FLUSH_EVERY records (produce, wait for the acknowledgements, produce: as a test
        does). Counts the Produce requests it sent (librdkafka's statistics).

Each prints one JSON line: {"answers" / "records", "requests", "errors", "ready", "end"}.
"""
from __future__ import annotations

import asyncio
import json
import os
import struct
import sys
import time

VALUE_SIZE = 100
CLIENT_ID = "bench-producer"
_CRC_AT, _PID_AT, _SEQ_AT = 17, 43, 53  # record batch v2: crc, producerId, baseSequence
_I32 = struct.Struct(">i")


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _frame(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    payload = struct.pack(">hhi", api_key, version, corr) + _str(CLIENT_ID) + body
    return _I32.pack(len(payload)) + payload


def _batch(records: int) -> bytearray:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    now = int(time.time() * 1000)
    for i in range(records):
        b.append(i, timestamp=now, key=None, value=os.urandom(VALUE_SIZE), headers=[])
    return b.build()


class _RawProducer(asyncio.Protocol):
    def __init__(self, topic: str, partition: int, records: int, start: float, end: float, init: bool,
                 stats: dict[str, int]) -> None:
        from aiokafka.record.util import calc_crc32c

        self.crc = calc_crc32c
        self.topic, self.partition, self.records = topic, partition, records
        self.start, self.end, self.init, self.stats = start, end, init, stats
        self.batch = _batch(records)
        # Produce v7: transactional_id null, acks -1, timeout 30 s, one topic, one partition
        self.head = (b"\xff\xff" + struct.pack(">hi", -1, 30000) + _I32.pack(1) + _str(topic) + _I32.pack(1)
                     + _I32.pack(partition) + _I32.pack(len(self.batch)))
        # the answer's error code: corr, topic count, name, partition count, index
        self.error_at = 4 + 4 + 2 + len(topic.encode()) + 4 + 4
        self.client = _str(CLIENT_ID)
        self.seq = 0
        self.corr = 0
        self.buf = bytearray()
        self.ready = asyncio.get_running_loop().create_future()
        self.done = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.init:  # InitProducerId v1: no transactional id, timeout
            transport.write(_frame(22, 1, 0, b"\xff\xff" + _I32.pack(60000)))  # type: ignore[attr-defined]
        else:
            self._set_producer(0, 0)
            self.ready.set_result(None)

    def _set_producer(self, pid: int, epoch: int) -> None:
        struct.pack_into(">qh", self.batch, _PID_AT, pid, epoch)

    def send(self) -> None:
        batch = self.batch
        _I32.pack_into(batch, _SEQ_AT, self.seq)
        struct.pack_into(">I", batch, _CRC_AT, self.crc(memoryview(batch)[21:]))
        self.seq += self.records
        self.corr += 1
        payload = struct.pack(">hhi", 0, 7, self.corr) + self.client + self.head
        self.transport.write(_I32.pack(len(payload) + len(batch)) + payload + batch)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        buf = self.buf
        while len(buf) >= 4:
            size = _I32.unpack_from(buf)[0]
            if len(buf) < 4 + size:
                return
            frame = bytes(buf[4: 4 + size])
            del buf[: 4 + size]
            if not self.ready.done():  # the InitProducerId answer: corr, throttle, error, id, epoch
                error, pid, epoch = struct.unpack_from(">hqh", frame, 8)
                if error:
                    self.ready.set_exception(RuntimeError(f"InitProducerId error {error}"))
                    return
                self._set_producer(pid, epoch)
                self.ready.set_result(None)
                continue
            now = time.time()
            if self.init and struct.unpack_from(">h", frame, self.error_at)[0] != 0:
                self.stats["errors"] += 1
            if self.start <= now < self.end:
                self.stats["answers"] += 1
            if now < self.end:
                self.send()
            elif not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        for f in (self.ready, self.done):
            if not f.done():
                f.set_exception(ConnectionError(f"connection lost: {exc}"))


async def _raw(port: int, topic: str, partitions: int, conns: int, records: int, start: float, end: float,
               init: bool, first: int) -> dict[str, object]:
    loop = asyncio.get_running_loop()
    stats = {"answers": 0, "errors": 0}
    protos = []
    for i in range(conns):
        part = (first + i) % partitions
        _, p = await loop.create_connection(lambda part=part: _RawProducer(topic, part, records, start, end, init, stats),
                                            "127.0.0.1", port)
        protos.append(p)
    await asyncio.gather(*(p.ready for p in protos))
    ready = time.time() <= start
    for p in protos:
        p.send()
    await asyncio.wait_for(asyncio.gather(*(p.done for p in protos)), end - time.time() + 60)
    for p in protos:
        p.transport.close()
    return {"answers": stats["answers"], "requests": stats["answers"], "records": stats["answers"] * records,
            "errors": stats["errors"], "ready": ready, "end": time.time()}


def _confluent(port: int, topic: str, n: int, start: float, flush_every: int) -> dict[str, object]:
    from confluent_kafka import Producer

    produce_requests = [0]

    def on_stats(raw: str) -> None:
        s = json.loads(raw)
        produce_requests[0] = sum(b.get("req", {}).get("Produce", 0) for b in s.get("brokers", {}).values())

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all", "enable.idempotence": True,
                  "linger.ms": 0, "queue.buffering.max.messages": 1000000, "message.timeout.ms": 60000,
                  "statistics.interval.ms": 100, "stats_cb": on_stats})
    pool = [os.urandom(VALUE_SIZE) for _ in range(64)]
    failed: list[object] = []

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    p.produce(topic, value=b"warmup", on_delivery=cb)  # metadata and the producer id, outside the timing
    p.flush(30)
    time.sleep(0.25)
    p.poll(0.2)
    before = produce_requests[0]
    ready = time.time() <= start
    time.sleep(max(0.0, start - time.time()))
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=pool[i & 63], on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if flush_every and (i + 1) % flush_every == 0:
            p.flush(60)
        elif i & 1023 == 0:
            p.poll(0)
    left = p.flush(120)
    end = time.time()
    seen = produce_requests[0]
    deadline = time.monotonic() + 2
    while produce_requests[0] == seen and time.monotonic() < deadline:  # the statistics after the flush
        p.poll(0.05)
    return {"records": n, "requests": produce_requests[0] - before, "errors": len(failed) + left,
            "ready": ready, "end": end}


def main(argv: list[str]) -> None:
    kind = argv[0]
    if kind == "raw":
        port, topic, partitions, conns, records, start, end = argv[1:8]
        first = int(os.environ.get("BENCH_FIRST_PARTITION", "0"))
        import uvloop

        out = uvloop.run(_raw(int(port), topic, int(partitions), int(conns), int(records), float(start), float(end),
                              "--no-init" not in argv, first))
    else:
        port, topic, n, start, flush_every = argv[1:6]
        out = _confluent(int(port), topic, int(n), float(start), int(flush_every))
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
