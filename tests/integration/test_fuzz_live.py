"""Live network fuzzing: 100,000 mutated frames of real clients' captured traffic against the
real server, while a real consumer group works on it.

1. Capture (tests/fuzz/capture.py): kafka-python, aiokafka, confluent-kafka (librdkafka), Java
   kafka-clients and kafkajs run their ordinary lives (bootstrap, create a topic, idempotent
   compressed produce, a consumer group: join/sync/heartbeat, fetch, commit, offset fetch,
   list offsets, leave; admin: list/describe/delete groups, delete offsets) through a recording
   proxy in front of the server under test. Every request frame they sent is kept and
   deduplicated: the corpus (its api/version mix is printed and checked).
2. A healthy group starts on the same server: a kafka-python and a confluent-kafka member of one
   group on a 4-partition topic, fed by a confluent-kafka producer.
3. Fuzz (tests/fuzz/netfuzz.py): KCOORD_FUZZ_FRAMES (100,000) mutated corpus frames (field by
   field or byte by byte), bounded by KCOORD_FUZZ_SECONDS, pipelined in batches on parallel
   connections; frames the server never read because it closed the connection at an earlier
   one are sent again, so none is dropped; every response is checked (framing, order, a body
   that decodes). A CreateTopics mutated to ask for more than 64 partitions is not sent: the
   server would create every partition's log (up to Kafka's 10,000-record limit per request).
4. Meanwhile the server's RSS is sampled, and the group's progress: in every time slice each
   member consumes and commits and the producer's writes are acknowledged.

Afterwards: the server is alive, its RSS stayed bounded, no response was malformed, its log has
no internal error, the group rebalanced at most MAX_REBALANCES times, consumed every produced
message and committed the end offsets, and a new kafka-python group works.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from clientlib import Background, python_member, wait_balanced
from conftest import KcoordProcess, committed, unique
from fuzz.capture import CLIENTS, ClientRun, Corpus, capture, client_family
from fuzz.netfuzz import Mutator, NetworkFuzzer, Stats, seeds_module
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from kcoord.protocol.api import API_TABLE, ApiKey

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

FRAMES = int(os.environ.get("KCOORD_FUZZ_FRAMES", "100000"))
# whichever comes first: a quiet machine sends all the frames in ~60 s; on a busy one the budget
# ends the run, which must still have delivered MIN_DELIVERED frames (the rate is not asserted)
TIME_BUDGET = float(os.environ.get("KCOORD_FUZZ_SECONDS", "360"))
MIN_DELIVERED = min(FRAMES, 25_000)
SEED = int(os.environ.get("KCOORD_FUZZ_SEED", "20240811"))
CORPUS_FILE = os.environ.get("KCOORD_FUZZ_CORPUS")  # replay a saved corpus instead of capturing
CONNECTIONS, BATCH, IDLE = 10, 4, 1.0  # batch: ~2 frames are processed per connection (most
# mutations that do not decode close it); idle: a request parked longer is left to the server
RSS_LIMIT_KB = 200 * 1024
RSS_GROWTH_LIMIT_KB = 100 * 1024  # over the RSS measured when the fuzzing starts
SLICE = 20.0  # seconds: the healthy group must make progress in every slice (of a shared machine)
HEALTHY_SESSION_MS = 30_000  # a member starved of CPU for a few seconds is not a rebalance
MAX_REBALANCES = 1
HEALTHY_PARTITIONS = 4
PRODUCE_PER_SECOND = 40
# What the real clients must have sent for the corpus to count as their traffic.
REQUIRED_APIS = {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.CREATE_TOPICS, ApiKey.PRODUCE, ApiKey.FETCH,
                 ApiKey.LIST_OFFSETS, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
                 ApiKey.HEARTBEAT, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.LEAVE_GROUP,
                 ApiKey.INIT_PRODUCER_ID}


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def api_name(api: int) -> str:
    spec = API_TABLE.get(api)
    return spec.key.name if spec is not None else f"api{api}"


# ---- the healthy group ------------------------------------------------------------------------


class HealthyGroup:
    """Two members (kafka-python, confluent-kafka) of one group and a confluent-kafka producer
    writing PRODUCE_PER_SECOND keyed messages a second, each acknowledgement recorded."""

    def __init__(self, srv: KcoordProcess) -> None:
        self.srv = srv
        self.topic, self.group = unique("healthy"), unique("healthy-g")
        self.members: list[Background] = []
        self.acked: list[tuple[int, int]] = []  # (partition, offset)
        self.produce_errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="healthy-producer", daemon=True)

    def start(self) -> HealthyGroup:
        admin = KafkaAdminClient(bootstrap_servers=self.srv.bootstrap, request_timeout_ms=10000)
        try:
            admin.create_topics([NewTopic(self.topic, HEALTHY_PARTITIONS, 1)])
        finally:
            admin.close()
        self._thread.start()
        for lib in ("kafka-python", "confluent"):
            self.members.append(python_member(lib, self.srv.bootstrap, self.topic, self.group,
                                              name=f"healthy-{lib}", deadline=900,
                                              session_timeout_ms=HEALTHY_SESSION_MS))
        wait_balanced(self.members, HEALTHY_PARTITIONS, 90, "the healthy group's first balance")
        return self

    def _produce(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.srv.bootstrap, "client.id": "healthy-producer", "acks": "all",
                      "linger.ms": 0, "message.timeout.ms": 60000})

        def done(err, msg) -> None:
            if err is not None:
                self.produce_errors.append(str(err))
            else:
                self.acked.append((msg.partition(), msg.offset()))

        i, due = 0, time.monotonic()
        while not self._stop.is_set():
            p.produce(self.topic, key=b"h%d" % i, value=b"healthy-%d" % i, on_delivery=done)
            i += 1
            due += 1.0 / PRODUCE_PER_SECOND
            while (left := due - time.monotonic()) > 0:
                p.poll(left)
        p.flush(60)

    def stop_producing(self) -> None:
        self._stop.set()
        self._thread.join(90)

    def progress(self) -> tuple[int, ...]:
        """(acked, then per member: records consumed, commits done, assignments received)."""
        out = [len(self.acked)]
        for m in self.members:
            out += [len(m.consumed()), len(m.events("committed")), len(m.events("assigned"))]
        return tuple(out)

    def summary(self) -> str:
        parts = [f"{len(self.acked)} messages produced"]
        for m in self.members:
            parts.append(f"{m.name}: {len(m.consumed())} consumed, {len(m.events('committed'))} commits, "
                         f"{len(m.events('assigned'))} assignments")
        return "; ".join(parts)

    def close(self) -> None:
        for m in self.members:
            if m.alive():
                try:
                    m.close()
                except AssertionError:
                    m.kill()


# ---- the run ----------------------------------------------------------------------------------


@dataclass
class Sample:
    t: float
    rss_kb: int
    progress: tuple[int, ...]


@dataclass
class LiveRun:
    srv: KcoordProcess
    corpus: Corpus
    captures: list[ClientRun]
    healthy: HealthyGroup
    stats: Stats
    huge_create_topics: int = 0
    samples: list[Sample] = field(default_factory=list)
    fuzz_started: float = 0.0
    fuzz_ended: float = 0.0
    rss_before: int = 0
    server_died: str = ""
    log_start: int = 0
    corpus_path: Path | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def rebalances(self) -> int:
        """Assignments the members received after the fuzzing started (the most of any member)."""
        first = next((s for s in self.samples if s.t >= self.fuzz_started), None)
        if first is None:
            return 0
        return max(len(m.events("assigned")) - first.progress[3 + 3 * k]
                   for k, m in enumerate(self.healthy.members))

    def report(self) -> str:
        peak = max(s.rss_kb for s in self.samples) if self.samples else 0
        by_api = ", ".join(f"{api_name(a)} {n}" for a, n in self.stats.by_api.most_common())
        return (f"corpus: {self.corpus.describe()}\n"
                f"fuzz: {self.stats.summary()}; {self.huge_create_topics} CreateTopics over "
                f"{seeds_module().MAX_FUZZ_PARTITIONS} partitions not sent\n"
                f"delivered per API: {by_api}\n"
                f"refused per API: {', '.join(f'{api_name(a)} {n}' for a, n in self.stats.refused_by_api.most_common())}\n"
                f"RSS: {self.rss_before // 1024} MB before, peak {peak // 1024} MB, "
                f"{len(self.samples)} samples\n"
                f"healthy group: {self.healthy.summary()}; {self.rebalances()} rebalances while fuzzing\n"
                f"timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()))


class Monitor(threading.Thread):
    """Samples the server's RSS and the healthy group's progress every 0.5 s."""

    def __init__(self, run: LiveRun) -> None:
        super().__init__(name="fuzz-monitor", daemon=True)
        self.run_ = run
        self.stop_event = threading.Event()

    def run(self) -> None:
        r = self.run_
        assert r.srv.proc is not None
        while not self.stop_event.is_set():
            if not r.srv.alive():
                r.server_died = f"server exited with {r.srv.proc.returncode}"
                return
            r.samples.append(Sample(time.monotonic(), rss_kb(r.srv.proc.pid), r.healthy.progress()))
            self.stop_event.wait(0.5)


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveRun:
    tmp = tmp_path_factory.mktemp("fuzz-live")
    srv = KcoordProcess(tmp / "data")
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    if CORPUS_FILE:
        corpus, runs = Corpus.load(Path(CORPUS_FILE)), []
        srv.start()
    else:
        corpus, runs = capture(srv, CLIENTS)
    timings["capture"] = time.monotonic() - t0
    corpus_path = tmp / "corpus.jsonl"
    corpus.save(corpus_path)
    failed = [r for r in runs if not r.ok]
    if failed:
        srv.stop()
        pytest.fail("capture: client runs failed:\n" + "\n".join(f"{r.name}: {r.detail}" for r in failed))
    healthy = HealthyGroup(srv)
    try:
        t1 = time.monotonic()
        healthy.start()
        timings["healthy group start"] = time.monotonic() - t1
        mutator = Mutator(corpus, SEED)
        fuzzer = NetworkFuzzer(srv.port, mutator, FRAMES, TIME_BUDGET, connections=CONNECTIONS, batch=BATCH,
                               idle=IDLE)
        run = LiveRun(srv, corpus, runs, healthy, fuzzer.stats, corpus_path=corpus_path, timings=timings)
        assert srv.proc is not None
        run.rss_before = rss_kb(srv.proc.pid)
        monitor = Monitor(run)
        monitor.start()
        run.fuzz_started = time.monotonic()
        fuzzer.run()
        run.fuzz_ended = time.monotonic()
        timings["fuzz"] = run.fuzz_ended - run.fuzz_started
        run.huge_create_topics = mutator.huge_create_topics
        # Let the group show a last slice of progress after the fuzzing, then stop feeding it.
        time.sleep(1.0)
        monitor.stop_event.set()
        monitor.join(5)
        t2 = time.monotonic()
        healthy.stop_producing()
        drain_healthy(healthy, timeout=120)
        timings["healthy group drain"] = time.monotonic() - t2
        print("\n" + run.report())
        yield run
    finally:
        healthy.close()
        srv.stop()


def drain_healthy(h: HealthyGroup, timeout: float) -> None:
    """Wait until the members have consumed every acknowledged message and committed past it
    (the commit follows each batch: wait for it, not for a fixed time)."""
    want = set(h.acked)
    ends: dict[int, int] = {}
    for p, o in want:
        ends[p] = max(ends.get(p, 0), o + 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = {(p, o) for m in h.members for p, o, _k in m.consumed()}
        if want <= got:
            break
        time.sleep(0.2)
    while time.monotonic() < deadline:
        try:
            if committed(h.srv.bootstrap, h.group, h.topic) == ends:
                return
        except Exception:  # noqa: BLE001 - a slow coordinator answer: look again
            pass
        time.sleep(0.5)


# ---- the checks -------------------------------------------------------------------------------


def test_corpus_is_real_client_traffic(live: LiveRun) -> None:
    c = live.corpus
    if not CORPUS_FILE:
        assert {r.name for r in live.captures} == set(CLIENTS)
        families = set(c.clients)
        assert {"kafka-python", "aiokafka", "confluent-kafka", "java", "kafkajs"} <= families, c.describe()
        # every client's own frames (bootstrap, produce, group) are in, not only one client's
        for fam in ("kafka-python", "aiokafka", "confluent-kafka", "java", "kafkajs"):
            apis = {f.api for f in c.frames if client_family(f.client_id) == fam}
            assert {ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.JOIN_GROUP,
                    ApiKey.OFFSET_COMMIT} <= apis, (fam, sorted(api_name(a) for a in apis))
    missing = REQUIRED_APIS - c.captured_apis()
    assert not missing, f"the captured traffic lacks {[api_name(a) for a in missing]}\n{c.describe()}"
    assert len(c.mix()) >= 30, c.describe()


def test_server_survives_100k_mutated_frames(live: LiveRun) -> None:
    st, srv = live.stats, live.srv
    assert not live.server_died and srv.alive(), f"{live.server_died}\n{srv.log_text()[-3000:]}"
    assert st.generated >= FRAMES or live.fuzz_ended - live.fuzz_started >= TIME_BUDGET - 1
    # Every generated frame reached the server (frames never read after a close were resent),
    # except those still queued when the time budget ran out.
    assert st.delivered + st.unsent >= st.generated, st.summary()
    assert st.delivered >= MIN_DELIVERED, (
        f"only {st.delivered} of {FRAMES} frames delivered within {TIME_BUDGET:.0f}s: {st.summary()}")
    # Non-vacuity: the mutations reach handlers, they are not all refused at the decoder.
    assert st.answered > st.delivered // 4, st.summary()
    assert not st.bad_responses, f"SERVER BUG: {len(st.bad_responses)} malformed responses: {st.bad_responses[:5]}"


def test_rss_bounded_during_fuzzing(live: LiveRun) -> None:
    assert live.samples, "no RSS samples"
    peak = max(s.rss_kb for s in live.samples)
    assert peak < RSS_LIMIT_KB, f"RSS peaked at {peak // 1024} MB\n{live.report()}"
    assert peak - live.rss_before < RSS_GROWTH_LIMIT_KB, (
        f"RSS grew from {live.rss_before // 1024} MB to {peak // 1024} MB\n{live.report()}")


def test_healthy_group_works_throughout(live: LiveRun) -> None:
    h = live.healthy
    samples = [s for s in live.samples if s.t >= live.fuzz_started]
    assert samples, "no progress samples"
    # progress in every SLICE seconds of the fuzzing (and the second after it): acks, and per
    # member records and commits (a shorter run is one slice)
    stalls = []
    span = samples[-1].t - live.fuzz_started
    n = max(1, int(span // SLICE))
    for i in range(n):
        lo, hi = live.fuzz_started + i * span / n, live.fuzz_started + (i + 1) * span / n
        a = next(s for s in samples if s.t >= lo).progress
        b = [s for s in samples if s.t <= hi + 1e-6][-1].progress
        if b[0] <= a[0]:
            stalls.append(f"slice {i}: no produce acknowledged")
        for k, m in enumerate(h.members):
            if b[1 + 3 * k] <= a[1 + 3 * k]:
                stalls.append(f"slice {i}: {m.name} consumed nothing")
            if b[2 + 3 * k] <= a[2 + 3 * k]:
                stalls.append(f"slice {i}: {m.name} committed nothing")
    assert not stalls, (f"the healthy group stalled while fuzzing: {stalls[:10]}\n"
                        + "\n".join(m.describe() for m in h.members))
    # at most MAX_REBALANCES rebalances while fuzzing, nothing lost, no errors
    assert live.rebalances() <= MAX_REBALANCES, "\n".join(m.describe() for m in h.members)
    for m in h.members:
        assert not m.events("lost"), m.describe()
        assert not m.events("error"), m.describe()
        assert m.alive(), m.describe()
    assert not h.produce_errors, h.produce_errors[:5]
    # every acknowledged message consumed, and the committed offsets are the end offsets
    consumed = {(p, o) for m in h.members for p, o, _k in m.consumed()}
    missing = set(h.acked) - consumed
    assert not missing, f"{len(missing)} of {len(h.acked)} acknowledged messages never consumed"
    ends: dict[int, int] = {}
    for p, o in h.acked:
        ends[p] = max(ends.get(p, 0), o + 1)
    assert len(ends) == HEALTHY_PARTITIONS and len(h.acked) >= PRODUCE_PER_SECOND * 5
    assert committed(live.srv.bootstrap, h.group, h.topic) == ends


def test_no_internal_errors_while_fuzzing(live: LiveRun) -> None:
    """Bad input is refused by closing the connection (one WARN line each); a handler that
    fails on input the decoder accepted is a server bug, logged as an internal error."""
    log = live.srv.log_text()[live.log_start:]
    internal = [ln for ln in log.splitlines() if "Unexpected error serving" in ln or "handler failed" in ln
                or "Traceback" in ln]
    assert not internal, (f"SERVER BUG: {len(internal)} internal errors while fuzzing "
                          f"(corpus {live.corpus_path}, seed {SEED}); where they were raised:\n"
                          + "\n".join(crash_sites(log)))


def test_consumer_group_works_after_fuzzing(live: LiveRun) -> None:
    srv = live.srv
    topic, group = unique("after-fuzz"), unique("after-fuzz-g")
    admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=15000)
    try:
        assert "__consumer_offsets" in admin.list_topics()
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=srv.bootstrap, request_timeout_ms=15000)
    try:
        for i in range(5):
            producer.send(topic, b"v%d" % i)
        producer.flush(10)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=srv.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=60000, request_timeout_ms=15000,
                             session_timeout_ms=6000, heartbeat_interval_ms=1000)
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 5:
                break
        assert got == [b"v%d" % i for i in range(5)]
        consumer.commit()
        assert consumer.committed(next(iter(consumer.assignment()))) == 5
    finally:
        consumer.close()


def crash_sites(log: str) -> list[str]:
    """The innermost frame and the exception of each distinct traceback in the log."""
    sites: set[str] = set()
    lines = log.splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("Traceback (most recent call last)"):
            j, last_file = i + 1, ""
            while j < len(lines) and lines[j].startswith(" "):
                if lines[j].lstrip().startswith("File "):
                    last_file = lines[j].strip()
                j += 1
            exc = lines[j] if j < len(lines) else "?"
            sites.add(f"{last_file} -> {exc}")
    return sorted(sites)
