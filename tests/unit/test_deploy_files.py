"""docker-compose.yml, the Dockerfile, the Makefile and the README agree (no Docker engine
runs here, so the files are checked, not run)."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _override(command: list[str], name: str) -> str:
    values = [command[i + 1].split("=", 1)[1] for i, arg in enumerate(command[:-1])
              if arg == "--override" and command[i + 1].startswith(name + "=")]
    assert len(values) == 1, (name, command)
    return values[0]


def test_server_service_volume_port_and_health():
    c = compose()
    kcoord = c["services"]["kcoord"]
    volume, target = kcoord["volumes"][0].split(":")
    assert volume in c["volumes"]
    assert _override(kcoord["command"], "log.dirs") == target  # the data lives on the volume
    listener_port = _override(kcoord["command"], "listeners").rsplit(":", 1)[1]
    assert f"{listener_port}:{listener_port}" in kcoord["ports"]
    assert listener_port == "9092"  # what README and `make run` promise
    assert _override(kcoord["command"], "advertised.listeners").endswith(":9092")
    health = kcoord["healthcheck"]["test"]
    assert health[0] == "CMD" and "9092" in " ".join(health)


def test_sidecar_and_compactor_share_the_volume():
    c = compose()
    kcoord, sidecar, compactor = (c["services"][n] for n in ("kcoord", "sidecar", "compactor"))
    target = kcoord["volumes"][0].split(":")[1]
    # The sidecar runs with the server (no profile), on the same log directory.
    assert sidecar["volumes"][0] == kcoord["volumes"][0] and "profiles" not in sidecar
    assert sidecar["entrypoint"] == ["kcoord"] and sidecar["command"][0] == "sidecar"
    assert _override(sidecar["command"], "log.dirs") == target
    assert sidecar["depends_on"]["kcoord"]["condition"] == "service_healthy"
    # The one-off pass is a tool, in place on the same volume.
    assert compactor["volumes"][0] == kcoord["volumes"][0]
    assert "tools" in compactor["profiles"]
    assert compactor["command"][:2] == [target, "--in-place"]


def test_build_targets_exist_in_the_dockerfile():
    stages = set(re.findall(r"^FROM \S+ AS (\S+)", (ROOT / "Dockerfile").read_text(), re.M))
    built = {name: svc for name, svc in compose()["services"].items() if "build" in svc}
    assert set(built) == {"kcoord", "sidecar", "compactor"}
    for name, service in built.items():
        assert service["build"]["target"] in stages, name


def test_make_up_and_down_and_readme():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^up:\n\tdocker compose up -d --build kcoord sidecar$", makefile, re.M)
    assert re.search(r"^down:\n\tdocker compose down", makefile, re.M)
    readme = (ROOT / "README.md").read_text()
    assert readme.splitlines()[3].startswith("make run") and readme.splitlines()[4].startswith("make test")
    assert "make up" in readme and "make run" in readme


def test_demo_clients_join_one_group_on_the_server():
    services = compose()["services"]
    demos = {name: svc for name, svc in services.items() if "demo" in svc.get("profiles", [])}
    assert set(demos) == {"demo-producer", "demo-consumer-python", "demo-consumer-java"}
    for name, svc in demos.items():
        assert svc["depends_on"]["kcoord"]["condition"] == "service_healthy", name
        command = " ".join(svc["command"])
        assert "kcoord:9092" in command or svc.get("environment", {}).get("KAFKA_BOOTSTRAP") == "kcoord:9092"
    consumers = [" ".join(demos[n]["command"]) for n in ("demo-consumer-python", "demo-consumer-java")]
    assert all("demo demo-group" in c for c in consumers)  # the same topic and group
    for name in ("demo-producer", "demo-consumer-python", "demo-consumer-java"):
        host_dir = demos[name]["volumes"][0].split(":")[0]
        assert (ROOT / host_dir).is_dir(), host_dir
