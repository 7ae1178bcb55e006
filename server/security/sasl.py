"""SASL authentication of one connection, as Kafka's SaslServerAuthenticator does it.

Before a SASL connection is authenticated, every frame comes here instead of the dispatcher.
The client may send ApiVersions (once, first) and SaslHandshake; after SaslHandshake v1 the
tokens travel in SaslAuthenticate requests, after v0 as raw size-prefixed tokens. Anything
else closes the connection. A failed authentication is answered (SASL_AUTHENTICATION_FAILED or
UNSUPPORTED_SASL_MECHANISM, with Kafka's messages) after connection.failed.authentication.delay.ms
and the connection is then closed; it is logged once, with the client's address and the user
it tried. Frames are limited to sasl.server.max.receive.size until authentication succeeds.

KIP-368: with connections.max.reauth.ms > 0 the successful SaslAuthenticate (v1+) carries
session_lifetime_ms; a client re-authenticates by sending SaslHandshake again on the
authenticated connection (same mechanism, same principal); a session that expired is closed
at its next request other than SaslHandshake.

The states and what each kind of frame does in each are one table, TRANSITIONS, below.
"""
from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from kcoord.protocol.api import API_TABLE, ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.headers import HeaderError, read_client_id
from kcoord.server.deferred import Deferred
from kcoord.server.dispatch import CloseConnection, frame_response
from kcoord.server.security.plain import PlainAuthenticationFailed, PlainServer
from kcoord.server.security.principal import user
from kcoord.server.security.scram import (
    SCRAM_MECHANISMS,
    ScramAuthenticationFailed,
    ScramMechanism,
    ScramServer,
)

if TYPE_CHECKING:
    from kcoord.server.security.credentials import CredentialStore
    from kcoord.server.session import Session

log = logging.getLogger("kcoord.network")

SUPPORTED_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
_HEADER = struct.Struct(">hhi")


@dataclass
class SaslSettings:
    """A SASL listener's settings (Kafka reads them per listener and per mechanism)."""

    mechanisms: list[str]
    plain_users: dict[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: dict[str, int] = field(default_factory=dict)  # connections.max.reauth.ms per mechanism
    max_receive_size: int = 524288
    failure_delay_ms: int = 100
    credentials: CredentialStore | None = None

    def mechanism_server(self, mechanism: str) -> PlainServer | ScramServer:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        mech = ScramMechanism.from_name(mechanism)
        store = self.credentials
        return ScramServer(mech, lambda name: store.lookup(mech, name) if store is not None else None)


class State(Enum):
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"  # ApiVersions or SaslHandshake
    HANDSHAKE = "HANDSHAKE_REQUEST"  # after ApiVersions: SaslHandshake
    AUTHENTICATE = "AUTHENTICATE"  # SaslAuthenticate requests (handshake v1)
    RAW_AUTHENTICATE = "AUTHENTICATE_RAW"  # raw tokens (handshake v0)
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"  # re-authentication asked for another mechanism
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class Input(Enum):
    API_VERSIONS = "ApiVersions"
    HANDSHAKE = "SaslHandshake"
    AUTHENTICATE = "SaslAuthenticate"
    OTHER = "another request"
    TOKEN = "a raw token"


S, I = State, Input  # noqa: E741
# (state, frame kind) -> (action, the states it may lead to). Pairs not listed close the connection.
TRANSITIONS: dict[tuple[State, Input], tuple[str, frozenset[State]]] = {
    (S.HANDSHAKE_OR_VERSIONS, I.API_VERSIONS): ("api_versions", frozenset({S.HANDSHAKE})),
    (S.HANDSHAKE_OR_VERSIONS, I.HANDSHAKE): ("handshake", frozenset({S.AUTHENTICATE, S.RAW_AUTHENTICATE,
                                                                     S.REAUTH_BAD_MECHANISM, S.FAILED})),
    (S.HANDSHAKE, I.HANDSHAKE): ("handshake", frozenset({S.AUTHENTICATE, S.RAW_AUTHENTICATE, S.FAILED})),
    (S.AUTHENTICATE, I.AUTHENTICATE): ("authenticate", frozenset({S.AUTHENTICATE, S.COMPLETE, S.FAILED})),
    (S.AUTHENTICATE, I.HANDSHAKE): ("refuse_during_authentication", frozenset({S.FAILED})),
    (S.AUTHENTICATE, I.API_VERSIONS): ("refuse_during_authentication", frozenset({S.FAILED})),
    (S.AUTHENTICATE, I.OTHER): ("refuse_during_authentication", frozenset({S.FAILED})),
    **{(S.RAW_AUTHENTICATE, i): ("raw_token", frozenset({S.RAW_AUTHENTICATE, S.COMPLETE, S.FAILED}))
       for i in Input},
    **{(S.REAUTH_BAD_MECHANISM, i): ("bad_mechanism", frozenset({S.FAILED})) for i in Input},
}
_INPUTS = {ApiKey.API_VERSIONS: I.API_VERSIONS, ApiKey.SASL_HANDSHAKE: I.HANDSHAKE,
           ApiKey.SASL_AUTHENTICATE: I.AUTHENTICATE}


@dataclass
class Reauthentication:
    """What a re-authentication must keep (Kafka's ReauthInfo)."""

    mechanism: str
    principal: str


class _Failed(Exception):
    """An authentication failure: `response` (framed, or None) goes to the client after the
    failure delay, then the connection closes."""

    def __init__(self, reason: str, response: bytes | None = None) -> None:
        super().__init__(reason)
        self.response = response


Answer = bytes | Deferred[Any] | CloseConnection | None


class SaslAuthenticator:
    """The gate in front of the dispatcher while a connection authenticates."""

    def __init__(self, settings: SaslSettings, session: Session, api_versions: Callable[[bytes], Any],
                 on_complete: Callable[[str, str, int], None],
                 reauth: Reauthentication | None = None) -> None:
        self.settings = settings
        self.session = session
        self._api_versions = api_versions  # the dispatcher's ApiVersions answer for a frame
        self._on_complete = on_complete  # (principal, mechanism, session lifetime ms)
        self.reauth = reauth
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        self._server: PlainServer | ScramServer | None = None
        self.client_supports_reauth = False

    # -- the table's driver --

    def handle(self, frame: bytes) -> Answer:
        kind = self._kind(frame)
        entry = TRANSITIONS.get((self.state, kind))
        if entry is None:
            return self._close(f"Unexpected Kafka request of type {kind.value} during SASL handshake "
                               f"(state {self.state.value})")
        action, allowed = entry
        try:
            answer, next_state = getattr(self, action)(frame)
        except _Failed as e:
            self.state = State.FAILED
            return self._fail(str(e), e.response)
        except (ValueError, HeaderError, struct.error) as e:  # an undecodable SASL request
            self.state = State.FAILED
            return self._close(f"malformed request during SASL authentication: {e!r}")
        assert next_state in allowed, (self.state, kind, next_state)
        self.state = next_state
        return answer

    def _kind(self, frame: bytes) -> Input:
        if self.state in (State.RAW_AUTHENTICATE, State.REAUTH_BAD_MECHANISM):
            return Input.TOKEN
        if len(frame) < 8:
            return Input.OTHER
        return _INPUTS.get(_HEADER.unpack_from(frame)[0], Input.OTHER)

    # -- actions: (answer, next state) --

    def api_versions(self, frame: bytes) -> tuple[Answer, State]:
        return self._api_versions(frame), State.HANDSHAKE

    def handshake(self, frame: bytes) -> tuple[Answer, State]:
        req, version, correlation = self._decode(frame, ApiKey.SASL_HANDSHAKE)
        response, state = self.begin(req.mechanism, version)
        framed = self._frame(ApiKey.SASL_HANDSHAKE, version, correlation, response)
        if state is State.FAILED:
            raise _Failed(f"Unsupported SASL mechanism {req.mechanism}", framed)
        return framed, state

    def begin(self, mechanism: str, version: int) -> tuple[Any, State]:
        """The SaslHandshake response for `mechanism` and the state it leads to (also for the
        handshake that starts a re-authentication)."""
        enabled = self.settings.mechanisms
        if mechanism not in enabled:
            self.mechanism = None
            return SaslHandshakeResponse(version=version, error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                         mechanisms=list(enabled)), State.FAILED
        response = SaslHandshakeResponse(version=version, error_code=ErrorCode.NONE, mechanisms=list(enabled))
        self.mechanism = mechanism
        if self.reauth is not None and mechanism != self.reauth.mechanism:
            return response, State.REAUTH_BAD_MECHANISM
        self._server = self.settings.mechanism_server(mechanism)
        return response, State.AUTHENTICATE if version >= 1 else State.RAW_AUTHENTICATE

    def start_reauthentication(self, mechanism: str, version: int) -> Any:
        """KIP-368: a SaslHandshake on an authenticated connection begins re-authentication;
        its response (the next frames come to this authenticator)."""
        response, self.state = self.begin(mechanism, version)
        if self.state is State.FAILED:
            self._log_failure(f"Unsupported SASL mechanism {mechanism}")
        return response

    def authenticate(self, frame: bytes) -> tuple[Answer, State]:
        req, version, correlation = self._decode(frame, ApiKey.SASL_AUTHENTICATE)
        self.client_supports_reauth = self.client_supports_reauth or version > 0

        def failure(message: str) -> bytes:
            return self._frame(ApiKey.SASL_AUTHENTICATE, version, correlation, SaslAuthenticateResponse(
                version=version, error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=message,
                auth_bytes=b"", session_lifetime_ms=0))

        token, lifetime = self._evaluate(bytes(req.auth_bytes), failure)
        response = self._frame(ApiKey.SASL_AUTHENTICATE, version, correlation, SaslAuthenticateResponse(
            version=version, error_code=ErrorCode.NONE, error_message=None, auth_bytes=token,
            session_lifetime_ms=lifetime))
        return self._after_token(response)

    def raw_token(self, frame: bytes) -> tuple[Answer, State]:
        token, _ = self._evaluate(frame, None)
        return self._after_token(len(token).to_bytes(4, "big") + token)

    def refuse_during_authentication(self, frame: bytes) -> tuple[Answer, State]:
        api, version, correlation = _HEADER.unpack_from(frame)
        response = None
        if api == ApiKey.SASL_HANDSHAKE and version in (0, 1):
            response = self._frame(ApiKey.SASL_HANDSHAKE, version, correlation, SaslHandshakeResponse(
                version=version, error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[]))
        raise _Failed(f"Unexpected Kafka request of type {_api_name(api)} during SASL authentication.", response)

    def bad_mechanism(self, frame: bytes) -> tuple[Answer, State]:
        assert self.reauth is not None
        raise _Failed(f"SASL mechanism '{self.mechanism}' requested by client is not supported for "
                      f"re-authentication of mechanism '{self.reauth.mechanism}'")

    # -- helpers --

    def _evaluate(self, token: bytes, failure: Callable[[str], bytes] | None) -> tuple[bytes, int]:
        """The mechanism's answer to one token and, when that completes it, the session lifetime.
        _Failed with Kafka's client message otherwise."""
        server = self._server
        assert server is not None and self.mechanism is not None
        try:
            out = server.evaluate(token)
        except PlainAuthenticationFailed as e:
            raise _Failed(str(e), failure(str(e)) if failure else None) from None
        except ScramAuthenticationFailed as e:
            # Kafka does not tell the client why (it could reveal whether the user exists)
            told = e.client_message or (f"Authentication failed during {self._text()} due to invalid "
                                        f"credentials with SASL mechanism {self.mechanism}")
            raise _Failed(f"{told} ({e})" if e.client_message is None else told,
                          failure(told) if failure else None) from None
        if not server.complete:
            return out, 0
        principal = user(server.authorization_id or "")
        if self.reauth is not None and principal != self.reauth.principal:
            told = (f"Cannot change principals during re-authentication from "
                    f"{self.reauth.principal.replace(':', '.', 1)}: {principal.replace(':', '.', 1)}")
            raise _Failed(told, failure(told) if failure else None)
        self._principal = principal
        return out, self.settings.reauth_ms.get(self.mechanism, 0)

    def _after_token(self, answer: bytes) -> tuple[Answer, State]:
        server = self._server
        assert server is not None and self.mechanism is not None
        if not server.complete:
            return answer, self.state
        self._on_complete(self._principal, self.mechanism, self.settings.reauth_ms.get(self.mechanism, 0))
        return answer, State.COMPLETE

    def _text(self) -> str:
        return "re-authentication" if self.reauth is not None else "authentication"

    def _decode(self, frame: bytes, api: ApiKey) -> tuple[Any, int, int]:
        _, version, correlation = _HEADER.unpack_from(frame)
        spec = API_TABLE[api]
        if not spec.min_version <= version <= spec.max_version:
            raise ValueError(f"unsupported version {version} of {spec.key.name}")
        _, pos = read_client_id(frame, spec.request_header_version(version))
        return spec.decode(frame, pos, version), version, correlation

    @staticmethod
    def _frame(api: ApiKey, version: int, correlation: int, response: Any) -> bytes:
        return frame_response(API_TABLE[api], version, correlation, response)

    def _attempted_user(self) -> str:
        return getattr(self._server, "attempted_user", None) or "?"

    def _log_failure(self, reason: str) -> None:
        s = self.session
        log.info("Failed %s with /%s:%d (principal User:%s, mechanism %s, listener %s): %s", self._text(),
                 s.host, s.port, self._attempted_user(), self.mechanism or "-",
                 s.listener.name if s.listener is not None else "-", reason)

    def _fail(self, reason: str, response: bytes | None) -> Answer:
        """One log line, then the answer (if any) after the failure delay, then close."""
        self._log_failure(reason)
        close = CloseConnection(f"authentication failed: {reason}", final=response, quiet=True)
        delay = self.settings.failure_delay_ms
        if delay <= 0:
            return close
        later: Deferred[Any] = Deferred()
        asyncio.get_running_loop().call_later(delay / 1000, later.complete, close)
        return later

    def _close(self, reason: str) -> CloseConnection:
        self.state = State.FAILED
        s = self.session
        log.info("Closing connection from /%s:%d on SASL listener %s: %s", s.host, s.port,
                 s.listener.name if s.listener is not None else "-", reason)
        return CloseConnection(reason, quiet=True)


def _api_name(api: int) -> str:
    try:
        return ApiKey(api).name
    except ValueError:
        return str(api)


class ExpiredSession:
    """The gate of a connection whose SASL session lifetime has passed (KIP-368): a
    SaslHandshake (re-authentication) is still served, any other request closes the
    connection, as Kafka's SocketServer does."""

    def __init__(self, session: Session, dispatch: Callable[[bytes], Any]) -> None:
        self.session = session
        self._dispatch = dispatch

    def handle(self, frame: bytes) -> Answer:
        if len(frame) >= 8 and _HEADER.unpack_from(frame)[0] == ApiKey.SASL_HANDSHAKE:
            return self._dispatch(frame)
        s = self.session
        log.info("Disconnecting expired channel from /%s:%d (%s): its SASL session lifetime passed without "
                 "re-authentication", s.host, s.port, s.principal)
        return CloseConnection("expired SASL session", quiet=True)
