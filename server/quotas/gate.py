"""The dispatcher's quota path, taken only while a user or client-id quota exists (the
dispatcher swaps its `handle` for QuotaGate.handle then, and back when the last one goes: with
no quota defined no request runs a line of this).

As Kafka's KafkaApis: a request's handler time is recorded against request_percentage (as a
percentage of one thread: 100 = one handler thread busy all the time, bounded to one window of
throttle); a Produce's request size against producer_byte_rate; a Fetch's response size against
consumer_byte_rate, and a throttled Fetch is answered empty (the size unrecorded, the client
fetches the same offsets again later). The larger throttle time goes in the answer's
throttle_time_ms, and the connection is muted for it (KIP-219: the answer leaves at once,
then nothing more is read from that connection until the time has passed).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.server.deferred import Deferred
from kcoord.server.quotas.entities import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE
from kcoord.server.quotas.manager import QuotaManager, user_name

if TYPE_CHECKING:
    from kcoord.server.session import Session

log = logging.getLogger("kcoord.quotas")
_perf_counter = time.perf_counter
_PRODUCE, _FETCH = int(ApiKey.PRODUCE), int(ApiKey.FETCH)
_ANONYMOUS = "ANONYMOUS"


@cache
def throttle_slot(key: int, version: int) -> int | None:
    """Where throttle_time_ms is in this response's body: 0 when it is the first field (nearly
    every API), -1 when elsewhere (Produce, ApiVersions), None when the version has none."""
    spec = API_TABLE.get(key)
    if spec is None:
        return None
    fields = [(name, f) for name, f in spec.response._struct.fields.items()
              if f.for_version_q(version) and getattr(f, "_tag", None) is None]
    for i, (name, _f) in enumerate(fields):
        if name == "throttle_time_ms":
            return 0 if i == 0 else -1
    return None


def with_throttle(framed: bytes, key: int, version: int, ms: int) -> bytes:
    """The framed answer with throttle_time_ms set to `ms` (where its version has the field),
    unless the handler set a longer one (a controller mutation quota's)."""
    slot = throttle_slot(key, version)
    if slot is None:
        return framed
    spec = API_TABLE[key]
    start = 8 + (1 if spec.response_header_version(version) >= 1 else 0)
    if slot == 0:
        ms = max(ms, int.from_bytes(framed[start:start + 4], "big", signed=True))
        return b"".join((framed[:start], ms.to_bytes(4, "big"), framed[start + 4:]))
    response = spec.response.decode(framed[start:], version=version)
    response._header = None  # a decoded message has none: encode() looks for it
    response.throttle_time_ms = max(ms, response.throttle_time_ms or 0)
    body = bytes(response.encode(version=version))
    size = start - 4 + len(body)
    return b"".join((size.to_bytes(4, "big"), framed[4:start], body))


def _throttled_fetch(framed: bytes, version: int, ms: int) -> bytes:
    """Kafka's FetchContext.getThrottledResponse: no data, the answer's fetch session id kept
    (an incremental fetch's session goes on; a full fetch's new session is not left orphaned)."""
    spec = API_TABLE[ApiKey.FETCH]
    start = 8 + (1 if spec.response_header_version(version) >= 1 else 0)
    session_id = int.from_bytes(framed[start + 6:start + 10], "big", signed=True) if version >= 7 else 0
    body = bytes(spec.response(version=version, throttle_time_ms=ms, error_code=0, session_id=session_id,
                               responses=[]).encode(version=version))
    size = start - 4 + len(body)
    return b"".join((size.to_bytes(4, "big"), framed[4:start], body))


class QuotaGate:
    __slots__ = ("quotas", "inner")

    def __init__(self, quotas: QuotaManager, inner: Callable[[bytes, Any], Any]) -> None:
        self.quotas = quotas
        self.inner = inner  # the dispatcher's own handle

    def handle(self, frame: bytes, client: Session | str) -> Any:
        if len(frame) < 10:
            return self.inner(frame, client)
        key = int.from_bytes(frame[0:2], "big", signed=True)
        version = int.from_bytes(frame[2:4], "big", signed=True)
        n = int.from_bytes(frame[8:10], "big", signed=True)
        client_id = frame[10:10 + n].decode("utf-8", "replace") if n > 0 else ""
        user = _ANONYMOUS if type(client) is str else user_name(client.principal)
        started = _perf_counter()
        result = self.inner(frame, client)
        busy = _perf_counter() - started
        if isinstance(result, Deferred):
            if result.done:
                return self._after(key, version, len(frame), user, client_id, busy, result.result(), client)
            out: Deferred[Any] = Deferred()
            result.add_callback(lambda framed: out.complete(
                self._after(key, version, len(frame), user, client_id, busy, framed, client)))
            return out
        return self._after(key, version, len(frame), user, client_id, busy, result, client)

    def _after(self, key: int, version: int, size: int, user: str, client_id: str, busy: float, framed: Any,
               client: Session | str) -> Any:
        try:
            return self._throttle(key, version, size, user, client_id, busy, framed, client)
        except Exception:  # a quota bug must not lose the answer
            log.exception("Client quota check failed for API %d v%d; answered unthrottled", key, version)
            return framed

    def _throttle(self, key: int, version: int, size: int, user: str, client_id: str, busy: float, framed: Any,
                  client: Session | str) -> Any:
        quotas = self.quotas
        now = quotas.clock_ms()
        answered = type(framed) is bytes
        # Produce with acks=0 (no answer) is exempt from the request quota, as in Kafka
        request_ms = quotas.record(REQUEST_PERCENTAGE, user, client_id, busy * 100.0, now, quotas.window_ms) \
            if answered or key != _PRODUCE else 0
        bandwidth_ms = 0
        bandwidth_key = ""
        if key == _PRODUCE:
            bandwidth_key = PRODUCER_BYTE_RATE
            bandwidth_ms = quotas.record(PRODUCER_BYTE_RATE, user, client_id, size, now)
        elif key == _FETCH and answered:
            bandwidth_key = CONSUMER_BYTE_RATE
            bandwidth_ms = quotas.record(CONSUMER_BYTE_RATE, user, client_id, len(framed), now)
            if bandwidth_ms or request_ms:
                quotas.unrecord(CONSUMER_BYTE_RATE, user, client_id, len(framed), now)
                framed = _throttled_fetch(framed, version, max(bandwidth_ms, request_ms))
                answered = True
        throttle = bandwidth_ms if bandwidth_ms > request_ms else request_ms
        if throttle <= 0:
            return framed
        quotas.throttled(bandwidth_key if bandwidth_ms > request_ms else REQUEST_PERCENTAGE, user, client_id, throttle)
        if answered and key != _FETCH:
            framed = with_throttle(framed, key, version, throttle)
        if type(client) is not str and client.mute is not None:
            client.mute(throttle)
        return framed
