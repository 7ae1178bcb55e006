"""A blocking Kafka wire client for the security tests: one connection, optional TLS, SASL
authentication done by hand (SaslHandshake + SaslAuthenticate, or the raw tokens after a
SaslHandshake v0) with kafka-python's own SASL mechanisms (an implementation independent of
the server's), then any request encoded with kafka-python's classes."""
from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from kafka.net.sasl.plain import SaslMechanismPlain
from kafka.net.sasl.scram import SaslMechanismScram
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from kcoord.protocol.api import API_TABLE


class Closed(ConnectionError):
    """The server closed the connection."""


class SaslFailed(AssertionError):
    def __init__(self, code: int, message: str | None, api: str) -> None:
        super().__init__(f"{api} error {code}: {message}")
        self.code = code
        self.message = message


def client_tls(ca: str | None, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False  # the server certificate is for 127.0.0.1 (checked by the real clients)
    if cert is not None:
        ctx.load_cert_chain(cert, key)
    return ctx


class WireClient:
    def __init__(self, bootstrap: str, tls: ssl.SSLContext | None = None, client_id: str = "wire",
                 timeout: float = 15.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock: socket.socket = tls.wrap_socket(sock, server_hostname=host) if tls is not None else sock
        self.client_id = client_id.encode()
        self.correlation = 0

    # -- framing --

    def send_raw(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_raw(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            try:
                chunk = self.sock.recv(n - len(buf))
            except (ConnectionResetError, ssl.SSLError) as e:
                raise Closed(f"connection reset: {e!r}") from None
            if not chunk:
                raise Closed("connection closed by the server")
            buf += chunk
        return buf

    def frame(self, request: Any, version: int) -> bytes:
        spec = API_TABLE[request.API_KEY]
        self.correlation += 1
        header = struct.pack(">hhih", request.API_KEY, version, self.correlation, len(self.client_id)) + self.client_id
        if spec.request_header_version(version) >= 2:
            header += b"\x00"
        return header + bytes(request.encode(version=version))

    def send(self, request: Any, version: int) -> int:
        self.send_raw(self.frame(request, version))
        return self.correlation

    def receive(self, request_class: Any, version: int) -> Any:
        spec = API_TABLE[request_class.API_KEY]
        data = self.recv_raw()
        (corr,) = struct.unpack_from(">i", data)
        assert corr == self.correlation, f"correlation {corr}, expected {self.correlation}"
        body = data[4 + (1 if spec.response_header_version(version) >= 1 else 0):]
        return spec.response.decode(body, version=version)

    def call(self, request: Any, version: int) -> Any:
        self.send(request, version)
        return self.receive(request, version)

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        """True once the server has closed the connection (reading returns EOF / a reset)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, ssl.SSLError, OSError):
            return True

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- SASL --

    def api_versions(self, version: int = 3) -> Any:
        return self.call(ApiVersionsRequest(version=version, client_software_name="wire",
                                            client_software_version="1"), version)

    def handshake(self, mechanism: str, version: int = 1) -> Any:
        return self.call(SaslHandshakeRequest(version=version, mechanism=mechanism), version)

    def authenticate(self, mechanism: str, user: str, password: str, handshake_version: int = 1,
                     auth_version: int = 2) -> Any:
        """SaslHandshake then the mechanism's exchange; returns the last SaslAuthenticate response
        (None after a v0 handshake's raw tokens). SaslFailed carries the server's error."""
        hs = self.handshake(mechanism, handshake_version)
        if hs.error_code:
            raise SaslFailed(hs.error_code, f"mechanisms {hs.mechanisms}", "SaslHandshake")
        config = {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password,
                  "security_protocol": "SASL_SSL"}
        mech = SaslMechanismPlain(**config) if mechanism == "PLAIN" else SaslMechanismScram(**config)
        last = None
        while not mech.is_done():
            token = mech.auth_bytes()
            if handshake_version == 0:
                self.send_raw(token)
                reply = self.recv_raw()
            else:
                last = self.call(SaslAuthenticateRequest(version=auth_version, auth_bytes=token), auth_version)
                if last.error_code:
                    raise SaslFailed(last.error_code, last.error_message, "SaslAuthenticate")
                reply = bytes(last.auth_bytes)
            mech.receive(reply)
        assert mech.is_authenticated()
        return last
