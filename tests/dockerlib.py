"""A Docker engine for the tests, kcoord's images built on it, and docker compose projects.

- Engine: the dockerd answering on the default socket, or one started here (and stopped by
  whoever started it) with its bridge and address pools in link-local space (169.254.0.0/16):
  no container ever has a private-range address, and without iptables rules published ports
  are served by docker-proxy on 127.0.0.1.
- build_images: the base images are root filesystems debootstrap made from Debian's packages
  (scripts/setup-docker.sh, cached in .cache/docker); the project's wheels and its
  dependencies' are built on the host and installed inside the build, which has no network.
  ZooKeeper's image (docker/zookeeper) is built on its own base, Debian's ZooKeeper in it.
  Built once per test process: the test modules share the images.
- Compose: `docker compose` (the CLI plugin) where the machine has it, else Debian's
  docker-compose (v1.29), on a project name of its own.
"""
from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK_LOCAL = ipaddress.ip_network("169.254.0.0/16")
# the client Debian ships with its engine where present (the same API version), else any
DOCKER = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else (shutil.which("docker") or "docker")
DOCKERD_ARGS = ["--bip", "169.254.200.1/24", "--default-address-pool", "base=169.254.0.0/16,size=24",
                "--iptables=false"]
# what the images are made of: the project's source (the .dockerignore of the repository)
CONTEXT = ["pyproject.toml", "README.md", "Dockerfile", ".dockerignore", "protocol", "server", "storage",
           "sidecar", "kcoord", "examples/python"]
IMAGES = {"kcoord": "kcoord:latest", "demo-python": "kcoord-demo-python:latest",
          "compactor": "kcoord-compactor:latest"}
ZOOKEEPER_IMAGE = "kcoord-zookeeper:latest"
# the bases scripts/setup-docker.sh makes (rerun when its listing lacks one)
BASES = ("kcoord-base", "kcoord-jre-base", "kcoord-zookeeper-base")


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def wait_for(cond, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


class Unavailable(Exception):
    """No Docker engine can run here (the reason is the message)."""


def engine_for_tests(workdir: Path) -> Engine:
    """The engine a test module uses: skipped where none can run, a failure under CI; its
    default bridge checked to be link-local."""
    import pytest

    try:
        eng = Engine.ensure(workdir)
    except Unavailable as e:
        if os.environ.get("CI"):
            raise AssertionError(f"CI must run the Docker tests: {e}") from None
        pytest.skip(f"no Docker engine here: {e}")
    # nothing in a private range: the default bridge is link-local
    assert all(n.subnet_of(LINK_LOCAL) for n in subnets("bridge")), subnets("bridge")
    return eng


@dataclass
class Engine:
    proc: subprocess.Popen | None = None  # the dockerd this process started, if it did
    log: Path | None = None

    @staticmethod
    def answers() -> bool:
        try:
            return docker("info", "--format", "{{.ServerVersion}}", timeout=20, check=False).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    @classmethod
    def ensure(cls, workdir: Path) -> Engine:
        if cls.answers():
            return cls()
        dockerd = shutil.which("dockerd")
        if dockerd is None or not os.path.exists(DOCKER) and shutil.which("docker") is None:
            raise Unavailable("no Docker engine installed (scripts/setup-docker.sh installs Debian's docker.io)")
        if os.geteuid() != 0:
            raise Unavailable("dockerd needs root")
        workdir.mkdir(parents=True, exist_ok=True)
        log = workdir / "dockerd.log"
        proc = subprocess.Popen([dockerd, *DOCKERD_ARGS, "--pidfile", str(workdir / "dockerd.pid")],
                                stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
        engine = cls(proc, log)
        deadline = time.monotonic() + 90
        while not cls.answers():
            if proc.poll() is not None or time.monotonic() > deadline:
                engine.stop()
                raise Unavailable(f"dockerd did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        return engine

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


def subnets(network: str) -> list[ipaddress.IPv4Network]:
    info = json.loads(docker("network", "inspect", network).stdout)[0]
    return [ipaddress.ip_network(c["Subnet"]) for c in info["IPAM"]["Config"] or [] if "." in c.get("Subnet", "")]


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def image_size(tag: str) -> int:
    return int(docker("image", "inspect", "-f", "{{.Size}}", tag).stdout)


@dataclass
class Built:
    bases: dict[str, str]  # base name -> image tag
    sizes: dict[str, int] = field(default_factory=dict)  # image tag -> bytes
    seconds: dict[str, float] = field(default_factory=dict)  # step -> seconds

    def report(self) -> str:
        sizes = ", ".join(f"{tag} {size / 1e6:.0f} MB" for tag, size in self.sizes.items())
        steps = ", ".join(f"{step} {s:.1f} s" for step, s in self.seconds.items())
        return f"images: {sizes}\nbuilt in: {steps}"


def bases() -> dict[str, str]:
    """name -> tarball, from scripts/setup-docker.sh (run here when it has not been)."""
    listing = ROOT / ".cache" / "docker" / "bases"

    def read() -> dict[str, str]:
        if not listing.exists():
            return {}
        return dict(line.split(" ", 1) for line in listing.read_text().splitlines() if line.strip())

    if not set(BASES) <= read().keys():
        subprocess.run(["bash", str(ROOT / "scripts" / "setup-docker.sh")], check=True, timeout=1200)
    return read()


_built: Built | None = None  # this process's images (the test modules share them)


def build_images(workdir: Path) -> Built:
    """kcoord, kcoord-demo-python, kcoord-compactor and kcoord-zookeeper, from the local bases,
    offline; once per process."""
    global _built
    if _built is not None and all(map(image_exists, [*IMAGES.values(), ZOOKEEPER_IMAGE])):
        return _built
    built = Built({})
    t = time.monotonic()
    for name, tarball in bases().items():
        tag = f"{name}:{Path(tarball).stem.rsplit('-', 1)[1]}"  # the key of its package list
        if not image_exists(tag):
            docker("import", str(ROOT / tarball), tag, timeout=600)
        built.bases[name] = tag
    built.seconds["import bases"] = time.monotonic() - t
    t = time.monotonic()
    context = workdir / "context"
    shutil.rmtree(context, ignore_errors=True)
    for item in CONTEXT:
        src, dst = ROOT / item, context / item
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dst)
    # the wheels of the project and of every dependency, for the base's Python (Debian's, as the host's)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(context / "wheels"), ".[spark]",
                    "setuptools", "confluent-kafka"], cwd=ROOT, check=True, timeout=1200,
                   capture_output=True)
    built.seconds["wheels"] = time.monotonic() - t
    args = ["--build-arg", f"BASE={built.bases['kcoord-base']}",
            "--build-arg", f"COMPACTOR_BASE={built.bases['kcoord-jre-base']}",
            "--build-arg", "PIP_NO_INDEX=1", "--build-arg", "PIP_FIND_LINKS=/src/wheels"]
    for target, tag in IMAGES.items():
        t = time.monotonic()
        docker("build", "--network", "none", "--target", target, "-t", tag, *args, str(context), timeout=1800)
        built.seconds[f"build {target}"] = time.monotonic() - t
        built.sizes[tag] = image_size(tag)
    t = time.monotonic()
    docker("build", "--network", "none", "-t", ZOOKEEPER_IMAGE, "--build-arg",
           f"BASE={built.bases['kcoord-zookeeper-base']}", str(ROOT / "docker" / "zookeeper"), timeout=600)
    built.seconds["build zookeeper"] = time.monotonic() - t
    built.sizes[ZOOKEEPER_IMAGE] = image_size(ZOOKEEPER_IMAGE)
    shutil.rmtree(context / "wheels", ignore_errors=True)
    # the images these tags named before, and the build stages: no pile-up over reruns
    docker("image", "prune", "-f", timeout=300, check=False)
    _built = built
    return built


class Compose:
    """One compose project (its own name, so its containers, network and volume are its own)."""

    def __init__(self, project: str, files: list[Path], env: dict[str, str]) -> None:
        plugin = docker("compose", "version", check=False).returncode == 0
        if plugin:
            self.cmd = [DOCKER, "compose"]
        elif shutil.which("docker-compose"):
            self.cmd = ["docker-compose"]
        else:
            raise Unavailable("neither `docker compose` nor docker-compose is installed")
        self.cmd += ["-p", project, "--project-directory", str(ROOT)]
        for f in files:
            self.cmd += ["-f", str(f)]
        self.project = project
        self.env = {**os.environ, **env}

    def __call__(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        r = subprocess.run([*self.cmd, *args], capture_output=True, text=True, timeout=timeout, env=self.env,
                           stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"compose {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r

    def container(self, service: str) -> str:
        return self("ps", "-q", service).stdout.strip()

    def health(self, service: str) -> str:
        cid = self.container(service)
        if not cid:
            return "absent"
        return docker("inspect", "-f", "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}",
                      cid).stdout.strip()

    def wait_healthy(self, service: str, timeout: float = 120) -> None:
        try:
            wait_for(lambda: self.health(service) == "healthy", timeout, f"{service} healthy", interval=0.5)
        except AssertionError as e:
            raise AssertionError(f"{e} (last: {self.health(service)})\n{self.logs(service)[-3000:]}") from None

    def logs(self, service: str) -> str:
        return self("logs", "--no-color", service, check=False).stdout

    def network(self) -> str:
        return f"{self.project}_default"
