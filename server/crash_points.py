"""Named points where a crash-consistency test can stop the server dead.

`KCOORD_CRASH_AT=<point>` in the environment makes the process SIGKILL itself the first time
it reaches that point (after logging it), so a test can interrupt a multi-step operation
between two persisted steps deterministically instead of racing a kill against it. Unset (the
default), a crash point costs one string comparison.

`KCOORD_STOP_AT=<point>` makes it SIGSTOP itself there instead (the first time, after logging
it): the process is frozen mid-operation, its connections open, until the test sends SIGCONT
(a coordinator that lost its ZooKeeper session while frozen comes back as a zombie, say).
"""
from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("kcoord.crash")

ENV = "KCOORD_CRASH_AT"
STOP_ENV = "KCOORD_STOP_AT"
_AT = os.environ.get(ENV, "")
_STOP_AT = os.environ.get(STOP_ENV, "")


def crash_point(name: str) -> None:
    global _STOP_AT
    if _STOP_AT and _STOP_AT == name:
        _STOP_AT = ""  # once
        log.warning("Stop point %s reached: stopping the process (%s)", name, STOP_ENV)
        for h in logging.getLogger().handlers:
            h.flush()
        os.kill(os.getpid(), signal.SIGSTOP)
        log.warning("Stop point %s: continued", name)
    if _AT and _AT == name:
        log.warning("Crash point %s reached: killing the process (%s)", name, ENV)
        for h in logging.getLogger().handlers:
            h.flush()
        os.kill(os.getpid(), signal.SIGKILL)
