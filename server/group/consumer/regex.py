"""Subscription regexes in RE2 syntax, as Kafka's RE2/J reads them (google-re2): linear-time
matching, no backreferences or lookaround; a topic matches when the whole name matches."""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered, not logged by RE2


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Any:
    """The compiled pattern; ValueError when it is not valid RE2."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as e:
        msg = e.args[0] if e.args else e
        raise ValueError(msg.decode(errors="replace") if isinstance(msg, bytes) else str(msg)) from None
