"""Run every bench/bench_*.py and write bench/REPORT.md: each benchmark's table (figures beside
the ceiling measured in the same run, with the ratio), the machine it ran on and the date."""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOISE = ("WARN", "log4j", "Setting default log level", "setLogLevel", "NativeCodeLoader",
         "incubator", "SLF4J")


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f", {kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} cores ({cpu}){mem}, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def main() -> int:
    # the soak runs for half an hour on its own (python bench/bench_soak.py): not part of the report
    benches = sorted(b for b in HERE.glob("bench_*.py") if b.name != "bench_soak.py")
    sections = []
    failed = 0
    for b in benches:
        print(f"== {b.name}", flush=True)
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, str(b)], cwd=HERE.parent, capture_output=True, text=True, timeout=1800)
        out = "\n".join(ln for ln in (r.stdout + r.stderr).splitlines()
                        if ln.strip() and not any(n in ln for n in NOISE))
        print(out, flush=True)
        status = "" if r.returncode == 0 else f" — FAILED (exit {r.returncode})"
        failed += r.returncode != 0
        sections.append(f"## {b.name}{status}\n\n{(b.read_text().split(chr(34) * 3)[1]).strip()}\n\n"
                        f"```\n{out}\n```\n\n_{time.monotonic() - t0:.0f} s_\n")
    report = (f"# kcoord benchmark report\n\n- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
              f"- machine: {machine()}\n- command: `make bench` (bench/report.py)\n\n"
              "Each table puts kcoord's figure beside a ceiling measured in the same run on the same "
              "machine; shared machines are noisy, so the throughput benchmarks alternate the two "
              "and show every sample.\n\n" + "\n".join(sections))
    (HERE / "REPORT.md").write_text(report)
    print(f"wrote {HERE / 'REPORT.md'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
