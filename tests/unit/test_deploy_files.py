"""docker-compose.yml, the Dockerfile, the Makefile and the README agree with one another (the
files run in tests/docker; these checks hold without a Docker engine)."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _env(service: dict) -> dict[str, str]:
    return {k: str(v) for k, v in service.get("environment", {}).items()}


def _endpoints(value: str) -> dict[str, str]:
    return dict(e.split("://", 1) for e in value.split(","))


def test_server_service_volume_listeners_port_and_health():
    c = compose()
    kcoord = c["services"]["kcoord"]
    env = _env(kcoord)
    volume, target = kcoord["volumes"][0].split(":")
    assert volume in c["volumes"]
    assert env["KAFKA_LOG_DIRS"] == target  # the data lives on the volume
    # INTERNAL for the compose network (the service name), EXTERNAL for the host (localhost:9092)
    listeners, advertised = _endpoints(env["KAFKA_LISTENERS"]), _endpoints(env["KAFKA_ADVERTISED_LISTENERS"])
    assert set(listeners) == set(advertised) == {"INTERNAL", "EXTERNAL"}
    assert advertised["INTERNAL"] == "kcoord:" + listeners["INTERNAL"].rsplit(":", 1)[1]
    assert advertised["EXTERNAL"] == "localhost:${KCOORD_PORT:-9092}"
    assert listeners["EXTERNAL"].endswith(":9092")
    assert "127.0.0.1:${KCOORD_PORT:-9092}:9092" in kcoord["ports"]  # the host's loopback only
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] == "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
    health = kcoord["healthcheck"]["test"]
    assert health[0] == "CMD" and "kcoord.server.healthcheck" in health  # a real ApiVersions


def test_sidecar_and_compactor_share_the_volume():
    c = compose()
    kcoord, sidecar, compactor = (c["services"][n] for n in ("kcoord", "sidecar", "compactor"))
    target = kcoord["volumes"][0].split(":")[1]
    # The sidecar runs with the server (no profile), on the same log directory.
    assert sidecar["volumes"][0] == kcoord["volumes"][0] and "profiles" not in sidecar
    assert sidecar["entrypoint"] == ["kcoord"] and sidecar["command"][0] == "sidecar"
    assert _env(sidecar)["KAFKA_LOG_DIRS"] == target
    assert sidecar["depends_on"]["kcoord"]["condition"] == "service_healthy"
    # The one-off pass is a tool, in place on the same volume.
    assert compactor["volumes"][0] == kcoord["volumes"][0]
    assert "tools" in compactor["profiles"]
    assert compactor["command"][:2] == [target, "--in-place"]


def test_build_targets_exist_in_the_dockerfile():
    stages = set(re.findall(r"^FROM \S+ AS (\S+)", (ROOT / "Dockerfile").read_text(), re.M))
    built = {name: svc for name, svc in compose()["services"].items() if "build" in svc}
    assert set(built) == {"kcoord", "sidecar", "compactor", "demo-producer", "demo-consumer-python"}
    for name, service in built.items():
        assert service["build"]["target"] in stages, name


def test_make_up_and_down_and_readme():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^up:\n\t\$\(COMPOSE\) up -d --build kcoord sidecar$", makefile, re.M)
    assert re.search(r"^down:\n\t\$\(COMPOSE\) down", makefile, re.M)
    readme = (ROOT / "README.md").read_text()
    assert readme.splitlines()[3].startswith("make run") and readme.splitlines()[4].startswith("make test")
    assert "make up" in readme and "make run" in readme


def test_demo_clients_join_one_group_on_the_server():
    services = compose()["services"]
    internal = _endpoints(_env(services["kcoord"])["KAFKA_ADVERTISED_LISTENERS"])["INTERNAL"]
    demos = {name: svc for name, svc in services.items() if "demo" in svc.get("profiles", [])}
    assert set(demos) == {"demo-producer", "demo-consumer-python", "demo-consumer-java"}
    for name, svc in demos.items():
        assert svc["depends_on"]["kcoord"]["condition"] == "service_healthy", name
        command = " ".join(svc["command"])
        assert internal in command or _env(svc).get("KAFKA_BOOTSTRAP") == internal, name
    consumers = [" ".join(demos[n]["command"]) for n in ("demo-consumer-python", "demo-consumer-java")]
    assert all("demo demo-group" in c for c in consumers)  # the same topic and group
    assert (ROOT / demos["demo-consumer-java"]["volumes"][0].split(":")[0]).is_dir()


def test_sasl_ssl_variant_secures_both_listeners():
    variant = yaml.safe_load((ROOT / "docker-compose.sasl-ssl.yml").read_text())["services"]["kcoord"]
    env = _env(variant)
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] == "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL"
    for listener in ("INTERNAL", "EXTERNAL"):
        assert "PlainLoginModule" in env[f"KAFKA_LISTENER_NAME_{listener}_PLAIN_SASL_JAAS_CONFIG"]
    assert "--tls" in variant["healthcheck"]["test"]
