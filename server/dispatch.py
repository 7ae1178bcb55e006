"""Frame -> handler -> framed response bytes.

Kafka's rules for bad input live here: an unknown API key, an unsupported version (other than
ApiVersions) or a body that does not decode closes the connection; ApiVersions of a version we
do not know is answered with a v0 body carrying UNSUPPORTED_VERSION and our ranges (KIP-511).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any

from kafka.protocol.api_message import ApiMessage

from protocol.api import API_TABLE, ApiKey, ApiSpec
from protocol.errors import ErrorCode
from protocol.headers import HeaderError, encode_response_header, peek_api, read_client_id
from server.context import RequestContext
from server.deferred import Deferred
from server.handlers import HANDLERS, NO_RESPONSE
from server.handlers.api_versions import api_versions_body

if TYPE_CHECKING:
    from server.broker import Broker

log = logging.getLogger("kcoord.dispatch")


class CloseConnection(Exception):
    """The request cannot be answered under the protocol: drop the connection (one log line)."""


def frame_response(spec: ApiSpec, version: int, correlation_id: int, response: Any) -> bytes:
    """`response` is a response object, or its body already encoded (bytes)."""
    body = response if isinstance(response, bytes) else spec.encode(response, version)
    header = encode_response_header(correlation_id, spec.response_header_version(version))
    size = len(header) + len(body)
    return b"".join((size.to_bytes(4, "big"), header, body))


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def handle(self, frame: bytes, client_host: str) -> bytes | None | Deferred[bytes | None]:
        """Answer one request: framed bytes, None (no response), or a Deferred of either."""
        started = time.perf_counter()
        try:
            api_key, version, correlation_id = peek_api(frame)
        except HeaderError as e:
            raise CloseConnection(str(e)) from None
        spec = API_TABLE.get(api_key)
        if spec is None or api_key not in HANDLERS:
            raise CloseConnection(f"unknown API key {api_key}")
        if not spec.min_version <= version <= spec.max_version:
            if api_key == ApiKey.API_VERSIONS:
                body = api_versions_body(ErrorCode.UNSUPPORTED_VERSION, 0)
                return frame_response(spec, 0, correlation_id, body)
            raise CloseConnection(
                f"unsupported version {version} of {spec.key.name} "
                f"(supported {spec.min_version}-{spec.max_version})"
            )
        try:
            client_id, body = read_client_id(frame, spec.request_headers[version])
            request = spec.decode(frame, body, version)
        except Exception as e:  # noqa: BLE001 - any decode failure is the client's malformed body
            raise CloseConnection(f"malformed {spec.key.name} v{version} request: {e!r}") from None

        ctx = RequestContext(self.broker, version, correlation_id, client_id, client_host)
        out = self._finish(spec, version, correlation_id, HANDLERS[api_key](ctx, request, version))
        observe = self.broker.metrics.observe_request
        if isinstance(out, Deferred):
            out.add_callback(lambda _r: observe(spec.name, time.perf_counter() - started))
        else:
            observe(spec.name, time.perf_counter() - started)
        return out

    def _finish(self, spec: ApiSpec, version: int, correlation_id: int, result: Any) -> Any:
        # The common answers first: an encoded body or a response object.
        if type(result) is bytes or isinstance(result, ApiMessage):
            return frame_response(spec, version, correlation_id, result)
        if result is NO_RESPONSE:
            return None
        if isinstance(result, Deferred):
            out: Deferred[bytes | None] = Deferred()
            result.add_callback(lambda r: out.complete(self._finish(spec, version, correlation_id, r)))
            return out
        if inspect.isawaitable(result):
            out = Deferred()

            def done(task: asyncio.Future[Any]) -> None:
                if task.cancelled():
                    out.complete(None)
                    return
                exc = task.exception()
                if exc is not None:
                    log.error("%s v%d handler failed", spec.key.name, version, exc_info=exc)
                    out.complete(CloseConnection(f"{spec.key.name} handler failed: {exc!r}"))
                    return
                out.complete(self._finish(spec, version, correlation_id, task.result()))

            asyncio.ensure_future(result).add_done_callback(done)
            return out
        return frame_response(spec, version, correlation_id, result)
