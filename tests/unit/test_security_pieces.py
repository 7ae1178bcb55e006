"""The security building blocks on their own: SCRAM against RFC 7677's test vector and Kafka's
refusals, SASL/PLAIN, JAAS parsing, certificate subjects and ssl.principal.mapping.rules, the
listener-scoped settings, secrets kept out of messages, the SASL transition table."""
from __future__ import annotations

import base64
import ssl
import subprocess

import pytest

from kcoord.server.config import Config
from kcoord.server.listeners import listener_setting
from kcoord.server.security.jaas import JaasError, parse_jaas_config, plain_users
from kcoord.server.security.plain import PlainAuthenticationFailed, PlainServer
from kcoord.server.security.principal import SslPrincipalMapper, subject_dn
from kcoord.server.security.sasl import TRANSITIONS, Input, State
from kcoord.server.security.scram import (
    ScramAuthenticationFailed,
    ScramMechanism,
    ScramServer,
    credential_from_password,
    username,
)
from kcoord.server.security.settings import Password

SHA256 = ScramMechanism.SCRAM_SHA_256
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def rfc7677_server() -> ScramServer:
    cred = credential_from_password(SHA256, "pencil", 4096, SALT)
    return ScramServer(SHA256, lambda user: cred if user == "user" else None, lambda: SERVER_NONCE)


def test_scram_sha_256_rfc_7677_vector():
    s = rfc7677_server()
    first = s.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = s.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                       b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert s.complete and s.authorization_id == "user"


@pytest.mark.parametrize("first, final, detail, told", [
    (b"n,,n=nobody,r=abc", None, "Invalid user credentials", None),
    (b"n,a=other,n=user,r=abc", None, None,
     "Authentication failed: Client requested an authorization id that is different from username"),
    (b"y,,n=user,r=abc", None, "Invalid SCRAM client first message format", None),
    (b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                          b"p=AAAAZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "Invalid client credentials", None),
    (b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", b"c=biws,r=someone-else,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
     "Invalid client nonce", None),
])
def test_scram_refusals_say_to_the_client_only_what_kafka_says(first, final, detail, told):
    s = rfc7677_server()
    with pytest.raises(ScramAuthenticationFailed) as e:
        s.evaluate(first)
        s.evaluate(final)
    if detail is not None:
        assert detail in str(e.value)
    assert e.value.client_message == told  # None: the generic "invalid credentials" message
    with pytest.raises(ScramAuthenticationFailed, match="Unexpected challenge"):
        s.evaluate(b"n,,n=user,r=x")


def test_scram_refuses_too_few_iterations_and_reads_escaped_names():
    weak = credential_from_password(SHA256, "pw", 1000)
    with pytest.raises(ScramAuthenticationFailed, match="Iterations 1000 is less than the minimum 4096"):
        ScramServer(SHA256, lambda u: weak).evaluate(b"n,,n=u,r=abc")
    assert username("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        username("a=4Fb")


def test_plain_as_kafkas_plain_sasl_server():
    users = {"alice": "alice-secret"}
    ok = PlainServer(users)
    assert ok.evaluate(b"\0alice\0alice-secret") == b"" and ok.complete and ok.authorization_id == "alice"
    assert PlainServer(users).evaluate(b"alice\0alice\0alice-secret") == b""
    cases = {b"\0alice\0wrong": "Authentication failed: Invalid username or password",
             b"\0bob\0alice-secret": "Authentication failed: Invalid username or password",
             b"\0\0x": "Authentication failed: username not specified",
             b"\0alice\0": "Authentication failed: password not specified",
             b"bob\0alice\0alice-secret": "Authentication failed: Client requested an authorization id that is "
                                          "different from username",
             b"alice-secret": "Invalid SASL/PLAIN response: expected 3 tokens, got 1"}
    for token, message in cases.items():
        with pytest.raises(PlainAuthenticationFailed) as e:
            PlainServer(users).evaluate(token)
        assert str(e.value) == message


def test_jaas_config_parsing():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
            '  username="admin" password="admin-secret"\n  user_admin="admin-secret" user_alice="a\\"b;c" // note\n;')
    assert plain_users(text) == {"admin": "admin-secret", "alice": 'a"b;c'}
    assert parse_jaas_config("org.apache.kafka.common.security.scram.ScramLoginModule required;")[0].options == {}
    with pytest.raises(JaasError, match="control flag"):
        parse_jaas_config("Module user_a=b;")
    with pytest.raises(JaasError, match="end with ';'"):
        parse_jaas_config("Module required user_a=\"b\"")
    with pytest.raises(JaasError, match="2 login modules"):
        plain_users("A required; B required;")
    assert plain_users("org.example.OtherModule required user_a=\"b\";") == {}


def _der(tmp_path, subject: str) -> bytes:
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", subject], check=True, capture_output=True)
    return ssl.PEM_cert_to_DER_cert(cert.read_text())


def test_subject_dn_as_java_prints_it(tmp_path):
    der = _der(tmp_path, "/C=US/ST=CA/L=SF/O=Acme, Inc./OU=eng+UID=42/CN=alice smith/emailAddress=a@b.c")
    dn = subject_dn(der)
    # last RDN first; ',' escaped; a multi-valued RDN joined by '+'; emailAddress as OID=#hex
    assert dn.startswith("1.2.840.113549.1.9.1=#16")
    assert dn.endswith(",CN=alice smith,OU=eng+UID=42,O=Acme\\, Inc.,L=SF,ST=CA,C=US")


def test_principal_mapping_rules():
    dn = "CN=Alice,OU=ServiceUsers,O=Example,C=US"
    assert SslPrincipalMapper("DEFAULT").name(dn) == dn
    assert SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT").name(dn) == "alice"
    assert SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U").name(dn) == "ALICE@SERVICEUSERS"
    assert SslPrincipalMapper("RULE:^CN=(.*?),OU=Nope.*$/$1/, DEFAULT").name(dn) == dn  # no match: next rule
    with pytest.raises(ValueError, match="No rules apply"):
        SslPrincipalMapper("RULE:^CN=(.*?),OU=Nope.*$/$1/").name(dn)
    assert SslPrincipalMapper("RULE:^CN=([^,]*).*$/$1\\/x/").name(dn) == "Alice/x"  # an escaped slash
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper("RULE:broken")


def test_listener_scoped_settings_and_secrets():
    cfg = Config({"ssl.client.auth": "requested", "listener.name.internal.ssl.client.auth": "required",
                  "listener.name.internal.scram-sha-256.connections.max.reauth.ms": "5000",
                  "connections.max.reauth.ms": "100", "ssl.key.password": "k3y",
                  "listener.name.internal.plain.sasl.jaas.config": "x required;"})
    assert listener_setting(cfg, "INTERNAL", "ssl.client.auth") == "required"
    assert listener_setting(cfg, "EXTERNAL", "ssl.client.auth") == "requested"
    assert listener_setting(cfg, "INTERNAL", "connections.max.reauth.ms", "SCRAM-SHA-256") == 5000
    assert listener_setting(cfg, "INTERNAL", "connections.max.reauth.ms", "PLAIN") == 100
    assert str(cfg["ssl.key.password"]) == "[hidden]" and cfg["ssl.key.password"].value == "k3y"
    assert repr(cfg.listener_overrides["internal"]["plain.sasl.jaas.config"]) == "[hidden]"
    with pytest.raises(ValueError) as e:
        Config({"ssl.client.auth": "maybe"})
    assert "none, requested, required" in str(e.value)
    assert isinstance(Config({"ssl.truststore.password": "t"})["ssl.truststore.password"], Password)
    assert "listener.name.x.unheard.of" in Config({"listener.name.x.unheard.of": "1"}).unknown


def test_the_sasl_transition_table_is_complete_and_closed():
    """Every (state, input) either has an action or closes the connection; no action leads
    out of its declared states (checked at run time); the terminal states have no action."""
    for (state, _), (action, targets) in TRANSITIONS.items():
        assert action and targets and state not in (State.COMPLETE, State.FAILED)
    assert (State.HANDSHAKE_OR_VERSIONS, Input.OTHER) not in TRANSITIONS  # Metadata before SASL: closed
    assert (State.HANDSHAKE, Input.API_VERSIONS) not in TRANSITIONS  # one ApiVersions only
    assert all((State.RAW_AUTHENTICATE, i) in TRANSITIONS for i in Input)


def test_recorded_requests_show_no_secrets():
    """The control API's recording of requests: SASL tokens, SCRAM salted passwords and
    password configs read [hidden]; everything else is shown as sent."""
    from kafka.protocol.admin import AlterUserScramCredentialsRequest, IncrementalAlterConfigsRequest
    from kafka.protocol.sasl import SaslAuthenticateRequest

    from kcoord.protocol.api import ApiKey
    from kcoord.server.control.recorder import Recorder

    rec = Recorder(10)
    U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    C = R.AlterableConfig
    requests = [
        (ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret")),
        (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, AlterUserScramCredentialsRequest(deletions=[], upsertions=[
            U(name="alice", mechanism=1, iterations=4096, salt=b"salty", salted_password=b"s" * 32)])),
        (ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest(validate_only=True, resources=[
            R(resource_type=4, resource_name="", configs=[
                C(name="listener.name.sasl_ssl.ssl.key.password", config_operation=0, value="key-secret"),
                C(name="log.retention.ms", config_operation=0, value="1000")]),
            R(resource_type=2, resource_name="t", configs=[C(name="retention.ms", config_operation=0, value="5")])])),
    ]
    for api, req in requests:
        rec.add(1, "127.0.0.1", api, 0, 1, "c", 2, req)
    import json

    dumped = json.dumps([e.to_json() for e in rec.entries])
    for secret in ("alice-secret", "salty", "s" * 32, "key-secret"):
        assert secret not in dumped
    bodies = [e.to_json()["body"] for e in rec.entries]
    assert bodies[0]["auth_bytes"] == "[hidden]"
    assert bodies[1]["upsertions"][0]["name"] == "alice" and bodies[1]["upsertions"][0]["salted_password"] == "[hidden]"
    broker, topic = bodies[2]["resources"]
    assert [c["value"] for c in broker["configs"]] == ["[hidden]", "1000"]
    assert topic["configs"][0]["value"] == "5"
