"""A chained ETL of real clients, for tests and bench/bench_etl.py: consumer groups that consume
a topic, produce every record on to the next with an idempotent acks=all producer, and commit.

A source producer writes n small records to the first topic; each stage is a group of MEMBERS
members, every member its own process (spawned: librdkafka's threads do not survive a fork):
  etl-1 etl-a (7 partitions) -> etl-b (19): confluent-kafka, classic protocol, cooperative-sticky
  etl-2 etl-b -> etl-c (31):                kafka-python, classic protocol, range
  etl-3 etl-c -> (end):                     confluent-kafka, KIP-848 (group.protocol=consumer)
A member polls, produces what it got onward, flushes its producer and commits its position (at
least once: a rebalance may hand records to another member again). The chain is done when
every group has committed the end of its input topic and the last topic holds n records.
"""
from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable

TOPICS = {"etl-a": 7, "etl-b": 19, "etl-c": 31, "etl-once": 19}
Stage = tuple[str, str, "str | None", str]  # (group, source topic, destination topic or None, client kind)
STAGES: list[Stage] = [
    ("etl-1", "etl-a", "etl-b", "confluent-cooperative"),
    ("etl-2", "etl-b", "etl-c", "kafka-python-range"),
    ("etl-3", "etl-c", None, "confluent-kip848"),
]
ONE_HOP: list[Stage] = [("etl-once", "etl-once", None, "confluent-cooperative")]
MEMBERS = 3


# ---------------------------------------------------------------------------- child processes


def _source(bootstrap: str, topic: str, n: int, value_bytes: int, out: mp.Queue) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                  "queue.buffering.max.messages": 1_000_000})
    value = b"v" * value_bytes
    failed = []

    def cb(err, _msg):  # noqa: ANN001
        if err is not None:
            failed.append(err)

    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"%d" % i, value=value, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i & 1023 == 0:
            p.poll(0)
    left = p.flush(600)
    out.put(("source", time.process_time(), n if not left and not failed else -1))


def _confluent_member(bootstrap: str, group: str, src: str, dst: str | None, kind: str, stop_ev,  # noqa: ANN001
                      out: mp.Queue) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}
    if kind == "confluent-kip848":
        conf["group.protocol"] = "consumer"
    else:
        conf["partition.assignment.strategy"] = "cooperative-sticky"
        conf["session.timeout.ms"] = 30000
    c = Consumer(conf)
    c.subscribe([src])
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5}) if dst else None
    n = 0
    while not stop_ev.is_set():
        msgs = c.consume(num_messages=1000, timeout=0.2)
        got = [m for m in msgs if m.error() is None]
        if not got:
            continue
        if p is not None:
            for m in got:
                while True:
                    try:
                        p.produce(dst, key=m.key(), value=m.value())
                        break
                    except BufferError:
                        p.poll(0.01)
            p.flush(120)
        n += len(got)
        try:
            c.commit(asynchronous=False)
        except KafkaException:
            pass  # a rebalance took the partitions: their records come again (at least once)
    c.close()
    out.put((group, time.process_time(), n))


def _kafka_python_member(bootstrap: str, group: str, src: str, dst: str | None, stop_ev,  # noqa: ANN001
                         out: mp.Queue) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError

    c = KafkaConsumer(src, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", max_poll_records=1000)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                      linger_ms=5) if dst else None
    n = 0
    while not stop_ev.is_set():
        polled = c.poll(timeout_ms=200)
        count = 0
        for records in polled.values():
            for r in records:
                if p is not None:
                    p.send(dst, key=r.key, value=r.value)
                count += 1
        if not count:
            continue
        if p is not None:
            p.flush(120)
        n += count
        try:
            c.commit()
        except KafkaError:
            pass  # rebalanced meanwhile: at least once
    c.close()
    if p is not None:
        p.close()
    out.put((group, time.process_time(), n))


def member(bootstrap: str, group: str, src: str, dst: str | None, kind: str, stop_ev, out) -> None:  # noqa: ANN001
    if kind.startswith("kafka-python"):
        _kafka_python_member(bootstrap, group, src, dst, stop_ev, out)
    else:
        _confluent_member(bootstrap, group, src, dst, kind, stop_ev, out)


# ---------------------------------------------------------------------------- the driver


def create_topics(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()])
    for f in fs.values():
        f.result(30)


class _Progress:
    """Whether each group committed the end of its input and the last topic holds n records."""

    def __init__(self, bootstrap: str, stages: list[tuple[str, str, str | None, str]]) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.tp = TopicPartition
        self.checks = []
        for group, src, _, _ in stages:
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
            self.checks.append((c, src))

    def ends(self, c, topic: str) -> list[int]:  # noqa: ANN001
        return [c.get_watermark_offsets(self.tp(topic, p), timeout=10)[1] for p in range(TOPICS[topic])]

    def done(self, n: int, last_topic: str) -> bool:
        for c, src in self.checks:
            ends = self.ends(c, src)
            if src == last_topic and sum(ends) < n:
                return False
            committed = c.committed([self.tp(src, p) for p in range(TOPICS[src])], timeout=10)
            if any(tp.offset < end for tp, end in zip(committed, ends, strict=True)):
                return False
        return True

    def close(self) -> None:
        for c, _ in self.checks:
            c.close()


def run_chain(bootstrap: str, n: int, value_bytes: int, stages: list[Stage], timeout_s: float,
              on_start: Callable[[], None] | None = None, on_end: Callable[[], None] | None = None) -> dict:
    """Run the chain once: start every member and the source, wait until done (or timeout_s).
    on_start / on_end run just before the first process starts and right after the chain is
    done (the bench reads the server's CPU and counters there). Returns finished (bool), wall
    (seconds), client_cpu (the clients' CPU seconds) and consumed (records the last stage read)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    stop_ev = ctx.Event()
    first_topic, last_topic = stages[0][1], stages[-1][1]
    procs = [ctx.Process(target=member, args=(bootstrap, g, s, d, k, stop_ev, out))
             for g, s, d, k in stages for _ in range(MEMBERS)]
    if on_start is not None:
        on_start()
    t0 = time.perf_counter()
    for pr in procs:
        pr.start()
    src = ctx.Process(target=_source, args=(bootstrap, first_topic, n, value_bytes, out))
    src.start()
    progress = _Progress(bootstrap, stages)
    finished = False
    try:
        deadline = t0 + timeout_s
        while time.perf_counter() < deadline:
            time.sleep(0.5)
            if not src.is_alive() and progress.done(n, last_topic):
                finished = True
                break
        wall = time.perf_counter() - t0
        if on_end is not None:
            on_end()
    finally:
        progress.close()
        stop_ev.set()
        try:
            results = [out.get(timeout=120) for _ in range(len(procs) + 1)]
        finally:
            for pr in [*procs, src]:
                pr.join(60)
                if pr.is_alive():
                    pr.kill()
    source_ok = any(r[0] == "source" and r[2] == n for r in results)
    return {"finished": finished and source_ok, "wall": wall, "client_cpu": sum(r[1] for r in results),
            "consumed": sum(r[2] for r in results if r[0] == stages[-1][0])}
