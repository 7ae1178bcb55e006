"""Named points where a crash-consistency test can stop the server dead.

`KCOORD_CRASH_AT=<point>` in the environment makes the process SIGKILL itself the first time
it reaches that point (after logging it), so a test can interrupt a multi-step operation
between two persisted steps deterministically instead of racing a kill against it. Unset (the
default), a crash point costs one string comparison.
"""
from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("kcoord.crash")

ENV = "KCOORD_CRASH_AT"
_AT = os.environ.get(ENV, "")


def crash_point(name: str) -> None:
    if _AT and _AT == name:
        log.warning("Crash point %s reached: killing the process (%s)", name, ENV)
        for h in logging.getLogger().handlers:
            h.flush()
        os.kill(os.getpid(), signal.SIGKILL)
