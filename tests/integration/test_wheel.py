"""The distribution as a user gets it: the wheel built from this checkout, installed into a
fresh virtual environment outside it, runs `kcoord serve`, `kcoord ctl` and a pytest project
that uses the plugin, and installs one import package, kcoord (no top-level `server`,
`protocol`, `storage` or `sidecar` to shadow a project's own)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _clean_env() -> dict[str, str]:
    """Nothing of the checkout or of this test run's environment leaks into the venv's runs."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PYTEST", "VIRTUAL_ENV", "KCOORD"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(ROOT)))
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                  "-w", str(work / "dist"), str(ROOT)], cwd=work)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (work / "dist").glob("kcoord-*.whl")
    env_dir = work / "venv"
    made = _run([sys.executable, "-m", "venv", str(env_dir)], cwd=work)
    assert made.returncode == 0, made.stderr[-3000:]
    pip = [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    installed = _run([*pip, str(wheel), "pytest"], cwd=work, env=_clean_env(), timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return env_dir


def test_the_wheel_holds_one_import_package(venv: Path, tmp_path: Path) -> None:
    py = str(venv / "bin" / "python")
    probe = ("import importlib.util as u; import kcoord.server.app, kcoord.testing.plugin; "
             "print(sorted(n for n in ('server', 'protocol', 'storage', 'sidecar', 'kcoord_testing') "
             "if u.find_spec(n) is not None)); "
             "print(kcoord.server.app.__file__); "
             "import importlib.resources as r; "
             "print(r.files('kcoord.protocol.schemas').joinpath('ShareFetchRequest.json').is_file())")
    r = _run([py, "-c", probe], cwd=tmp_path, env=_clean_env())
    assert r.returncode == 0, r.stderr[-3000:]
    shadowing, where, schemas = r.stdout.split("\n")[:3]
    assert shadowing == "[]"  # `import server` fails here
    assert where.startswith(str(venv)) and "site-packages/kcoord/server/" in where
    assert schemas == "True"  # package data came along


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_kcoord_serve_and_ctl_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    port, control = _free_port(), _free_port()
    bin_dir = venv / "bin"
    proc = subprocess.Popen(
        [str(bin_dir / "kcoord"), "serve", "--override", f"log.dirs={tmp_path / 'data'}",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"kcoord.control.listener=127.0.0.1:{control}"],
        cwd=tmp_path, env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            status = _run([str(bin_dir / "kcoord"), "ctl", "--url", f"http://127.0.0.1:{control}", "status"],
                          cwd=tmp_path, env=_clean_env(), timeout=60)
            if status.returncode == 0:
                break
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, status.stderr[-2000:]
            time.sleep(0.2)
        probe = ("import sys; from kafka import KafkaAdminClient as A; "
                 f"a = A(bootstrap_servers='127.0.0.1:{port}'); print(len(a.describe_cluster()['brokers'])); a.close()")
        r = _run([str(bin_dir / "python"), "-c", probe], cwd=tmp_path, env=_clean_env(), timeout=120)
        assert r.returncode == 0 and r.stdout.strip() == "1", r.stderr[-3000:]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_pytest_project_uses_the_plugin_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_app.py").write_text(textwrap.dedent("""
        from kafka import KafkaConsumer, KafkaProducer

        def test_round_trip(kcoord):
            producer = KafkaProducer(bootstrap_servers=kcoord.bootstrap)
            producer.send("orders", b"one").get(timeout=60)
            producer.close()
            consumer = KafkaConsumer("orders", bootstrap_servers=kcoord.bootstrap, group_id="app",
                                     auto_offset_reset="earliest", consumer_timeout_ms=30000)
            assert [m.value for m in consumer][:1] == [b"one"]
            consumer.close()
    """))
    r = _run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"],
             cwd=project, env=_clean_env(), timeout=600)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
