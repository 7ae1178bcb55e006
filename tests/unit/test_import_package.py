"""kcoord installs one import package, kcoord: nothing in the project imports its parts by the
top-level names of their folders (server, protocol, storage, sidecar), which would load a
second copy of a module and shadow a user's own packages of those names."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = re.compile(r"^\s*(from|import)\s+(server|protocol|storage|sidecar|kcoord_testing)\b", re.M)


def _sources() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in out.stdout.split() if not line.startswith("tests/compat/node/")]


def test_no_module_imports_a_part_by_its_folder_name() -> None:
    offenders = [f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
                 for p in _sources() for text in [p.read_text()] for m in TOP.finditer(text)]
    assert offenders == []


def test_the_server_loads_no_module_under_a_folder_name() -> None:
    probe = ("import sys, kcoord.server.app, kcoord.server.handlers.routes, kcoord.sidecar.compaction; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('server', 'protocol', 'storage', 'sidecar', 'kcoord_testing')))")
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"
