"""Every `@pytest.mark.compat(client, *features)` in the suite names a client and features the
matrix of docs/compatibility.md knows (scripts/compat_matrix.py), so `make compat` cannot stop on a marker
added later with a new name."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def matrix():
    spec = importlib.util.spec_from_file_location("compat_matrix", ROOT / "scripts" / "compat_matrix.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def markers() -> list[tuple[str, str, list[str]]]:
    """(file:line, client, features) of every compat marker under tests/."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "compat"
                    and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "mark"):
                args = [a.value for a in node.args if isinstance(a, ast.Constant)]
                assert len(args) == len(node.args) and args, f"{path}:{node.lineno}: compat takes literal strings"
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", args[0], args[1:]))
    return found


def test_every_compat_marker_names_a_known_client_and_features() -> None:
    m = matrix()
    clients = {c for c, _ in m.CLIENTS}
    found = markers()
    assert len(found) > 50  # the scan sees the suite's markers
    unknown = [(where, client, [f for f in features if f not in m.FEATURES])
               for where, client, features in found
               if client not in clients or any(f not in m.FEATURES for f in features)]
    assert not unknown, unknown


def test_every_not_tested_reason_is_for_a_known_cell() -> None:
    m = matrix()
    clients = {c for c, _ in m.CLIENTS}
    assert all(c in clients and f in m.FEATURES for c, f in m.NOT_TESTED_WHY), \
        [k for k in m.NOT_TESTED_WHY if k[0] not in clients or k[1] not in m.FEATURES]
