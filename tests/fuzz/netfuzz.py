"""Mutate captured request frames and send them to a live kcoord over many connections at once.

Each of `connections` workers keeps one TCP connection and writes batches of `batch` mutated
frames followed by a sentinel (an ApiVersions v0 request, never mutated), then reads the
responses. The server answers a connection's requests in order and closes the connection at the
first request it cannot answer, so for every batch we know how far the server got:

- the sentinel's answer arrives: every frame of the batch was processed (answered, or, for a
  Produce that asks for acks=0, processed without an answer);
- the connection closes first: the frames up to the last answered one were processed, the next
  one is the frame the server refused (it closed the connection because of it), and the rest
  were never read: they are sent again on a new connection, so every generated frame is
  eventually delivered rather than dropped (one caveat: a Produce mutated into acks=0 right
  before the refused frame is taken for the refused one, and the refused one is sent again);
- nothing arrives for `idle` seconds: the next frame is parked in the server (a long-poll
  Fetch, a JoinGroup waiting for a rebalance: legitimate), the fuzzer gives up on that
  connection and sends the rest again elsewhere.

Every response is checked: size prefix, correlation id in request order, and a body that
decodes under the request's API and version (tests/property/test_fuzz_dispatch.py's
check_response).
"""
from __future__ import annotations

import asyncio
import importlib.util
import random
import struct
import sys
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path

import uvloop

from fuzz.capture import Corpus, Frame
from kcoord.protocol.api import API_TABLE, ApiKey

TESTS = Path(__file__).resolve().parent.parent


def seeds_module():
    """tests/property/test_fuzz_dispatch.py (its interesting values, its response checker and
    its guard against CreateTopics of huge partition counts), loaded once."""
    name = "fuzz_seeds"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TESTS / "property" / "test_fuzz_dispatch.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # dataclasses look their module up
        spec.loader.exec_module(mod)
    return sys.modules[name]


FIELD_MUTATIONS = 0.4  # the share of frames mutated field by field (the rest: byte by byte)
INT_BOUNDS = {"int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
              "int64": (-2**63, 2**63 - 1), "uint16": (0, 2**16 - 1)}


class Mutator:
    """Mutated frames drawn from a corpus: an (api, version) uniformly (so rare requests such as
    DeleteGroups are fuzzed as often as Fetch), then one of its captured frames, then either

    - field by field (FIELD_MUTATIONS of the frames, see mutate_fields): decoded, 1-2 fields
      given hostile values of their type, encoded again; or
    - byte by byte, 1-3 of: set a byte to an interesting value, flip a bit, write an interesting
      int16/int32/varint, insert random bytes, delete bytes, duplicate a chunk, splice in the
      tail of another captured frame of the same API, truncate; and now and then the header's
      version is changed to another one (the body then decodes as the wrong version)."""

    OPS = "sfwidrpt"

    def __init__(self, corpus: Corpus, seed: int) -> None:
        self.seeds = seeds_module()
        self.rnd = random.Random(seed)
        classes: dict[tuple[int, int], list[Frame]] = {}
        self.by_api: dict[int, list[Frame]] = {}
        for f in corpus.frames:
            classes.setdefault((f.api, f.version), []).append(f)
            self.by_api.setdefault(f.api, []).append(f)
        self.classes = classes
        self.keys = sorted(classes)
        self.huge_create_topics = 0  # mutated CreateTopics over MAX_FUZZ_PARTITIONS, not sent

    def next(self) -> bytes:
        while True:
            key = self.rnd.choice(self.keys)
            out = self.mutate(self.rnd.choice(self.classes[key]))
            # A CreateTopics of a mutated partition count (up to Kafka's 10,000-record limit)
            # creates that many partition logs synchronously: skip what the property tests skip.
            if out[:2] == b"\x00\x13" and self.seeds._creates_huge_topic(out):
                self.huge_create_topics += 1
                continue
            return out

    def mutate(self, seed: Frame) -> bytes:
        if self.rnd.random() < FIELD_MUTATIONS:
            out = self.mutate_fields(seed)
            if out is not None:
                return out
        return self.mutate_bytes(seed)

    def mutate_fields(self, seed: Frame) -> bytes | None:
        """Decode the request, give 1-2 of its fields a hostile value of their own type (a
        boundary integer, an empty/null/oversized/internal name, an empty, null or repeated
        array, a truncated record batch) and encode it again: well-framed requests that pass
        the decoder and reach the handlers."""
        spec = API_TABLE.get(seed.api)
        v = seed.version
        if spec is None or not spec.min_version <= v <= spec.max_version:
            return None
        try:
            req = spec.request.decode(seed.frame[seed.body_at:], version=v)
        except Exception:  # noqa: BLE001 - a captured frame kcoord's schema cannot read: bytes only
            return None
        leaves: list[tuple[object, object]] = []

        def walk(obj: object) -> None:
            for fld in obj._struct._fields:  # type: ignore[attr-defined]
                if not fld.for_version_q(v):
                    continue
                leaves.append((obj, fld))
                val = getattr(obj, fld.name, None)
                if fld.is_struct_array() and val:
                    for item in val:
                        walk(item)
                elif fld.is_struct() and val is not None:
                    walk(val)

        walk(req)
        if not leaves:
            return None
        for _ in range(self.rnd.choice((1, 1, 2))):
            obj, fld = self.rnd.choice(leaves)
            setattr(obj, fld.name, self.hostile(fld, getattr(obj, fld.name, None), v))
        try:
            req._header = None  # a decoded message has no header slot; encode() looks at it
            body = bytes(req.encode(version=v))
        except Exception:  # noqa: BLE001 - a value the encoder refuses (too long for int16...)
            return None
        return seed.frame[:seed.body_at] + body

    def hostile(self, fld, val, v: int):  # noqa: ANN001, ANN201 - kafka-python field objects
        rnd = self.rnd
        t = fld._type_str
        nullable = fld.nullable_for_version_q(v)
        if t.startswith("[]"):
            if not val or rnd.random() < 0.3:
                return None if nullable and rnd.random() < 0.3 else []
            item = rnd.choice(val)
            return rnd.choice((val + [item], val + [item] * rnd.randint(2, 50), val[:1], val[::-1]))
        if t in INT_BOUNDS:
            lo, hi = INT_BOUNDS[t]
            cur = val if isinstance(val, int) else 0
            return max(lo, min(hi, rnd.choice((0, -1, 1, lo, hi, lo + 1, hi - 1, cur + 1, cur - 1, cur * 2,
                                               cur * 1000, -cur, rnd.randint(lo, hi)))))
        if t == "bool":
            return not val
        if t == "string":
            cur = val or ""
            return rnd.choice((None if nullable else "", "", "__consumer_offsets", "x" * 250, "y" * 20000,
                               "\x00", "\u00e9\ud7ff", ".", "..", cur + "x", cur[:-1], cur * 2))
        if t in ("bytes", "records"):
            cur = val or b""
            return rnd.choice((None if nullable else b"", b"", cur[:len(cur) // 2], cur[:rnd.randint(0, 70)],
                               cur + rnd.randbytes(8), rnd.randbytes(rnd.randint(1, 64)), cur * 2,
                               bytes(len(cur))))
        if t == "uuid":
            return rnd.choice((uuid.UUID(int=0), uuid.uuid4(), uuid.UUID(int=rnd.getrandbits(128))))
        return val

    def mutate_bytes(self, seed: Frame) -> bytes:
        rnd = self.rnd
        buf = bytearray(seed.frame)
        if rnd.random() < 0.03:
            spec = API_TABLE.get(seed.api)
            lo, hi = (spec.min_version, spec.max_version) if spec is not None else (0, 12)
            buf[2:4] = struct.pack(">h", rnd.randint(lo - 1, hi + 1))
        for _ in range(rnd.choice((1, 1, 1, 2, 2, 3))):
            lo = seed.body_at if rnd.random() < 0.9 else 8  # the header's api/version/corr stay
            if len(buf) <= lo:
                buf.append(rnd.randrange(256))
                continue
            pos = rnd.randrange(lo, len(buf))
            op = rnd.choice(self.OPS)
            if op == "s":
                buf[pos] = rnd.choice(self.seeds.INTERESTING_BYTES)
            elif op == "f":
                buf[pos] ^= 1 << rnd.randrange(8)
            elif op == "w":
                w = rnd.choice(self.seeds.INTERESTING_WORDS)
                buf[pos:pos + len(w)] = w
            elif op == "i":
                buf[pos:pos] = rnd.randbytes(rnd.randint(1, 8))
            elif op == "d":
                del buf[pos:pos + rnd.randint(1, 8)]
            elif op == "r":
                buf[pos:pos] = buf[pos:pos + rnd.randint(1, 16)]
            elif op == "p":
                other = rnd.choice(self.by_api[seed.api]).frame
                at = max(8, min(len(other) - 1, pos + rnd.randint(-8, 8)))
                buf[pos:] = other[at:]
            else:
                del buf[pos:]
        return bytes(buf)


@dataclass
class Stats:
    generated: int = 0  # mutated frames made (each delivered once, or left unsent at the deadline)
    delivered: int = 0  # read and acted on by the server (each frame counted once)
    answered: int = 0  # ... with a response
    unanswered: int = 0  # ... processed with no response (Produce acks=0), the sentinel came back
    refused: int = 0  # ... the server closed the connection at it
    parked: int = 0  # ... no answer within `idle` s (a long poll, a pending join): given up on
    resent: int = 0  # sends of frames the server had not read when it closed (they count once)
    unsent: int = 0  # generated but not delivered when the time budget ran out
    connections: int = 0
    connect_errors: int = 0
    last_connect_error: str = ""
    batches: int = 0
    bytes_sent: int = 0
    elapsed: float = 0.0
    by_api: Counter = field(default_factory=Counter)  # delivered frames per API key
    refused_by_api: Counter = field(default_factory=Counter)
    bad_responses: list[str] = field(default_factory=list)

    def summary(self) -> str:
        rate = self.delivered / self.elapsed if self.elapsed else 0.0
        return (f"{self.generated} mutated frames generated, {self.delivered} delivered in {self.elapsed:.1f}s "
                f"({rate:.0f}/s): {self.answered} answered, {self.unanswered} processed without an "
                f"answer, {self.refused} refused (connection closed), {self.parked} parked; "
                f"{self.resent} re-sends after a close, {self.unsent} unsent at the deadline; "
                f"{self.connections} connections ({self.connect_errors} refused), {self.batches} batches, "
                f"{self.bytes_sent / 1e6:.1f} MB")


SENTINEL_CLIENT_ID = b"fuzz-sentinel"


def sentinel(corr: int) -> bytes:
    body = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, corr, len(SENTINEL_CLIENT_ID)) + SENTINEL_CLIENT_ID
    return struct.pack(">i", len(body)) + body


class NetworkFuzzer:
    def __init__(self, port: int, mutator: Mutator, frames: int, seconds: float, *,
                 connections: int = 8, batch: int = 8, idle: float = 2.0) -> None:
        self.port = port
        self.mutator = mutator
        self.frames = frames
        self.deadline = 0.0
        self.seconds = seconds
        self.connections = connections
        self.batch = batch
        self.idle = idle
        self.stats = Stats()
        self._again: deque[bytes] = deque()  # frames the server never read, to send again
        self._corr = 0
        self.checker = mutator.seeds.check_response

    def run(self) -> Stats:
        t0 = time.monotonic()
        self.deadline = t0 + self.seconds
        uvloop.run(self._main())
        self.stats.elapsed = time.monotonic() - t0
        self.stats.unsent = len(self._again)
        return self.stats

    async def _main(self) -> None:
        await asyncio.gather(*(self._worker() for _ in range(self.connections)))

    def _take(self) -> list[bytes]:
        out: list[bytes] = []
        while len(out) < self.batch and self._again:
            out.append(self._again.popleft())
        while len(out) < self.batch and self.stats.generated < self.frames:
            out.append(self.mutator.next())
            self.stats.generated += 1
        return out

    def _next_corr(self) -> int:
        self._corr = self._corr + 1 if self._corr < 2**31 - 1 else 1
        return self._corr

    async def _worker(self) -> None:
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        try:
            while time.monotonic() < self.deadline:
                frames = self._take()
                if not frames:
                    break
                if writer is None:
                    try:
                        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                    except OSError as e:  # the server is gone (the test reports it) or overloaded
                        self._again.extendleft(reversed(frames))
                        self.stats.connect_errors += 1
                        self.stats.last_connect_error = repr(e)
                        if self.stats.connect_errors > 100:
                            return
                        await asyncio.sleep(0.1)
                        continue
                    self.stats.connections += 1
                assert reader is not None
                if not await self._batch(reader, writer, frames):
                    writer.close()
                    reader = writer = None
        finally:
            if writer is not None:
                writer.close()

    async def _batch(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     frames: list[bytes]) -> bool:
        """Send one batch and its sentinel; True when the connection is still usable."""
        st = self.stats
        st.batches += 1
        sent = [bytearray(f) for f in frames]
        corrs = []
        for f in sent:
            c = self._next_corr()
            f[4:8] = struct.pack(">i", c)
            corrs.append(c)
        end = self._next_corr()
        payload = b"".join(struct.pack(">i", len(f)) + f for f in sent) + sentinel(end)
        st.bytes_sent += len(payload)
        writer.write(payload)
        answered = 0
        nxt = 0  # the next frame that may be answered (all before it were processed)
        outcome = "closed"
        try:
            while True:
                head = await asyncio.wait_for(reader.readexactly(8), self.idle)
                size, corr = struct.unpack(">ii", head)
                if size < 4 or size > 64 << 20:
                    st.bad_responses.append(f"response size {size}")
                    outcome = "bad"
                    break
                rest = await asyncio.wait_for(reader.readexactly(size - 4), self.idle)
                if corr == end:
                    outcome = "done"
                    break
                try:
                    i = corrs.index(corr, nxt)
                except ValueError:
                    st.bad_responses.append(f"correlation id {corr}, expected one of {corrs[nxt:]} then {end}")
                    outcome = "bad"
                    break
                try:
                    self.checker(bytes(sent[i]), head + rest)
                except AssertionError as e:
                    st.bad_responses.append(str(e)[:2000])
                answered += 1
                nxt = i + 1
        except (asyncio.IncompleteReadError, ConnectionError):
            outcome = "closed"
        except TimeoutError:
            outcome = "parked"
        if outcome == "done":
            nxt = len(sent)  # the ones after the last answer were processed too (acks=0)
        st.answered += answered
        st.unanswered += nxt - answered
        processed = nxt
        if nxt < len(sent):
            # The server stopped at frame nxt: it closed the connection, or it is still working
            # on it (parked). Those after it were never read: they go out again elsewhere.
            processed += 1
            if outcome == "parked":
                st.parked += 1
            else:
                st.refused += 1
                st.refused_by_api[_api(sent[nxt])] += 1
            self._again.extend(bytes(f) for f in sent[nxt + 1:])
            st.resent += len(sent) - nxt - 1
        st.delivered += processed
        for f in sent[:processed]:
            st.by_api[_api(f)] += 1
        return outcome == "done"


def _api(frame: bytes | bytearray) -> int:
    return int.from_bytes(frame[:2], "big", signed=True)
