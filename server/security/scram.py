"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer serves them.

Credentials are stored as Kafka stores them (UserScramCredentialRecord): salt, iterations,
StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword,
"Server Key"); the password itself is never kept.

The exchange: client-first `n,[a=authzid],n=<saslname>,r=<nonce>[,ext...]` -> server-first
`r=<nonce+server nonce>,s=<salt>,i=<iterations>`; client-final `c=<binding>,r=<nonce>,p=<proof>`
-> server-final `v=<server signature>`. Failures carry Kafka's messages: those Kafka sends to the
client (ScramAuthenticationFailed.client_message) and those it only logs.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import IntEnum


class ScramMechanism(IntEnum):
    """Kafka's ScramMechanism type codes (AlterUserScramCredentials, DescribeUserScramCredentials)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @property
    def min_iterations(self) -> int:
        return 4096

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        for m in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if m.mechanism_name == name:
                return m
        return cls.UNKNOWN

    @classmethod
    def from_type(cls, code: int) -> ScramMechanism:
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MAX_ITERATIONS = 16384  # Kafka's ScramControlManager limit


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mech: ScramMechanism, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, mech.hash_name).digest()


def _h(mech: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mech.hash_name, data).digest()


def salted_password(mech: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mech.hash_name, password.encode(), salt, iterations)


def credential_from_salted(mech: ScramMechanism, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials stores (Kafka's ScramControlManager.finishUpsertion)."""
    client_key = _hmac(mech, salted, b"Client Key")
    return ScramCredential(salt, _h(mech, client_key), _hmac(mech, salted, b"Server Key"), iterations)


def credential_from_password(mech: ScramMechanism, password: str, iterations: int = 4096,
                             salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else secure_random_string().encode()
    return credential_from_salted(mech, salt, salted_password(mech, password, salt, iterations), iterations)


def secure_random_string() -> str:
    """Kafka's ScramFormatter.secureRandomString: a 130-bit random number in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


# ---- messages (Kafka's ScramMessages patterns) ----

_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # \x01-\x7F except ',' and '='
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"  # \x21-\x7E except ','
_VALUE = r"[\x01-\x2B\x2D-\x7F]+"  # \x01-\x7F except ','
_BASE64_CHAR = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_BASE64_CHAR}{{4}})*(?:{_BASE64_CHAR}{{3}}=|{_BASE64_CHAR}{{2}}==)?"
_RESERVED = rf"(m={_VALUE},)?"
_EXTENSIONS = rf"(,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS})")
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")


def username(saslname: str) -> str:
    """Kafka's ScramFormatter.username: =2C -> ',' and =3D -> '='; any other '=' is invalid."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ValueError(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


class ScramAuthenticationFailed(Exception):
    """`client_message` is what the client is told (None: Kafka's generic 'invalid credentials'
    message, because the detail could reveal whether the user exists); str(e) is for the log."""

    def __init__(self, detail: str, client_message: str | None = None) -> None:
        super().__init__(detail)
        self.client_message = client_message


class ScramServer:
    """One SCRAM exchange on the server side. `lookup(username)` gives the stored credential
    or None."""

    def __init__(self, mechanism: ScramMechanism, lookup, server_nonce=secure_random_string) -> None:  # noqa: ANN001
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._state = "first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self.authorization_id: str | None = None
        self.attempted_user: str | None = None  # for the log line of a failure

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._first(token)
            if self._state == "final":
                return self._final(token)
            raise ScramAuthenticationFailed(f"Unexpected challenge in Sasl server state {self._state.upper()}",
                                            f"Unexpected challenge in Sasl server state {self._state.upper()}")
        except ScramAuthenticationFailed:
            self._state = "failed"
            self._credential = None
            raise

    def _first(self, token: bytes) -> bytes:
        message = token.decode("utf-8", "replace")
        m = _CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise ScramAuthenticationFailed("Invalid SCRAM client first message format")
        try:
            user = username(m.group("saslname"))
        except ValueError as e:
            raise ScramAuthenticationFailed(f"Authentication failed: Credentials could not be obtained ({e})") from None
        self.attempted_user = user
        credential = self._lookup(user)
        if credential is None:
            raise ScramAuthenticationFailed("Authentication failed: Invalid user credentials")
        authzid = m.group("authzid") or ""
        if authzid and authzid != user:
            raise ScramAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username",
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < self.mechanism.min_iterations:
            raise ScramAuthenticationFailed(f"Iterations {credential.iterations} is less than the minimum "
                                            f"{self.mechanism.min_iterations} for {self.mechanism.mechanism_name}")
        self._credential = credential
        self.authorization_id = user
        gs2_end = message.index(",", message.index(",") + 1) + 1  # after "n,[a=...],"
        self._client_first_bare = message[gs2_end:]
        self._nonce = m.group("nonce") + self._server_nonce()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _final(self, token: bytes) -> bytes:
        message = token.decode("utf-8", "replace")
        m = _CLIENT_FINAL.fullmatch(message)
        if m is None:
            raise ScramAuthenticationFailed("Invalid SCRAM client final message format")
        if not m.group("nonce").endswith(self._nonce):
            raise ScramAuthenticationFailed("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        mech = self.mechanism
        without_proof = f"c={m.group('channel')},r={m.group('nonce')}"
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = _hmac(mech, credential.stored_key, auth_message)
        try:
            proof = base64.b64decode(m.group("proof"), validate=True)
        except ValueError:
            raise ScramAuthenticationFailed("Invalid client credentials") from None
        if len(proof) != len(client_signature):
            raise ScramAuthenticationFailed("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof, strict=True))
        if not hmac.compare_digest(_h(mech, client_key), credential.stored_key):
            raise ScramAuthenticationFailed("Invalid client credentials")
        server_signature = _hmac(mech, credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        return b"v=" + base64.b64encode(server_signature)
