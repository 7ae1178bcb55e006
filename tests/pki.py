"""A test PKI made by the tests themselves with the openssl command line: a CA, the server's
certificate for 127.0.0.1 / localhost, client certificates signed by the CA, and a second,
untrusted CA with a client certificate of its own. Keys are EC P-256 in PKCS#8 PEM (what Java's
PEM keystore, librdkafka, Node and Python all read).

    pki = make_pki(tmp_dir)
    pki.server.keystore     key + chain in one PEM file (ssl.keystore.location, type PEM)
    pki.ca_cert             the truststore of server and clients (ssl.truststore.location)
    pki.client("alice")     a client certificate with subject CN=alice,OU=clients,O=kcoord-test
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CLIENT_SUBJECT = "/O=kcoord-test/OU=clients/CN={name}"


def client_dn(name: str) -> str:
    """The RFC 2253 name Kafka makes of CLIENT_SUBJECT (last RDN first)."""
    return f"CN={name},OU=clients,O=kcoord-test"


@dataclass(frozen=True)
class Identity:
    key: Path  # PKCS#8 private key (PEM)
    cert: Path  # the certificate (PEM)
    keystore: Path  # key followed by the certificate chain, in one PEM file

    def pem_key(self) -> str:
        return self.key.read_text()

    def pem_chain(self) -> str:
        return self.cert.read_text()


class Pki:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca_key = root / "ca.key"
        self.ca_cert = root / "ca.pem"
        self.other_ca_key = root / "other-ca.key"
        self.other_ca_cert = root / "other-ca.pem"
        self._identities: dict[str, Identity] = {}

    def _openssl(self, *args: str | Path) -> None:
        r = subprocess.run(["openssl", *map(str, args)], cwd=self.root, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(map(str, args))} failed:\n{r.stderr}")

    def _key(self, path: Path) -> None:
        self._openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path)

    def _ca(self, key: Path, cert: Path, cn: str) -> None:
        self._key(key)
        self._openssl("req", "-x509", "-new", "-key", key, "-sha256", "-days", "3", "-subj", f"/O=kcoord-test/CN={cn}",
                      "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                      "-out", cert)

    def make(self) -> Pki:
        self.root.mkdir(parents=True, exist_ok=True)
        self._ca(self.ca_key, self.ca_cert, "kcoord test CA")
        self._ca(self.other_ca_key, self.other_ca_cert, "an untrusted CA")
        self.server = self._issue("server", "/O=kcoord-test/CN=localhost", self.ca_key, self.ca_cert,
                                  "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth")
        return self

    def _issue(self, name: str, subject: str, ca_key: Path, ca_cert: Path, extensions: str) -> Identity:
        key, csr, cert = self.root / f"{name}.key", self.root / f"{name}.csr", self.root / f"{name}.pem"
        ext = self.root / f"{name}.ext"
        ext.write_text(extensions + "\n")
        self._key(key)
        self._openssl("req", "-new", "-key", key, "-subj", subject, "-out", csr)
        self._openssl("x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial", "-days", "3",
                      "-sha256", "-extfile", ext, "-out", cert)
        keystore = self.root / f"{name}-keystore.pem"
        keystore.write_text(key.read_text() + cert.read_text())
        ident = Identity(key, cert, keystore)
        self._identities[name] = ident
        return ident

    def client(self, name: str, untrusted: bool = False) -> Identity:
        """A client certificate for CN=<name> (signed by the untrusted CA if asked)."""
        tag = f"client-{name}{'-untrusted' if untrusted else ''}"
        if tag not in self._identities:
            ca_key, ca_cert = (self.other_ca_key, self.other_ca_cert) if untrusted else (self.ca_key, self.ca_cert)
            self._issue(tag, CLIENT_SUBJECT.format(name=name), ca_key, ca_cert, "extendedKeyUsage=clientAuth")
        return self._identities[tag]

    def encrypted_server_key(self, password: str) -> Path:
        """The server's key encrypted with `password` (PKCS#8), for ssl.key.password."""
        out = self.root / "server-encrypted.key"
        self._openssl("pkcs8", "-topk8", "-in", self.server.key, "-v2", "aes-256-cbc", "-passout",
                      f"pass:{password}", "-out", out)
        return out


def make_pki(root: Path) -> Pki:
    if shutil.which("openssl") is None:
        raise AssertionError("openssl not found; run `make clients` (scripts/setup-clients.sh installs it)")
    return Pki(root).make()
