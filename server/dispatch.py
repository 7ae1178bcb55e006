"""Frame -> handler -> framed response bytes.

Kafka's rules for bad input live here: an unknown API key, an unsupported version (other than
ApiVersions) or a body that does not decode closes the connection; ApiVersions of a version we
do not know is answered with a v0 body carrying UNSUPPORTED_VERSION and our ranges (KIP-511).

Everything that depends only on (API key, version) is worked out once, into a _Route looked
up by the first four bytes of the frame: a heartbeat costs a few microseconds here, so the
per-request work is kept to what the request itself changes.
"""
from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from kcoord.protocol.api import API_TABLE, ApiKey, ApiSpec
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import (
    HeaderError,
    encode_response_header,
    peek_api,
    read_client_id,
    skip_tagged_fields,
)
from kcoord.server.context import RequestContext
from kcoord.server.deferred import Deferred
from kcoord.server.handlers import NO_RESPONSE, ROUTES, Route
from kcoord.server.handlers.api_versions import api_versions_body

if TYPE_CHECKING:
    from kcoord.server.quotas.manager import QuotaManager
    from kcoord.server.security.guard import PolicyParts
    from kcoord.server.security.state import SecurityState
    from kcoord.server.session import Session

log = logging.getLogger("kcoord.dispatch")

_perf_counter = time.perf_counter
_CORRELATION = struct.Struct(">i")
_U16 = struct.Struct(">H")


class CloseConnection(Exception):
    """The request cannot be answered under the protocol: drop the connection (one log line).
    `final` is written before closing (a failed authentication's answer); `quiet` when the
    reason was logged already."""

    def __init__(self, reason: str, final: bytes | None = None, quiet: bool = False) -> None:
        super().__init__(reason)
        self.final = final
        self.quiet = quiet


def frame_response(spec: ApiSpec, version: int, correlation_id: int, response: Any) -> bytes:
    """`response` is a response object, or its body already encoded (bytes)."""
    body = response if isinstance(response, bytes) else spec.encode(response, version)
    header = encode_response_header(correlation_id, spec.response_header_version(version))
    size = len(header) + len(body)
    return b"".join((size.to_bytes(4, "big"), header, body))


class _Route:
    """What serving one (API key, version) needs, computed once from the API's route
    (server/handlers/routes.py) and its wire facts (protocol/api.py)."""

    __slots__ = ("spec", "version", "handler", "direct", "decode", "encode", "name", "request_header",
                 "header_tail")

    def __init__(self, spec: ApiSpec, version: int, route: Route) -> None:
        self.spec = spec
        self.version = version
        self.handler = route.handler
        self.direct = route.direct  # (request, version) -> answer, no context
        fast = route.fast
        # (frame, body offset, version) -> request: the hand decoder for this very version
        # where there is one
        self.decode: Callable[[bytes, int, int], Any] = spec.decode if fast is None else fast.decoder(version)
        # (answer, version) -> body: the fast path's encoder takes the light answers its
        # handler returns (cached bodies, commit rows) as well as response objects
        self.encode: Callable[[Any, int], bytes] = (
            _general_encoder(spec) if fast is None or fast.encode is None else fast.encode)
        self.name = spec.name
        self.request_header = spec.request_header_version(version)
        # after the echoed correlation id: header v1 adds an empty tagged-field section
        self.header_tail = b"\x00" if spec.response_header_version(version) >= 1 else b""

    def frame(self, correlation: bytes, body: bytes) -> bytes:
        """The response frame; `correlation` is the request's 4 correlation-id bytes."""
        tail = self.header_tail
        size = 4 + len(tail) + len(body)
        return b"".join((size.to_bytes(4, "big"), correlation, tail, body))


def _general_encoder(spec: ApiSpec) -> Callable[[Any, int], bytes]:
    """A response object's body, or the body a handler encoded itself (ApiVersions' cached one)."""
    encode = spec.encode

    def encode_answer(answer: Any, version: int) -> bytes:
        return answer if type(answer) is bytes else encode(answer, version)
    return encode_answer


def _body_start(frame: bytes, header_version: int) -> int:
    """Where the body starts after a request header v1/v2, as kcoord.protocol.headers.read_client_id
    finds it, without decoding the client id."""
    if header_version < 1:
        return 8
    try:
        n = _U16.unpack_from(frame, 8)[0]
    except struct.error:
        raise HeaderError("truncated client_id") from None
    pos = 10 + n if n < 0x8000 else 10  # a negative length is a null client id
    if pos > len(frame):
        raise HeaderError("truncated client_id")
    if header_version >= 2:  # tagged fields, nearly always none
        return pos + 1 if pos < len(frame) and frame[pos] == 0 else skip_tagged_fields(frame, pos)
    return pos


def _route(key: int, version: int, dispatcher: Dispatcher) -> _Route | None:
    """The route of a served (API key, version), else None. For an authorizing dispatcher,
    the handler (and direct call) runs behind the policy its route names (server/security/guard.py).
    Loads the API's handler module and classes: the dispatcher calls this at the first
    request of each (key, version), and keeps the answer."""
    spec = API_TABLE.get(key)
    if spec is None or key not in ROUTES or not spec.min_version <= version <= spec.max_version:
        return None
    route = dispatcher.bind(ROUTES[key])
    security = dispatcher.security
    if security is not None:
        from kcoord.server.security.guard import guarded, guarded_direct

        direct, policy, parts = route.direct, route.policy(), dispatcher.policy_parts
        assert parts is not None  # given with every Serving while authorizing
        route = route._replace(handler=guarded(spec.key, route.handler, policy, security, parts),
                               direct=None if direct is None else guarded_direct(
                                   spec.key, direct, dispatcher.current_client, policy, security, parts,
                                   route.as_is()))
    return _Route(spec, version, route)


# what a handler may answer besides a response: nothing, a refusal closing the connection, or
# the answer later (a Deferred)
_NOT_A_RESPONSE = (type(NO_RESPONSE), CloseConnection, Deferred)


class _Framed(Deferred[bytes | None]):
    """Completes with the framed answer (and times the request) once the handler's Deferred
    completes: it is that Deferred's callback. One object rather than a closure over five
    cells: a commit in flight keeps fewer objects alive for the garbage collector to scan."""

    __slots__ = ("_dispatcher", "_route", "_correlation", "_started")

    def __init__(self, dispatcher: Dispatcher, route: _Route, correlation: bytes, started: float) -> None:
        Deferred.__init__(self)
        self._dispatcher = dispatcher
        self._route = route
        self._correlation = correlation
        self._started = started

    def __call__(self, response: Any) -> None:
        """The handler's answer arrived."""
        route = self._route
        framed = self._dispatcher._finish(route, self._correlation, response)
        if isinstance(framed, Deferred):  # answered with yet another Deferred
            framed.add_callback(self._complete_timed)
            return
        self._dispatcher.observe_request(route.name, _perf_counter() - self._started)
        self.complete(framed)

    def _complete_timed(self, framed: bytes | None) -> None:
        self._dispatcher.observe_request(self._route.name, _perf_counter() - self._started)
        self.complete(framed)


class Serving(NamedTuple):
    """What the dispatcher serves with, for one build of the node's parts: the composition root
    (server/node.py, `dispatcher_for`) gives a new one at start-up and after every reset, whose
    parts (handler areas, metrics) are new."""

    bind: Callable[[Route], Route]  # an API's route with its handler bound to its handler area
    observe_request: Callable[[str, float], None]  # a request's time to its answer, per API name
    policy_parts: PolicyParts | None = None  # what authorization policies read (None: no authorizer)


def _not_built(route: Route) -> Route:
    raise RuntimeError(f"{route.key!r}: the node's parts are not built yet")


def _unobserved(api: str, seconds: float) -> None:
    pass


class Dispatcher:
    """Answers the requests of every Kafka connection. Given narrow parts by the composition
    root (server/node.py, `dispatcher_for`): `serving`, a subscription that tells it what it
    serves with (a Serving) when the node's parts are built, now if they are, and again after
    each reset; `security`, the authorizer's state when an authorizer is configured (None:
    nothing of authorization runs); `quotas`, the client quotas, whose watch puts the quota
    path in front of every request while a quota exists."""

    def __init__(self, serving: Callable[[Callable[[Serving], None]], None], security: SecurityState | None,
                 quotas: QuotaManager) -> None:
        # what new connections start with as their `hook` (server/control/ sets it when the
        # control API is on): None serves every request straight through handle()
        self.connection_hook: Any = None
        self._client: Session | str | None = None
        # (API key, version) as the frame's first 4 bytes -> its route, added at the first
        # request of each (_unrouted)
        self._routes: dict[bytes, _Route] = {}
        self.observe_request: Callable[[str, float], None] = _unobserved
        self.bind: Callable[[Route], Route] = _not_built
        self.policy_parts: PolicyParts | None = None
        self.security = security
        self.authorizing = security is not None
        if self.authorizing:
            # Authorizing: direct calls learn the connection's principal through current_client;
            # without an authorizer nothing of this runs.
            self.handle = self._handle_authorizing  # type: ignore[method-assign]
        # client quotas: while one exists, requests go through the quota path first
        self._quotas = quotas
        self._unthrottled = self.handle
        self._gated = False
        quotas.watch(self._quotas_changed)
        # a reset builds the node's parts anew: routes bound to the old ones go
        serving(self._serve_with)

    def _serve_with(self, serving: Serving) -> None:
        self._routes.clear()
        self.bind, self.observe_request, self.policy_parts = serving

    def _quotas_changed(self, active: bool) -> None:
        # Never through self.__dict__: reading it turns CPython's inline attribute values into
        # a dict, and every attribute lookup of handle() gets slower (about 2% of a heartbeat)
        if active:
            from kcoord.server.quotas.gate import QuotaGate

            self.handle = QuotaGate(self._quotas, self._unthrottled).handle  # type: ignore[method-assign]
            self._gated = True
        elif self._gated:
            self._gated = False
            if self.authorizing:
                self.handle = self._handle_authorizing  # type: ignore[method-assign]
            else:
                del self.handle  # the plain method again: today's path

    def current_client(self) -> Session | str | None:
        return self._client

    def _handle_authorizing(self, frame: bytes, client: Session | str) -> bytes | None | Deferred[bytes | None]:
        self._client = client
        return Dispatcher.handle(self, frame, client)

    def handle(self, frame: bytes, client: Session | str) -> bytes | None | Deferred[bytes | None]:
        """Answer one request from `client` (its connection's Session, or just its host):
        framed bytes, None (no response), or a Deferred of either."""
        started = _perf_counter()
        route = self._routes.get(frame[:4]) if len(frame) >= 8 else None
        if route is None:
            return self._unrouted(frame, client)
        version = route.version
        correlation = frame[4:8]
        try:
            if route.direct is not None:  # needs no client id: skip it, undecoded
                request = route.decode(frame, _body_start(frame, route.request_header), version)
            else:
                client_id, body = read_client_id(frame, route.request_header)
                request = route.decode(frame, body, version)
        except Exception as e:  # noqa: BLE001 - any decode failure is the client's malformed body
            raise CloseConnection(f"malformed {route.spec.key.name} v{version} request: {e!r}") from None

        if route.direct is not None:
            result = route.direct(request, version)
        else:
            if type(client) is str:
                ctx = RequestContext(version, _CORRELATION.unpack(correlation)[0], client_id, client)
            else:
                ctx = RequestContext(version, _CORRELATION.unpack(correlation)[0], client_id, client.host, client)
            result = route.handler(ctx, request, version)
        if isinstance(result, Deferred) and not result.done:
            # parked (a commit waiting for its fdatasync, a JoinGroup for the rebalance)
            framed = _Framed(self, route, correlation, started)
            result.add_callback(framed)
            return framed
        out = self._finish(route, correlation, result)
        if isinstance(out, Deferred):
            out.add_callback(lambda _r: self._observe(route, started))
        else:
            self.observe_request(route.name, _perf_counter() - started)
        return out

    def _observe(self, route: _Route, started: float) -> None:
        self.observe_request(route.name, _perf_counter() - started)

    def _unrouted(self, frame: bytes, client: Session | str) -> bytes | None | Deferred[bytes | None]:
        """A request with no route yet: the first of its (API key, version), served once its
        route is made; or one no route serves, answered (ApiVersions of an unknown version) or
        refused."""
        try:
            api_key, version, correlation_id = peek_api(frame)
        except HeaderError as e:
            raise CloseConnection(str(e)) from None
        route = _route(api_key, version, self)
        if route is not None:
            self._routes[frame[:4]] = route
            return Dispatcher.handle(self, frame, client)
        spec = API_TABLE.get(api_key)
        if spec is None or api_key not in ROUTES:
            raise CloseConnection(f"unknown API key {api_key}")
        if api_key == ApiKey.API_VERSIONS:
            body = api_versions_body(ErrorCode.UNSUPPORTED_VERSION, 0)
            return frame_response(spec, 0, correlation_id, body)
        raise CloseConnection(
            f"unsupported version {version} of {spec.key.name} "
            f"(supported {spec.min_version}-{spec.max_version})"
        )

    def _finish(self, route: _Route, correlation: bytes, result: Any) -> Any:
        """A handler's answer framed: a response (encoded by its route), nothing (NO_RESPONSE),
        a refusal that closes the connection, or a Deferred of one of those."""
        if not isinstance(result, _NOT_A_RESPONSE):  # the usual answer: one isinstance
            return route.frame(correlation, route.encode(result, route.version))
        if result is NO_RESPONSE:
            return None
        if isinstance(result, CloseConnection):  # a refusal decided after the handler parked
            return result
        out: Deferred[bytes | None] = Deferred()  # a Deferred: framed once it completes
        result.add_callback(lambda r: out.complete(self._finish(route, correlation, r)))
        return out
