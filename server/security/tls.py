"""A listener's TLS context from Kafka's ssl.* settings (PEM keystores and truststores).

Keystore (the server's key and certificate chain), ssl.keystore.type=PEM:
  ssl.keystore.location = a PEM file holding the private key and the certificate chain, or
  ssl.keystore.key + ssl.keystore.certificate.chain = the same PEM text inline;
  ssl.key.password decrypts an encrypted private key. (Kafka refuses ssl.keystore.password
  with a PEM keystore; so does kcoord.)
Truststore (who may present client certificates), ssl.truststore.type=PEM:
  ssl.truststore.location = a PEM file of CA certificates, or ssl.truststore.certificates inline.
ssl.client.auth = none | requested | required (for SASL_SSL listeners only the
listener-prefixed setting counts, as in Kafka). ssl.enabled.protocols (TLSv1.2,TLSv1.3),
ssl.cipher.suites (OpenSSL cipher names, TLS 1.2 and below).

Only PEM is read: a JKS or PKCS12 keystore must be converted first (keytool -importkeystore
to PKCS12, then openssl pkcs12 -nodes).
"""
from __future__ import annotations

import os
import ssl
import tempfile
from typing import TYPE_CHECKING

from kcoord.server.listeners import has_listener_setting, listener_setting

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.listeners import ListenerSpec

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    pass


def client_auth(config: Config, spec: ListenerSpec) -> str:
    """Kafka enables client certificates on a SASL_SSL listener only through the
    listener-prefixed ssl.client.auth (SASL authenticates the client there)."""
    if spec.protocol.uses_sasl and not has_listener_setting(config, spec.name, "ssl.client.auth"):
        return "none"
    return listener_setting(config, spec.name, "ssl.client.auth")


def server_context(config: Config, spec: ListenerSpec) -> ssl.SSLContext:
    """The SSLContext of one SSL / SASL_SSL listener (TlsConfigError with a clear message)."""
    name = spec.name

    def get(key: str):  # noqa: ANN202
        return listener_setting(config, name, key)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, get("ssl.enabled.protocols"), name)
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError:
            raise TlsConfigError(f"listener {name}: none of ssl.cipher.suites {ciphers} is an OpenSSL cipher "
                                 "this server supports") from None
    _keystore(ctx, get, name)
    mode = client_auth(config, spec)
    ctx.verify_mode = _CLIENT_AUTH[mode]
    if mode != "none":
        _truststore(ctx, get, name)
    # One TLS record per write is what Kafka clients expect; no session tickets needed, but
    # harmless: OpenSSL's defaults are kept.
    return ctx


def _protocols(ctx: ssl.SSLContext, enabled: list[str], name: str) -> None:
    unknown = [p for p in enabled if p not in _VERSIONS]
    if unknown or not enabled:
        raise TlsConfigError(f"listener {name}: ssl.enabled.protocols {enabled} must name protocols among "
                             f"{', '.join(_VERSIONS)}")
    versions = sorted(_VERSIONS[p] for p in enabled)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def _keystore(ctx: ssl.SSLContext, get, name: str) -> None:  # noqa: ANN001
    location = get("ssl.keystore.location")
    key, chain = get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
    if not location and not (key and chain):
        raise TlsConfigError(f"listener {name}: an SSL listener needs ssl.keystore.location, or "
                             "ssl.keystore.key and ssl.keystore.certificate.chain (PEM)")
    if get("ssl.keystore.type").upper() != "PEM":
        raise TlsConfigError(f"listener {name}: ssl.keystore.type={get('ssl.keystore.type')} is not supported; "
                             "kcoord reads PEM keystores (ssl.keystore.type=PEM)")
    if location and get("ssl.keystore.password"):
        raise TlsConfigError(f"listener {name}: SSL key store password cannot be specified with PEM format, "
                             "only key password may be specified")
    password = get("ssl.key.password").value or None
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
        else:
            _load_inline_chain(ctx, chain.value, key.value, password)
    except FileNotFoundError:
        raise TlsConfigError(f"listener {name}: ssl.keystore.location {location} does not exist") from None
    except (ssl.SSLError, OSError) as e:
        # the message never includes the key or its password
        raise TlsConfigError(f"listener {name}: could not load the PEM keystore "
                             f"({location or 'ssl.keystore.key'}): {e.__class__.__name__} {getattr(e, 'reason', '') or ''}".rstrip()) from None


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None) -> None:
    """load_cert_chain reads files only: the inline PEM goes through a private temporary file
    that is removed at once."""
    fd, path = tempfile.mkstemp(prefix="kcoord-keystore-", suffix=".pem")
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (key.strip() + "\n" + chain.strip() + "\n").encode())
        os.close(fd)
        fd = -1
        ctx.load_cert_chain(path, password=password)
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(path)


def _truststore(ctx: ssl.SSLContext, get, name: str) -> None:  # noqa: ANN001
    location = get("ssl.truststore.location")
    certificates = get("ssl.truststore.certificates")
    if not location and not certificates:
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)  # Kafka falls back to the JVM's trust store
        return
    if get("ssl.truststore.type").upper() != "PEM":
        raise TlsConfigError(f"listener {name}: ssl.truststore.type={get('ssl.truststore.type')} is not "
                             "supported; kcoord reads PEM truststores (ssl.truststore.type=PEM)")
    try:
        if location:
            ctx.load_verify_locations(cafile=location)
        else:
            ctx.load_verify_locations(cadata=certificates.value)
    except FileNotFoundError:
        raise TlsConfigError(f"listener {name}: ssl.truststore.location {location} does not exist") from None
    except (ssl.SSLError, OSError, ValueError) as e:
        raise TlsConfigError(f"listener {name}: could not load the PEM truststore: {e}") from None
