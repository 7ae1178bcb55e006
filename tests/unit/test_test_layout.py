"""pytest imports test modules by their basename (rootdir-relative, no __init__.py in tests/):
two test files with one name in different folders stop the whole run at collection ("import
file mismatch"), as two CI runs found. Every test file's name is unique across tests/."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_name_is_unique_across_the_test_folders():
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "node_modules" in path.parts:
            continue
        seen[path.name].append(str(path.relative_to(TESTS)))
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not twice, f"test files sharing a name: {twice}"
