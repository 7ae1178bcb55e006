"""Settings from the environment, named as the apache/kafka container image names them.

`KAFKA_<NAME>=value` sets `<name>`: the `KAFKA_` prefix is dropped, the rest lower-cased, then
`___` stands for `-`, `__` for `_` and `_` for `.` (KAFKA_LISTENER_SECURITY_PROTOCOL_MAP ->
listener.security.protocol.map, KAFKA_LISTENER_NAME_EXTERNAL_PLAIN_SASL_JAAS_CONFIG ->
listener.name.external.plain.sasl.jaas.config, KAFKA_A__B___C -> a_b-c). The variables that image keeps for the JVM and
its logging are not settings. As in that image, with KAFKA_ADVERTISED_LISTENERS given and
KAFKA_LISTENERS not, the server listens on every advertised port of every interface; CLUSTER_ID
names the cluster unless KAFKA_CLUSTER_ID does.

The environment is one layer of Config.load: a file's settings < the environment < --override.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

PREFIX = "KAFKA_"

# the image's variables that are not broker settings (its JVM, GC, JMX and log4j options)
NOT_SETTINGS = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME",
})

_HOST = re.compile(r"://[^:]*:")


def setting_name(variable: str) -> str:
    """KAFKA_LOG_DIRS -> log.dirs; `__` -> `_`, `___` -> `-`."""
    rest = variable[len(PREFIX):].lower().replace("_", ".")
    return rest.replace("...", "-").replace("..", "_")


def env_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings the environment gives, by Kafka name."""
    out = {setting_name(k): v for k, v in environ.items()
           if k.startswith(PREFIX) and len(k) > len(PREFIX) and k not in NOT_SETTINGS}
    if "advertised.listeners" in out and "listeners" not in out:
        out["listeners"] = _HOST.sub("://0.0.0.0:", out["advertised.listeners"])
    if environ.get("CLUSTER_ID") and "cluster.id" not in out:
        out["cluster.id"] = environ["CLUSTER_ID"]
    return out
