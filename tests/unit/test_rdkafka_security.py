"""scripts/rdkafka_security.py: trivup's secured listeners as kcoord settings, and the client side
librdkafka's suite gets (test.conf lines and SSL_* environment)."""
from __future__ import annotations

import shutil
import ssl
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import rdkafka_security as sec  # noqa: E402

from kcoord.server.config import Config  # noqa: E402
from kcoord.server.listeners import listener_specs  # noqa: E402
from kcoord.server.security.jaas import plain_users  # noqa: E402
from kcoord.server.security.tls import server_context  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command line")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> sec.Pki:
    return sec.make_pki(tmp_path_factory.mktemp("pki"))


def _config(pki: sec.Pki | None) -> Config:
    listeners = "PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2"
    if pki is not None:
        listeners += ",SSL://127.0.0.1:3,SASL_SSL://127.0.0.1:4"
    return Config.load(None, [f"{k}={v}" for k, v in {**sec.server_settings(pki), "listeners": listeners}.items()])


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> ssl.SSLObject:
    """A TLS handshake between the two contexts through memory BIOs; the server's SSLObject."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    cli = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(20):
        for name, obj in (("c", cli), ("s", srv)):
            if not done[name]:
                try:
                    obj.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return srv
    raise AssertionError("handshake did not finish")


def test_the_server_settings_are_kcoords_and_serve_trivups_four_listeners(pki):
    config = _config(pki)
    specs = {s.name: s for s in listener_specs(config)}
    assert set(specs) == {"PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"}
    for name in ("sasl_plaintext", "sasl_ssl"):
        jaas = config.listener_overrides[name]["plain.sasl.jaas.config"].value
        assert plain_users(jaas) == sec.SASL_USERS
    assert config["connections.max.reauth.ms"] == 10000


def test_the_client_certificate_is_accepted_on_the_ssl_listener_and_names_its_principal(pki):
    config = _config(pki)
    spec = next(s for s in listener_specs(config) if s.name == "SSL")
    server = server_context(config, spec)
    assert server.verify_mode == ssl.CERT_REQUIRED           # trivup: ssl.client.auth=required
    lines, env = sec.client("SSL", pki)
    conf = dict(line.split("=", 1) for line in lines)
    client = ssl.create_default_context(cafile=conf["ssl.ca.location"])
    client.load_cert_chain(conf["ssl.certificate.location"], conf["ssl.key.location"], conf["ssl.key.password"])
    srv = _handshake(server, client)
    subject = dict(x[0] for x in srv.getpeercert()["subject"])
    assert subject["commonName"] == "librdkafka1"
    # what 0097 reads, by trivup's names
    for var in ("SSL_pkcs", "SSL_pub_der", "SSL_priv_der", "SSL_ca_der", "SSL_all_cas_pem", "SSL_pub_pem",
                "SSL_priv_pem", "SSL_ca_pem"):
        assert Path(env[var]).is_file(), var
    assert env["SSL_client_auth"] == "required"
    assert Path(env["SSL_all_cas_pem"]).read_text().count("BEGIN CERTIFICATE") == 2


def test_a_certificate_from_the_unused_ca_is_refused(pki, tmp_path):
    config = _config(pki)
    server = server_context(config, next(s for s in listener_specs(config) if s.name == "SSL"))
    key, req, cert = tmp_path / "k.pem", tmp_path / "r.req", tmp_path / "c.pem"
    sec._openssl(tmp_path, "genpkey", "-algorithm", "RSA", "-out", key)  # noqa: SLF001
    sec._openssl(tmp_path, "req", "-new", "-key", key, "-subj", "/CN=stranger", "-out", req)  # noqa: SLF001
    sec._sign(tmp_path, pki.unused_ca, req, cert)  # noqa: SLF001
    client = ssl.create_default_context(cafile=str(pki.ca.pem))
    client.load_cert_chain(str(cert), str(key))
    with pytest.raises(ssl.SSLError):
        _handshake(server, client)


def test_sasl_clients_use_plain_with_librdkafkas_test_user():
    lines, env = sec.client("SASL_PLAINTEXT", None)
    assert lines == ["security.protocol=SASL_PLAINTEXT", "sasl.mechanisms=PLAIN", "sasl.username=testuser",
                     "sasl.password=testpass"]
    assert env == {}
    assert sec.client("PLAINTEXT", None) == (["security.protocol=PLAINTEXT"], {})
    with pytest.raises(RuntimeError):
        sec.client("SSL", None)
