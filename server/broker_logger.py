"""The BROKER_LOGGER config resource (KIP-412): the server's loggers and their levels, read
with DescribeConfigs and changed at run time with IncrementalAlterConfigs (SET a level, DELETE
to inherit the parent's again). Python's logging stands in for log4j; levels keep log4j's
names. Like Kafka, changes are not kept across a restart.
"""
from __future__ import annotations

import logging
from typing import Any

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.config_catalogue import ConfigSource, ConfigType

ROOT = "root"
TRACE = 5
logging.addLevelName(TRACE, "TRACE")

# log4j level name -> Python level; VALID is what a SET may name (Kafka's LogLevelConfig).
LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
          "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}
VALID_TEXT = ", ".join(sorted(LEVELS))
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3


def level_name(level: int) -> str:
    """A Python level in log4j's words (the nearest named level at or below it)."""
    best = "TRACE"
    for name, value in sorted(LEVELS.items(), key=lambda kv: kv[1]):
        if level >= value:
            best = name
    return best


def _logger(name: str) -> logging.Logger | None:
    if name == ROOT:
        return logging.getLogger()
    found = logging.root.manager.loggerDict.get(name)
    return found if isinstance(found, logging.Logger) else None


def loggers() -> dict[str, str]:
    """Every existing logger and its effective level (Log4jController.loggers)."""
    out = {ROOT: level_name(logging.getLogger().level)}
    for name, lg in list(logging.root.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger):
            out[name] = level_name(lg.getEffectiveLevel())
    return out


def entries() -> list[Any]:
    from kcoord.server.config_layers import Entry

    return [Entry(name, level, ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, False, False, ConfigType.UNKNOWN,
                  None, ()) for name, level in sorted(loggers().items())]


def _invalid_request(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def check(node_id: int, resource_name: str, configs: list[Any]) -> None:
    """RuntimeLoggerManager's validation; KafkaError on the first problem."""
    try:
        requested = int(resource_name)
    except ValueError:
        raise _invalid_request(f"Node id must be an integer, but it is: {resource_name}") from None
    if requested != node_id:
        raise _invalid_request(f"Unexpected node id. Expected {node_id}, but received {requested}")
    for c in configs:
        op = c.config_operation
        if op in (_SET, _DELETE) and _logger(c.name) is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {c.name} does not exist!")
        if op == _SET:
            if c.value not in LEVELS:
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Cannot set the log level of {c.name} to {c.value} as it is not a supported "
                                 f"log level. Valid log levels are {VALID_TEXT}")
        elif op == _DELETE:
            if c.name == ROOT:
                raise _invalid_request(f"Removing the log level of the {ROOT} logger is not allowed")
        elif op in (_APPEND, _SUBTRACT):
            verb = "APPEND" if op == _APPEND else "SUBTRACT"
            raise _invalid_request(f"{verb} operation is not allowed for the BROKER_LOGGER resource")
        else:
            raise _invalid_request(f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource")


def apply(configs: list[Any]) -> None:
    """Set or unset the levels (checked by `check` first)."""
    log = logging.getLogger("kcoord.configs")
    for c in configs:
        lg = _logger(c.name)
        if lg is None:
            continue
        if c.config_operation == _SET:
            lg.setLevel(LEVELS[c.value])
            log.warning("Updated the log level of %s to %s", c.name, c.value)
        else:
            lg.setLevel(logging.NOTSET)
            log.warning("Unset the log level of %s", c.name)
