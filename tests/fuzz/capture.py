"""Capture the requests real Kafka clients send to kcoord, for the live network fuzzer.

A recording TCP proxy (asyncio, loopback only) sits between the clients and a running kcoord
and keeps every client->server request frame (split on the 4-byte size prefix). The server is
started with `advertised.listeners` pointing at the proxy, so the clients' later connections
(the group coordinator, partition leaders) go through it too, not only the bootstrap one.

Through it run, in parallel, the real clients doing what applications do: bootstrap and
metadata, create a topic, produce (idempotent, compressed), join a consumer group
(join/sync/heartbeat), fetch, commit, fetch the committed offsets, list offsets, leave, and
the admin calls (list/describe/delete groups, delete offsets):

    kafka-python, aiokafka, confluent-kafka (librdkafka) - the programs in this file
    Java kafka-clients 3.9 and kafkajs - tests/compat (tests/clientlib.py runs them)

The frames are deduplicated (ignoring the correlation id) into a Corpus. As a program:

    python tests/fuzz/capture.py OUT.jsonl     # start a kcoord, capture, write the corpus
                                               # (KCOORD_FUZZ_CORPUS=OUT.jsonl: the test replays it)
    python tests/fuzz/capture.py client LIB BOOTSTRAP TOPIC GROUP N   # one client run (internal)
"""
from __future__ import annotations

import asyncio
import json
import struct
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS) not in sys.path:  # run as a program: clientlib and conftest live in tests/
    sys.path.insert(0, str(TESTS))

MESSAGES = 40  # per client
PARTITIONS = 3
# Bounds for a client run on a busy machine: generous, since each run ends as soon as it has
# done its work; they only limit a run that cannot finish.
CLIENT_TIMEOUT = 180.0
IDLE_MS = 30_000  # a consumer that got no record for this long (after its assignment) gives up
CONSUME_SECONDS = 120.0


# ---- the recording proxy ----------------------------------------------------------------------


class RecordingProxy:
    """127.0.0.1:<port> -> 127.0.0.1:<upstream>, keeping every request frame sent upstream.

    Runs its own event loop in a daemon thread; `frames` is appended to from that thread."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.frames: list[bytes] = []
        self.connections = 0
        self.bad_streams: list[str] = []  # a size prefix no real client sends
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="recording-proxy", daemon=True)
        self._tasks: set[asyncio.Task] = set()
        self.port = 0

    def start(self) -> RecordingProxy:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop)
        self._server = fut.result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            assert self._server is not None
            self._server.close()
            for t in list(self._tasks):
                t.cancel()
            await asyncio.sleep(0)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def snapshot(self) -> list[bytes]:
        with self._lock:
            return list(self.frames)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            self._tasks.discard(task)
            return
        try:
            await asyncio.gather(self._pump(reader, up_writer, record=True),
                                 self._pump(up_reader, writer, record=False))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for w in (writer, up_writer):
                w.close()
            self._tasks.discard(task)

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, record: bool) -> None:
        buf = bytearray()
        parsing = record
        try:
            while data := await src.read(1 << 16):
                if parsing:
                    buf += data
                    while len(buf) >= 4:
                        (size,) = struct.unpack_from(">i", buf)
                        if size < 0 or size > 100 << 20:
                            self.bad_streams.append(f"size prefix {size}")
                            parsing = False
                            break
                        if len(buf) < 4 + size:
                            break
                        with self._lock:
                            self.frames.append(bytes(buf[4:4 + size]))
                        del buf[:4 + size]
                dst.write(data)
                await dst.drain()
        finally:
            try:
                dst.write_eof()
            except (OSError, RuntimeError):
                pass


# ---- the corpus -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    api: int
    version: int
    client_id: str
    frame: bytes  # header + body, no size prefix, correlation id 0
    body_at: int  # where the body starts (after the request header)


@dataclass
class Corpus:
    frames: list[Frame]
    captured: int  # frames recorded before deduplication
    clients: dict[str, int] = field(default_factory=dict)  # client family -> deduplicated frames

    def mix(self) -> dict[tuple[int, int], int]:
        """(api, version) -> deduplicated frames."""
        return dict(sorted(Counter((f.api, f.version) for f in self.frames).items()))

    def describe(self) -> str:
        from kcoord.protocol.api import API_TABLE

        def name(api: int) -> str:
            spec = API_TABLE.get(api)
            return spec.key.name if spec is not None else f"api{api}"

        by_api: dict[int, list[str]] = {}
        for (api, v), n in self.mix().items():
            by_api.setdefault(api, []).append(f"v{v}x{n}")
        lines = [f"{len(self.frames)} distinct frames of {len(self.captured_apis())} APIs / "
                 f"{len(self.mix())} api-versions from {self.captured} captured; by client: "
                 + ", ".join(f"{c} {n}" for c, n in sorted(self.clients.items()))]
        lines += [f"  {name(api)}({api}): {' '.join(vs)}" for api, vs in sorted(by_api.items())]
        return "\n".join(lines)

    def captured_apis(self) -> set[int]:
        return {f.api for f in self.frames}

    def save(self, path: Path) -> None:
        with open(path, "w") as out:
            out.write(json.dumps({"captured": self.captured, "clients": self.clients}) + "\n")
            for f in self.frames:
                out.write(json.dumps({"api": f.api, "v": f.version, "client": f.client_id,
                                      "body_at": f.body_at, "hex": f.frame.hex()}) + "\n")

    @classmethod
    def load(cls, path: Path) -> Corpus:
        lines = Path(path).read_text().splitlines()
        head = json.loads(lines[0])
        frames = []
        for ln in lines[1:]:
            d = json.loads(ln)
            frames.append(Frame(d["api"], d["v"], d["client"], bytes.fromhex(d["hex"]), d["body_at"]))
        return cls(frames, head["captured"], head["clients"])


def client_family(client_id: str) -> str:
    """Which client library sent a frame, from its client_id (set by each program here)."""
    cid = client_id.lower()
    for family, marks in (("kafkajs", ("kafkajs",)), ("java", ("java", "consumer-", "producer-", "adminclient-")),
                          ("kafka-python", ("kafka-python",)), ("aiokafka", ("aiokafka",)),
                          ("confluent-kafka", ("confluent", "rdkafka"))):
        if any(m in cid for m in marks):
            return family
    return client_id or "?"


def build_corpus(raw: Iterable[bytes]) -> Corpus:
    """Deduplicate request frames (correlation id zeroed) and parse their headers."""
    from kcoord.protocol.api import API_TABLE
    from kcoord.protocol.headers import read_client_id

    seen: dict[bytes, Frame] = {}
    captured = 0
    for frame in raw:
        captured += 1
        if len(frame) < 8:
            continue
        api, version = struct.unpack_from(">hh", frame)
        norm = frame[:4] + b"\0\0\0\0" + frame[8:]
        if norm in seen:
            continue
        spec = API_TABLE.get(api)
        # Header v1 (client_id) for APIs kcoord does not serve: every client sends one.
        hv = spec.request_header_version(version) if spec is not None and version >= 0 else 1
        try:
            client_id, body_at = read_client_id(norm, hv)
        except ValueError:
            client_id, body_at = None, 8
        seen[norm] = Frame(api, version, client_id or "", norm, body_at)
    frames = list(seen.values())
    clients = Counter(client_family(f.client_id) for f in frames)
    return Corpus(frames, captured, dict(sorted(clients.items())))


# ---- driving the real clients -----------------------------------------------------------------


@dataclass
class ClientRun:
    name: str
    ok: bool
    seconds: float
    detail: str


def _python_client(lib: str, bootstrap: str, topic: str, group: str) -> Callable[[], str]:
    def go() -> str:
        import clientlib

        res = clientlib.run([sys.executable, Path(__file__).resolve(), "client", lib, bootstrap, topic, group,
                             MESSAGES], timeout=CLIENT_TIMEOUT)
        done = [r for r in res.records() if r.get("kind") == "done"]
        if not done or done[0].get("consumed") != MESSAGES:
            raise AssertionError(f"{lib}: no complete run\n{res.describe()}")
        return json.dumps(done[0])
    return go


def _consumed_all(client: str, res) -> None:
    """The consumer read every message and committed: its Fetch and OffsetCommit frames are in
    the capture. A consumer that stopped early (a slow join, a slow first fetch) is a failed
    capture, reported with its output, not a corpus that silently lacks them."""
    done = res.kinds("done")
    if not done or done[0].get("count") != MESSAGES or not res.kinds("committed"):
        raise AssertionError(f"{client}: consumed {done[0].get('count') if done else None} of {MESSAGES} "
                             f"messages, {len(res.kinds('committed'))} commits\n{res.describe()}")


def _java(bootstrap: str, topic: str, group: str) -> Callable[[], str]:
    def go() -> str:
        import clientlib

        clientlib.kcoord_java("admin", bootstrap, topic, PARTITIONS, group, timeout=CLIENT_TIMEOUT, check=False)
        clientlib.kcoord_java("findcoordinator", bootstrap, group, timeout=CLIENT_TIMEOUT)
        acked = clientlib.kcoord_java("produce", bootstrap, topic, MESSAGES, "j", timeout=CLIENT_TIMEOUT).one("produced")
        # It stops at MESSAGES; the idle limit only ends a run that cannot get them all.
        got = clientlib.kcoord_java("consume", bootstrap, topic, group, MESSAGES, IDLE_MS, timeout=CLIENT_TIMEOUT)
        _consumed_all("java", got)
        return json.dumps({"produced": acked, "consumed": got.records()[-1:]})
    return go


def _kafkajs(bootstrap: str, topic: str, group: str) -> Callable[[], str]:
    def go() -> str:
        import clientlib

        clientlib.kafkajs("admin", bootstrap, topic, PARTITIONS, group, timeout=CLIENT_TIMEOUT, check=False)
        acked = clientlib.kafkajs("produce", bootstrap, topic, MESSAGES, timeout=CLIENT_TIMEOUT).one("produced")
        got = clientlib.kafkajs("consume", bootstrap, topic, group, MESSAGES, IDLE_MS, timeout=CLIENT_TIMEOUT)
        _consumed_all("kafkajs", got)
        return json.dumps({"produced": acked, "consumed": got.records()[-1:]})
    return go


CLIENTS = ("kafka-python", "aiokafka", "confluent", "java", "kafkajs")


def run_clients(bootstrap: str, tag: str, clients: Iterable[str] = CLIENTS) -> list[ClientRun]:
    """Every client's full run against `bootstrap` (the proxy), in parallel; each on its own
    topic and group named cap-<client>-<tag>."""
    jobs: dict[str, Callable[[], str]] = {}
    for c in clients:
        topic, group = f"cap-{c}-{tag}", f"cap-{c}-{tag}-g"
        if c in ("kafka-python", "aiokafka", "confluent"):
            jobs[c] = _python_client(c, bootstrap, topic, group)
        elif c == "java":
            jobs[c] = _java(bootstrap, topic, group)
        elif c == "kafkajs":
            jobs[c] = _kafkajs(bootstrap, topic, group)
        else:
            raise ValueError(c)

    def timed(name: str, fn: Callable[[], str]) -> ClientRun:
        t0 = time.monotonic()
        try:
            detail, ok = fn(), True
        except Exception as e:  # noqa: BLE001 - reported (with the client's output) to the caller
            detail, ok = str(e), False
        return ClientRun(name, ok, time.monotonic() - t0, detail)

    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(lambda kv: timed(*kv), jobs.items()))


# ---- the Python client programs (run in their own processes) ----------------------------------


def _emit(kind: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"kind": kind, **fields}, default=str) + "\n")
    sys.stdout.flush()


def _step(name: str, fn: Callable[[], object]) -> object:
    """An optional call (an admin API kcoord may not serve): its failure is printed, not fatal."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        _emit("step_error", step=name, error=repr(e)[:300])
        return None


def _client_kafka_python(bootstrap: str, topic: str, group: str, n: int) -> int:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic, OffsetSpec

    cid = "cap-kafka-python"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=f"{cid}-admin", request_timeout_ms=15000)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    _step("describe_cluster", admin.describe_cluster)
    _step("list_topics", admin.list_topics)
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"{cid}-producer", acks="all",
                             enable_idempotence=True, compression_type="gzip", linger_ms=5)
    for i in range(n):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=f"{cid}-consumer",
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=300, fetch_max_wait_ms=100, request_timeout_ms=15000)
    deadline = time.monotonic() + CONSUME_SECONDS
    while not consumer.partitions_for_topic(topic) and time.monotonic() < deadline:
        time.sleep(0.1)
    consumer.subscribe([topic])
    got = 0
    while got < n and time.monotonic() < deadline:
        for msgs in consumer.poll(300).values():
            got += len(msgs)
        consumer.commit()
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    committed = {tp.partition: consumer.committed(tp) for tp in tps}
    _step("end_offsets", lambda: consumer.end_offsets(tps))
    _step("beginning_offsets", lambda: consumer.beginning_offsets(tps))
    _step("offsets_for_times", lambda: consumer.offsets_for_times({tp: 1_700_000_000_000 for tp in tps}))
    # At least one heartbeat answered (the corpus needs Heartbeat frames), however slow the machine.
    beat = consumer._coordinator.heartbeat  # noqa: SLF001 - kafka-python has no public hook for it
    while beat.last_receive == float("-inf") and time.monotonic() < deadline:
        consumer.poll(100)
    consumer.close()
    _step("list_groups", admin.list_groups)
    _step("describe_groups", lambda: admin.describe_groups([group]))
    _step("list_group_offsets", lambda: admin.list_group_offsets({group: None}))
    _step("list_partition_offsets", lambda: admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps}))
    _step("delete_group_offsets", lambda: admin.delete_group_offsets(group, tps[:1]))
    _step("delete_groups", lambda: admin.delete_groups([group]))
    admin.close()
    _emit("done", consumed=got, committed=committed)
    return 0


def _client_confluent(bootstrap: str, topic: str, group: str, n: int) -> int:
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    cid = "cap-confluent"
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": f"{cid}-admin"})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    _step("list_topics", lambda: admin.list_topics(timeout=10))
    _step("describe_cluster", lambda: admin.describe_cluster(request_timeout=10).result(15))
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": f"{cid}-producer", "enable.idempotence": True,
                         "compression.type": "lz4", "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": f"{cid}-consumer", "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + CONSUME_SECONDS
    while got < n and time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(100, 0.3) if m.error() is None]
        got += len(msgs)
        if msgs:
            consumer.commit(asynchronous=False)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    committed = {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}
    _step("watermarks", lambda: [consumer.get_watermark_offsets(tp, timeout=5) for tp in tps])
    _step("offsets_for_times",
          lambda: consumer.offsets_for_times([TopicPartition(topic, p, 1_700_000_000_000) for p in range(PARTITIONS)],
                                             timeout=5))
    time.sleep(1.0)
    consumer.close()
    _step("list_groups", lambda: admin.list_consumer_groups().result(15))
    _step("describe_groups", lambda: admin.describe_consumer_groups([group])[group].result(15))
    _step("list_group_offsets",
          lambda: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15))
    _step("delete_groups", lambda: admin.delete_consumer_groups([group])[group].result(15))
    _emit("done", consumed=got, committed=committed)
    return 0


def _client_aiokafka(bootstrap: str, topic: str, group: str, n: int) -> int:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    cid = "cap-aiokafka"

    async def main() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id=f"{cid}-admin", request_timeout_ms=15000)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=f"{cid}-producer", enable_idempotence=True,
                                    compression_type="snappy", linger_ms=5)
        await producer.start()
        try:
            for i in range(n):
                await producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=f"{cid}-consumer",
                                    auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                                    heartbeat_interval_ms=300, fetch_max_wait_ms=100, request_timeout_ms=15000)
        await consumer.start()
        got = 0
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        try:
            deadline = time.monotonic() + CONSUME_SECONDS
            while got < n and time.monotonic() < deadline:
                for msgs in (await consumer.getmany(timeout_ms=300)).values():
                    got += len(msgs)
                await consumer.commit()
            committed = {tp.partition: await consumer.committed(tp) for tp in tps}
            await consumer.end_offsets(tps)
            await consumer.beginning_offsets(tps)
            await consumer.offsets_for_times({tp: 1_700_000_000_000 for tp in tps})
            await asyncio.sleep(1.0)
        finally:
            await consumer.stop()
        for name, coro in (("list_groups", admin.list_consumer_groups()),
                           ("describe_groups", admin.describe_consumer_groups([group])),
                           ("list_group_offsets", admin.list_consumer_group_offsets(group)),
                           ("find_coordinator", admin.find_coordinator(group)),
                           ("describe_cluster", admin.describe_cluster())):
            try:
                await coro
            except Exception as e:  # noqa: BLE001
                _emit("step_error", step=name, error=repr(e)[:300])
        await admin.close()
        _emit("done", consumed=got, committed=committed)
        return 0

    return asyncio.run(main())


def capture(srv, clients: Iterable[str] = CLIENTS) -> tuple[Corpus, list[ClientRun]]:
    """Start `srv` (a conftest.KcoordProcess, not yet started) behind a RecordingProxy, run the
    clients through it, then restart `srv` advertising its own port again: it keeps the topics
    (and topic ids), offsets and groups the clients left, ready to be fuzzed."""
    import uuid

    proxy = RecordingProxy(srv.port).start()
    srv.overrides["advertised.listeners"] = f"PLAINTEXT://127.0.0.1:{proxy.port}"
    try:
        srv.start()
        runs = run_clients(f"127.0.0.1:{proxy.port}", uuid.uuid4().hex[:6], clients)
    finally:
        proxy.stop()
        del srv.overrides["advertised.listeners"]
        if srv.alive():
            srv.restart()
    return build_corpus(proxy.snapshot()), runs


def main(argv: list[str]) -> int:
    if len(argv) == 7 and argv[1] == "client":
        lib, bootstrap, topic, group, n = argv[2], argv[3], argv[4], argv[5], int(argv[6])
        return {"kafka-python": _client_kafka_python, "confluent": _client_confluent,
                "aiokafka": _client_aiokafka}[lib](bootstrap, topic, group, n)
    if len(argv) == 2:
        import tempfile

        sys.path.insert(0, str(TESTS.parent))
        from conftest import KcoordProcess

        srv = KcoordProcess(Path(tempfile.mkdtemp(prefix="kcoord-capture-")) / "data")
        try:
            corpus, runs = capture(srv)
        finally:
            srv.stop()
        for r in runs:
            print(f"{r.name}: {'ok' if r.ok else 'FAILED'} in {r.seconds:.1f}s {r.detail[:2000]}")
        corpus.save(Path(argv[1]))
        print(corpus.describe())
        return 0 if all(r.ok for r in runs) else 1
    sys.stderr.write("usage: capture.py OUT.jsonl | capture.py client LIB BOOTSTRAP TOPIC GROUP N\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
