"""librdkafka's test suite against kcoord: what the suite holds, what one run said, and the table.

Pure functions, no processes (scripts/rdkafka_suite.py runs things):
- `catalog(test_c)`: every test of librdkafka's tests/test.c `tests[]` array with its flags and
  scenario;
- `parse_output(text)`: per test, what one test-runner process printed (state, seconds, the
  first failure with its source line);
- `build_table(...)`, `render_markdown(...)`, `compare(...)`: the table, its docs/compatibility.md section and
  the CI verdict (a test that passed in the committed table and failed twice in a row).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

# ---- the suite's catalogue (tests/test.c) ----


@dataclass(frozen=True)
class SuiteTest:
    name: str           # "0045_subscribe_update_topic_remove"
    flags: str          # the C flags expression, e.g. "TEST_F_LOCAL", "0"
    scenario: str       # "default", "noautocreate", "default,ak23"

    @property
    def id(self) -> str:
        return self.name.split("_", 1)[0]

    @property
    def local(self) -> bool:
        """Needs no broker (test-runner -L leaves these out)."""
        return "TEST_F_LOCAL" in self.flags

    @property
    def manual(self) -> bool:
        return "TEST_F_MANUAL" in self.flags

    @property
    def known_issue(self) -> bool:
        """librdkafka marks it a known issue on this platform (test-runner -K leaves it out)."""
        return re.search(r"\bTEST_F_KNOWN_ISSUE\b", self.flags) is not None

    @property
    def run_scenario(self) -> str:
        """The scenario to run it under: the first one it names (test-runner matches by substring)."""
        return self.scenario.split(",")[0]


def _strip_c_comments(src: str) -> str:
    """C source without its comments; string literals (which may hold "//") are kept."""
    return re.sub(r'("(?:\\.|[^"\\])*")|/\*.*?\*/|//[^\n]*',
                  lambda m: m.group(1) or " ", src, flags=re.S)


def _call_args(src: str, open_paren: int) -> tuple[list[str], int]:
    """The top-level comma-separated arguments of the call whose '(' is at open_paren."""
    depth, args, cur, i = 0, [], [], open_paren
    while i < len(src):
        c = src[i]
        if c == '"':
            j = src.index('"', i + 1)
            cur.append(src[i:j + 1])
            i = j + 1
            continue
        if c == "(":
            depth += 1
            if depth > 1:
                cur.append(c)
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i + 1
            cur.append(c)
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    raise ValueError("unbalanced _TEST( in tests[]")


def catalog(test_c: str) -> list[SuiteTest]:
    """Every `_TEST(NAME, FLAGS, ...)` entry of test.c's `struct test tests[]`, in order."""
    start = test_c.index("struct test tests[] = {")
    end = test_c.index("{NULL}}", start)
    body = _strip_c_comments(test_c[start:end])
    out = []
    for m in re.finditer(r"\b_TEST\(", body):
        args, _ = _call_args(body, m.end() - 1)
        scenario = "default"
        for a in args[2:]:
            sm = re.fullmatch(r'\.scenario\s*=\s*"([^"]*)"', a)
            if sm:
                scenario = sm.group(1)
        out.append(SuiteTest(name=args[0], flags=args[1], scenario=scenario))
    if not out:
        raise ValueError("no _TEST entries found in tests[]")
    return out


# ---- one test-runner process's output ----

ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RUNNING = re.compile(r"={5,} Running test (\S+) ={5,}")
_FINAL = re.compile(r"={5,} Test (\S+) (PASSED|FAILED|SKIPPED) ={5,}")
_FAIL = re.compile(r'### Test "([^"]+?)(?: \((.*)\))?" failed at ([^:]+):(\d+):([^(]*)\(\) at [^#]*###\n(.*)')
_SUMMARY = re.compile(r"^\|\s*(\S+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|NOT_STARTED|DNS)\s*\|\s*([\d.]+)s\s*\|\s?(.*)$")
_SKIPPING = re.compile(r"\[(\S+)\s*/\s*[\d.]+s\] SKIPPING TEST: (.*)")


@dataclass
class Outcome:
    """What the runner said about one test in one process."""
    state: str = "not run"          # passed | failed | skipped | timeout | not run
    seconds: float | None = None
    failure: str = ""               # "0045-subscribe_update.c:123: message" or the skip reason
    subtest: str = ""


def parse_output(text: str) -> dict[str, Outcome]:
    """Per test name: the state test-runner reported (the summary table when the process got
    that far, else the per-test banners), and the first failure with its source line."""
    text = ANSI.sub("", text)
    out: dict[str, Outcome] = {}

    def get(name: str) -> Outcome:
        return out.setdefault(name, Outcome())

    for m in _RUNNING.finditer(text):
        get(m.group(1)).state = "timeout"      # started; a final banner below overrides this
    for m in _FAIL.finditer(text):
        o = get(m.group(1))
        o.state = "failed"
        if not o.failure:
            o.failure = f"{m.group(3)}:{m.group(4)}: {m.group(6).strip()}"
            o.subtest = m.group(2) or ""
    for m in _FINAL.finditer(text):
        get(m.group(1)).state = m.group(2).lower()
    for m in _SKIPPING.finditer(text):
        o = out.get(m.group(1))
        if o is not None and not o.failure:
            o.failure = m.group(2).strip()
    for line in text.splitlines():
        m = _SUMMARY.match(line.strip())
        if not m:
            continue
        o = get(m.group(1))
        o.seconds = float(m.group(3))
        state = m.group(2)
        if state in ("PASSED", "FAILED", "SKIPPED"):
            o.state = state.lower()
        elif state == "RUNNING":
            o.state = "timeout"
        if not o.failure and state in ("FAILED", "SKIPPED") and m.group(4).strip():
            o.failure = m.group(4).strip()
    return out


def apply_report(out: dict[str, Outcome], report: dict) -> None:
    """States and durations from test-runner's TEST_REPORT file, which it writes (and closes)
    before checking for leaked threads: its stdout summary is lost when that check aborts."""
    for name, t in report.get("tests", {}).items():
        state = t.get("state", "")
        if name == "<MAIN>":                    # its thread-leak check comes after the report
            continue
        if state in ("PASSED", "FAILED") or (state == "SKIPPED" and name in out):
            o = out.setdefault(name, Outcome())
            o.state = state.lower()
            if t.get("duration"):
                o.seconds = float(t["duration"])
        elif state == "RUNNING" and name in out:
            out[name].state = "timeout"


# ---- the table ----

RESULTS = ("passed", "failed", "skipped", "timeout", "not run")


@dataclass
class Row:
    id: str
    name: str
    scenario: str
    result: str                     # passed | flaky (failed, then passed on the rerun) | failed | ...
    seconds: float | None
    attempts: list[str] = field(default_factory=list)   # the state of each attempt
    failure: str = ""               # what the suite printed (file:line: message)
    reason: str = ""                # why, in kcoord's terms (tests/rdkafka/suite.toml)
    owner: str = ""                 # the issue/helper whose work it waits for, if any
    kafka_differs: str = ""         # evidence when the suite expects what Kafka would not do
    brokers: int = 1                # the nodes of the kcoord it ran against (3: a cluster)

    @property
    def passing(self) -> bool:
        return self.result in ("passed", "flaky")

    def to_json(self) -> dict:
        return asdict(self)


def row_result(attempts: list[Outcome]) -> str:
    states = [a.state for a in attempts]
    if states[0] == "passed":
        return "passed"
    if "passed" in states:
        return "flaky"
    return states[-1]


def compare(committed: dict[str, dict], rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """(regressions, newly passing): a regression passed in the committed table and did not
    pass in either attempt now; newly passing did not pass there and passes now."""
    regressions, newly = [], []
    for r in rows:
        before = committed.get(r.name)
        if before is None:
            if r.passing:
                newly.append(r)
            continue
        was = before["result"] in ("passed", "flaky")
        if was and not r.passing and r.result != "excluded":
            regressions.append(r)
        elif not was and r.passing:
            newly.append(r)
    return regressions, newly


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render_markdown(meta: dict, rows: list[Row], excluded: dict[str, str], notes: dict[str, str] | None = None) -> str:
    """The docs/compatibility.md section: the count, the three-broker tests' count, every test not
    passing with its reason, the passing tests with a note (suite.toml's [note]), the excluded."""
    ran = [r for r in rows]
    passing = [r for r in ran if r.passing]
    lines = [
        f"**{len(passing)} of {len(ran)}** of librdkafka {meta['librdkafka']}'s broker tests pass against kcoord "
        f"(`make rdkafka-suite`, {meta['date']}, group protocol `{meta['group_protocol']}`, "
        f"{meta['jobs']} test ids at a time, {meta['wall_seconds'] / 60:.0f} min on {meta['cores']} cores with the reruns; "
        f"{len(ran)} tests in {len({r.id for r in ran})} ids, {len(excluded)} excluded below).",
        "",
    ]
    cluster = [r for r in ran if r.brokers > 1]
    if cluster:
        nodes = max(r.brokers for r in cluster)
        lines += [f"The {len(cluster)} tests that need three brokers ({', '.join(sorted({r.id for r in cluster}))}) "
                  f"ran against a {nodes}-node kcoord cluster (`[cluster]` in `tests/rdkafka/suite.toml`): "
                  f"{sum(r.passing for r in cluster)} of {len(cluster)} pass.", ""]
    flaky = [r for r in ran if r.result == "flaky"]
    if flaky:
        lines += ["Passed on the rerun (failed first, then passed in a fresh runner process): "
                  + ", ".join(f"{r.name} ({_cell(r.failure) or 'no message'})" for r in flaky) + ".", ""]
    bad = [r for r in ran if not r.passing]
    if bad:
        lines += ["| test | result | seconds | why |", "|---|---|---|---|"]
        for r in bad:
            why = r.reason or f"not yet diagnosed: {r.failure}"
            if r.owner:
                why += f" (waits for: {r.owner})"
            if r.kafka_differs:
                why += f" **The suite expects what Kafka does not do:** {r.kafka_differs}"
            secs = "" if r.seconds is None else f"{r.seconds:.0f}"
            name = f"{r.name} ({r.brokers} nodes)" if r.brokers > 1 else r.name
            lines.append(f"| {name} | {r.result} | {secs} | {_cell(why)} |")
        lines.append("")
    noted = [(r, notes[r.name]) for r in ran if r.passing and notes and r.name in notes]
    if noted:
        lines += ["Passing, with a note:", ""]
        lines += [f"- {r.name}: {_cell(note)}" for r, note in noted]
        lines.append("")
    if excluded:
        lines += ["Not run (excluded in `tests/rdkafka/suite.toml`):", ""]
        lines += [f"- {name}: {why}" for name, why in excluded.items()]
    return "\n".join(lines).rstrip()


def render_full_table(rows: list[Row]) -> str:
    """Every test, one row each (the run's results.md)."""
    lines = ["| id | test | scenario | result | seconds | attempts | failure / reason |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        secs = "" if r.seconds is None else f"{r.seconds:.1f}"
        detail = r.reason or r.failure
        lines.append(f"| {r.id} | {r.name} | {r.scenario} | {r.result} | {secs} | {', '.join(r.attempts)} | {_cell(detail)} |")
    return "\n".join(lines)


def replace_section(text: str, start: str, end: str, body: str) -> str:
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(f"needs exactly one {start} ... {end} section")
    head, rest = text.split(start)
    _, tail = rest.split(end)
    return f"{head}{start}\n{body}\n{end}{tail}"
