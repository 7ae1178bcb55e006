"""The zip of the project the sidecar ships to Spark's executors holds the packages' data files
too: an executor that imports the project from it (as in the compactor's container, where no
source directory is on its path) reads protocol/schemas/*.json from it."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from kcoord.sidecar.pipeline import code_zip

ROOT = Path(__file__).resolve().parents[2]


def test_the_code_zip_holds_the_schemas_and_data_files(tmp_path):
    names = set(zipfile.ZipFile(code_zip(str(tmp_path))).namelist())
    schemas = {"kcoord/" + str(p.relative_to(ROOT)) for p in (ROOT / "protocol" / "schemas").glob("*.json")}
    assert schemas and schemas <= names
    data = {"kcoord/" + str(p.relative_to(ROOT)) for p in (ROOT / "server").glob("*.txt")}  # package data
    assert data <= names
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]


def test_the_offsets_codec_loads_from_the_zip_alone(tmp_path):
    path = code_zip(str(tmp_path))
    # -S -I: no site-packages and no project directory; the zip and the dependencies only
    deps = sorted({str(Path(m.__file__).parents[1]) for m in (__import__("kafka"),)})
    script = ("import sys; sys.path[:0] = sys.argv[1:]; import kcoord.protocol.consumer_group_codec as c; "
              "assert c.__file__.startswith(sys.argv[1]), c.__file__; print('ok')")
    r = subprocess.run([sys.executable, "-I", "-S", "-c", script, path, *deps], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "ok", r.stderr[-2000:]
