"""The secured listeners of librdkafka's test clusters, for scripts/rdkafka_suite.py.

librdkafka's clusters come from trivup (tests/trivup/ in librdkafka's source; its KafkaBrokerApp
and SslApp). Every broker there serves PLAINTEXT and SASL_PLAINTEXT, with SASL/PLAIN always
enabled (users admin=admin and, in librdkafka's SASL runs, testuser=testpass), and with --ssl
also SSL and SASL_SSL: trivup makes two CAs (the first never signs anything; both are
concatenated in all_cas.pem), signs the broker's certificate and a client certificate with the
second, and sets ssl.client.auth=required. The client's key and certificate exist in PEM, DER
and PKCS#12, and the test runner finds every path in SSL_* environment variables (0097 reads
them). librdkafka's tests/interactive_broker_version.py adds connections.max.reauth.ms=10000.

This module makes the same with the openssl command line (the broker's keystore in PEM, which is
what kcoord reads, where trivup writes JKS), gives the server's settings for the four
listeners, and for each client security.protocol the test.conf lines and environment that
trivup's LibrdkafkaTestApp gives a test run.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

PASSWORD = "12345678"                 # trivup's ssl_key_pass (keys, keystores, PKCS#12)
SUBJECT = "/C=NN/ST=ST/L=L/O=O/CN={cn}"  # trivup's mksubj with its defaults
SASL_USERS = {"admin": "admin", "testuser": "testpass"}
SASL_CLIENT_USER = "testuser"         # the first of librdkafka's sasl_users
PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
REAUTH_MS = "10000"                   # interactive_broker_version.py's --max-reauth-ms default


@dataclass(frozen=True)
class Ca:
    pem: Path
    der: Path
    key: Path
    srl: Path

    def env(self, prefix: str) -> dict[str, str]:
        return {f"{prefix}_pem": str(self.pem), f"{prefix}_der": str(self.der), f"{prefix}_key": str(self.key),
                f"{prefix}_srl": str(self.srl), f"{prefix}_password": PASSWORD}


@dataclass(frozen=True)
class Pki:
    unused_ca: Ca
    ca: Ca
    all_cas: Path
    broker_keystore: Path      # encrypted key + certificate + CA, PEM
    client: dict[str, Path]    # priv_pem, priv_der, pub_pem, pub_der, pkcs, req


def _openssl(cwd: Path, *args: str | Path) -> None:
    r = subprocess.run(["openssl", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(map(str, args))} failed:\n{r.stderr}")


def _ca(root: Path, cn: str) -> Ca:
    ca = Ca(pem=root / f"ca_{cn}.pem", der=root / f"ca_{cn}.der", key=root / f"ca_{cn}.key", srl=root / f"ca_{cn}.srl")
    _openssl(root, "req", "-new", "-x509", "-newkey", "rsa:2048", "-keyout", ca.key, "-out", ca.pem, "-days", "10000",
             "-passout", f"pass:{PASSWORD}", "-subj", SUBJECT.format(cn=cn))
    _openssl(root, "x509", "-outform", "der", "-in", ca.pem, "-out", ca.der)
    return ca


def _sign(root: Path, ca: Ca, req: Path, out: Path, extfile: Path | None = None) -> None:
    args: list[str | Path] = ["x509", "-req", "-in", req, "-CA", ca.pem, "-CAkey", ca.key, "-passin", f"pass:{PASSWORD}",
                              "-out", out, "-days", "10000"]
    args += ["-CAserial", ca.srl] if ca.srl.exists() else ["-CAcreateserial", "-CAserial", ca.srl]
    if extfile is not None:
        args += ["-extfile", extfile]
    _openssl(root, *args)


def make_pki(root: Path) -> Pki:
    """trivup's SslApp: the unused CA, the CA, all_cas.pem, the broker's keystore and one client's
    key and certificate in every format the tests read."""
    root.mkdir(parents=True, exist_ok=True)
    unused, ca = _ca(root, "SslApp_unused"), _ca(root, "SslApp")
    all_cas = root / "all_cas.pem"
    all_cas.write_text(unused.pem.read_text() + ca.pem.read_text())

    # The broker: trivup's keytool key with SAN DNS:localhost; the suite connects to 127.0.0.1.
    bkey, breq, bcert, ext = root / "broker-key.pem", root / "broker.req", root / "broker.pem", root / "broker.exts"
    _openssl(root, "genpkey", "-algorithm", "RSA", "-aes256", "-pass", f"pass:{PASSWORD}", "-out", bkey)
    _openssl(root, "req", "-new", "-key", bkey, "-passin", f"pass:{PASSWORD}", "-subj", SUBJECT.format(cn="broker1"),
             "-out", breq)
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _sign(root, ca, breq, bcert, ext)
    keystore = root / "broker1.keystore.pem"
    keystore.write_text(bkey.read_text() + bcert.read_text() + ca.pem.read_text())

    # The client (LibrdkafkaTestApp: create_cert('librdkafka<appid>')): its certificate file
    # holds the CA after the certificate, as trivup's does.
    cn = "librdkafka1"
    c = {"priv_pem": root / f"{cn}-priv.pem", "priv_der": root / f"{cn}-priv.der", "pub_pem": root / f"{cn}-pub.pem",
         "pub_der": root / f"{cn}-pub.der", "pkcs": root / f"{cn}.pfx", "req": root / f"{cn}.req"}
    _openssl(root, "genpkey", "-algorithm", "RSA", "-out", c["priv_pem"])
    _openssl(root, "req", "-new", "-key", c["priv_pem"], "-subj", SUBJECT.format(cn=cn), "-out", c["req"])
    _sign(root, ca, c["req"], c["pub_pem"])
    c["pub_pem"].write_text(c["pub_pem"].read_text() + ca.pem.read_text())
    _openssl(root, "x509", "-outform", "der", "-in", c["pub_pem"], "-out", c["pub_der"])
    _openssl(root, "rsa", "-outform", "der", "-in", c["priv_pem"], "-out", c["priv_der"])
    _openssl(root, "pkcs12", "-export", "-descert", "-out", c["pkcs"], "-inkey", c["priv_pem"], "-in", c["pub_pem"],
             "-passout", f"pass:{PASSWORD}")
    return Pki(unused_ca=unused, ca=ca, all_cas=all_cas, broker_keystore=keystore, client=c)


def server_settings(pki: Pki | None) -> dict[str, str]:
    """The broker's security settings as trivup writes them (its server.properties template,
    the JAAS file it hands the JVM, and the SSL settings), in kcoord's configuration."""
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{u}="{p}"' for u, p in SASL_USERS.items()) + ";")
    out = {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "connections.max.reauth.ms": REAUTH_MS,
    }
    if pki is not None:
        out.update({
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.broker_keystore),
            "ssl.key.password": PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca.pem),
            "ssl.client.auth": "required",
            # trivup: TLSv1.2,TLSv1.1,TLSv1; OpenSSL 3 refuses the two older ones at its default
            # security level, on either side.
            "ssl.enabled.protocols": "TLSv1.2",
        })
    return out


def client(protocol: str, pki: Pki | None) -> tuple[list[str], dict[str, str]]:
    """(test.conf lines, environment) of a test run whose client uses `protocol`."""
    conf = [f"security.protocol={protocol}"]
    env: dict[str, str] = {}
    if protocol.startswith("SASL"):
        conf += ["sasl.mechanisms=PLAIN", f"sasl.username={SASL_CLIENT_USER}",
                 f"sasl.password={SASL_USERS[SASL_CLIENT_USER]}"]
    if protocol.endswith("SSL"):
        if pki is None:
            raise RuntimeError(f"{protocol} needs the PKI (openssl)")
        c = pki.client
        conf += [f"ssl.ca.location={pki.ca.pem}", f"ssl.certificate.location={c['pub_pem']}",
                 f"ssl.key.location={c['priv_pem']}", f"ssl.key.password={PASSWORD}"]
        env.update(pki.ca.env("SSL_ca"))
        env.update(pki.unused_ca.env("SSL_unused_ca"))
        env.update({"SSL_all_cas_pem": str(pki.all_cas), "SSL_client_auth": "required", "SSL_password": PASSWORD,
                    "SSL_pkcs": str(c["pkcs"]), "SSL_req": str(c["req"])})
        env.update({f"SSL_{k}": str(v) for k, v in c.items() if k not in ("pkcs", "req")})
    return conf, env
