"""README.md is a front page and docs/ holds the rest: every relative link in README.md and
docs/*.md resolves (the file exists; a #fragment names a heading of the target, by GitHub's
anchor rules), and the README stays short and opens with the two commands a newcomer runs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Pages other work adds beside these (linked from the index before they land).
PENDING = {"docs/quotas.md", "docs/docker.md", "docs/durability.md"}

_FENCE = re.compile(r"^(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and [text](target "title"), not images' sources inside code spans
_LINK = re.compile(r"(?<!\\)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")


def prose(text: str) -> list[str]:
    """The page's lines outside fenced code blocks, inline code spans blanked."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text lower-cased, markup and punctuation other than
    hyphens, underscores and spaces dropped, each space made a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a page (GitHub numbers repeated ones: -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text().splitlines():
        if _FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[tuple[int, str]]:
    found = []
    for lineno, line in enumerate(prose(path.read_text()), 1):
        found += [(lineno, m.group(1)) for m in _LINK.finditer(line)]
        m = _REFERENCE.match(line)
        if m:
            found.append((lineno, m.group(1)))
    return found


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """`page:line: target: why` for each relative link of `page` that does not resolve."""
    problems = []
    for lineno, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        dest = page if not file_part else (page.parent / file_part).resolve()
        rel = dest.relative_to(root).as_posix() if dest.is_relative_to(root) else str(dest)
        where = f"{page.relative_to(root)}:{lineno}: {target}"
        if not dest.exists():
            if rel not in PENDING:
                problems.append(f"{where}: {rel} does not exist")
            continue
        if fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            problems.append(f"{where}: no heading #{fragment} in {rel}")
    return problems


def test_the_link_scanner_sees_links_and_anchors():
    """The checks below could fail: the scanner finds the README's links into docs/ and reads
    GitHub's anchors the way GitHub makes them."""
    targets = [t for _, t in links(ROOT / "README.md")]
    assert "docs/architecture.md" in targets and len(targets) > 15
    assert slug("The node: `server/broker.py`") == "the-node-serverbrokerpy"
    assert slug("Transactions v2 (KIP-890 part 2)") == "transactions-v2-kip-890-part-2"
    assert slug("kcoord's own tests") == "kcoords-own-tests"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path):
    assert not broken(page), "\n".join(broken(page))


def test_a_broken_link_is_reported(tmp_path: Path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading: yes\n")
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [bad anchor](#nothing)\n"
                    "[there](other.md#a-code-heading-yes) [not there](other.md#b)\n"
                    "```\n[in code](ignored.md)\n```\n`[in a span](ignored.md)` [web](https://example.com/x)\n")
    assert broken(page, tmp_path) == [
        "page.md:3: missing.md: missing.md does not exist",
        "page.md:3: #nothing: no heading #nothing in page.md",
        "page.md:4: other.md#b: no heading #b in other.md",
    ]


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the detail to docs/"
    opening = "\n".join(lines[:20])
    assert "make run" in opening and "make test" in opening


def test_every_docs_page_is_in_the_readme_index():
    readme = (ROOT / "README.md").read_text()
    pages = {p.relative_to(ROOT).as_posix() for p in PAGES[1:]} | PENDING
    assert not [p for p in sorted(pages) if f"]({p})" not in readme]
