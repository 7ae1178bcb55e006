"""The control API's path for one request, taken only while something is injected (a
connection's `hook`; otherwise requests go straight to the dispatcher, see plane.py).

In order: the client id is noted on the connection; a stalled client's request is held
unanswered; the request is recorded; an error rule that matches answers it with Kafka's error
response for it (protocol/error_response.py) instead of the handler; latency rules that match delay it
(the sum of their delays) before it is served. Anything that does not parse or decode goes to
the dispatcher untouched, which refuses it as it would have anyway.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kcoord.protocol.api import API_TABLE, ApiKey, ApiSpec
from kcoord.protocol.error_response import body_version, error_response
from kcoord.protocol.headers import HeaderError, encode_response_header, peek_api, read_client_id
from kcoord.server.control.faults import Facts
from kcoord.server.deferred import Deferred
from kcoord.server.dispatch import CloseConnection

if TYPE_CHECKING:
    from kcoord.server.connection import KafkaConnection
    from kcoord.server.control.plane import ControlPlane

log = logging.getLogger("kcoord.control")

_PASS: Any = object()  # "serve it normally", as opposed to an injected answer


class Interceptor:
    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def __call__(self, conn: KafkaConnection, frame: bytes) -> Any:
        plane = self.plane
        handle = plane.dispatcher.handle
        parsed = _parse(frame)
        if parsed is None:
            return handle(frame, conn.session)
        spec, version, correlation, client_id, header_version, body_at = parsed
        conn.client_id = client_id if client_id is not None else ""
        if not plane.active:  # a new connection's first request: its client id is all we wanted
            conn.hook = None
            return handle(frame, conn.session)
        if plane.stalls and any(s.client_id == client_id for s in plane.stalls):
            return plane.hold(conn, frame)
        api = spec.key
        recorder = plane.recorder
        record = recorder is not None and recorder.wants(api)
        request = None
        if record or plane.needs_body(api):
            try:
                request = spec.decode(frame, body_at, version)
            except Exception:  # noqa: BLE001 - the dispatcher refuses it as usual
                request = None
        if record:
            recorder.add(conn.id, conn.host, api, version, _i32(correlation), client_id,  # type: ignore[union-attr]
                         header_version, request)
        facts = Facts(api, version, client_id, conn.id, request, plane.topic_name)
        answer = _PASS
        rule = plane.take_error(facts) if request is not None else None
        if rule is not None:
            answer = _error_frame(spec, version, correlation, request, rule.code, rule.message)
        delay_ms = plane.delay_for(facts)
        if delay_ms > 0:
            return self._later(delay_ms / 1000.0, conn, frame, answer, parsed, request)
        if answer is not _PASS:
            return answer
        return plane.serve(conn, frame, parsed, request)

    def serve(self, conn: KafkaConnection, frame: bytes, out: Deferred[Any], parsed: Any = None,
              request: Any = None) -> None:
        """Serve a held or delayed request now, completing `out` with its answer."""
        try:
            if parsed is None:  # a held request: looked at again, as it arrives now
                parsed = _parse(frame)
                if parsed is not None and self.plane.routing is not None:
                    spec, version, _, _, _, body_at = parsed
                    try:
                        request = spec.decode(frame, body_at, version)
                    except Exception:  # noqa: BLE001 - the dispatcher refuses it as usual
                        request = None
            result = self.plane.serve(conn, frame, parsed, request) if parsed is not None \
                else self.plane.dispatcher.handle(frame, conn.session)
        except CloseConnection as e:
            result = e
        except Exception as e:  # noqa: BLE001 - as KafkaConnection._answer does
            log.exception("Unexpected error serving %s; closing the connection", conn.peer)
            result = CloseConnection(f"internal error {e!r}")
        if isinstance(result, Deferred):
            result.add_callback(out.complete)
        else:
            out.complete(result)

    def _later(self, delay_s: float, conn: KafkaConnection, frame: bytes, answer: Any, parsed: Any,
               request: Any) -> Deferred[Any]:
        out: Deferred[Any] = Deferred()

        def fire() -> None:
            if answer is _PASS:
                self.serve(conn, frame, out, parsed, request)
            else:
                out.complete(answer)

        asyncio.get_running_loop().call_later(delay_s, fire)
        return out


def _i32(b: bytes) -> int:
    return int.from_bytes(b, "big", signed=True)


def _parse(frame: bytes) -> tuple[ApiSpec, int, bytes, str | None, int, int] | None:
    try:
        api, version, _ = peek_api(frame)
    except HeaderError:
        return None
    spec = API_TABLE.get(api)
    if spec is None or not spec.min_version <= version <= spec.max_version:
        return None
    header_version = spec.request_header_version(version)
    try:
        client_id, body_at = read_client_id(frame, header_version)
    except HeaderError:
        return None
    return spec, version, frame[4:8], client_id, header_version, body_at


def _error_frame(spec: ApiSpec, version: int, correlation: bytes, request: Any, code: int,
                 message: str | None) -> bytes | None:
    if spec.key == ApiKey.PRODUCE and getattr(request, "acks", 1) == 0:
        return None  # acks=0: Kafka sends nothing back, errors included
    body = bytes(error_response(spec, version, request, code, message).encode(version=body_version(spec.key, version)))
    header = encode_response_header(_i32(correlation), spec.response_header_version(version))
    return (len(header) + len(body)).to_bytes(4, "big") + header + body
