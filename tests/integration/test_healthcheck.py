"""The images' health check (server/healthcheck.py) against a real server: healthy only when
ApiVersions is answered, not when something merely accepts the connection."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading

import pytest

from kcoord.server.healthcheck import main

pytestmark = pytest.mark.integration


def test_healthy_when_the_server_answers_api_versions(kcoord):
    assert main([kcoord.bootstrap]) == 0
    r = subprocess.run([sys.executable, "-m", "kcoord.server.healthcheck", kcoord.bootstrap],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def test_unhealthy_when_a_listener_accepts_but_does_not_answer(capsys):
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]

        def accept_and_close() -> None:
            conn, _ = srv.accept()
            conn.recv(64)
            conn.close()

        t = threading.Thread(target=accept_and_close, daemon=True)
        t.start()
        assert main([f"127.0.0.1:{port}"]) == 1
        t.join(10)
    assert "unhealthy" in capsys.readouterr().err


def test_unhealthy_when_nothing_listens(capsys):
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
    assert main([f"127.0.0.1:{port}"]) == 1
