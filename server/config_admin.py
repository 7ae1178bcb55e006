"""What DescribeConfigs, AlterConfigs and IncrementalAlterConfigs do to a resource: TOPIC,
BROKER (this node's id, or "" for the cluster default), BROKER_LOGGER and GROUP (any group id,
server/group_configs.py), with Kafka's checks in
Kafka's order and its error codes and messages (ConfigHelper, ConfigAdminManager,
ControllerConfigurationValidator, ConfigurationControlManager).

An alteration is worked out in full first (`plan_*`: the resource's complete new config map,
or an error) and only then applied (`commit`): validate_only stops after the plan, and a
failed write changes nothing.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kcoord.protocol.errors import ErrorCode, KafkaError, error_code_of
from kcoord.server import broker_logger
from kcoord.server.config_catalogue import (
    TOPIC_CONFIGS,
    ConfigError,
    ConfigType,
    Dynamic,
    ResourceType,
    check_topic_configs,
)
from kcoord.server.config_layers import Entry, broker_config_key
from kcoord.server.data_plane import apply_configs_to_logs
from kcoord.server.topics import validate_topic_name

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.config_layers import BrokerConfigs
    from kcoord.server.group_configs import GroupConfigs
    from kcoord.server.topics import TopicRegistry
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.configs")

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


@dataclass(frozen=True, slots=True)
class Plan:
    """A resource's complete new dynamic config map, ready to commit."""
    type: ResourceType
    name: str
    configs: dict[str, str]



@dataclass(frozen=True, slots=True)
class ConfigState:
    """What describing and altering configs reads and changes: the node's configuration, the
    topic registry, the dynamic configs and the logs (which take a topic's new segment
    settings). The config handlers' area holds one (server/node.py)."""

    config: Config
    topics: TopicRegistry
    configs: BrokerConfigs
    logs: LogManager
    group_configs: GroupConfigs  # the GROUP config resource (server/group_configs.py)

class TopicsForConfigs:
    """The topics the config APIs see. On a cluster node (`cluster()` set) every topic of the
    cluster, with the configs /config/topics holds (the node's own registry object when it
    hosts the topic: its configs follow the same changes); else the node's registry. `.topics`
    and `save` are the registry's (what a commit changes is always the node's own)."""

    def __init__(self, registry: TopicRegistry, cluster: Any) -> None:
        self.registry = registry
        self.cluster = cluster

    def get(self, name: str) -> Any:
        node = self.cluster()
        if node is None:
            return self.registry.get(name)
        t = node.topic(name)
        if t is None:
            return None
        local = self.registry.get(name)
        if local is not None and local.topic_id == t.topic_id:
            return local
        from kcoord.protocol.topics import OFFSETS_TOPIC, TXN_TOPIC
        from kcoord.server.topics import Topic

        return Topic(name, t.topic_id, t.partitions, dict(node.cache.topic_configs.get(name, {})),
                     name in (OFFSETS_TOPIC, TXN_TOPIC))

    @property
    def topics(self) -> dict[str, Any]:
        return self.registry.topics

    def save(self) -> None:
        self.registry.save()


def cluster_change(plan: Plan) -> tuple[str, str] | None:
    """Where a plan goes on a cluster (server/cluster/config_changes.py): ("topics", T) or
    ("brokers", id | "<default>"); None for what stays on the node (GROUP)."""
    if plan.type == ResourceType.TOPIC:
        return "topics", plan.name
    if plan.type == ResourceType.BROKER:
        return "brokers", plan.name or "<default>"
    return None


def _invalid_request(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def _invalid_config(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, message)


# ---------------------------------------------------------------------------- describe


def describe(state: ConfigState, rtype: int, name: str, keys: list[str] | None, synonyms: bool,
             docs: bool) -> list[Entry]:
    """The configs of one resource (ConfigHelper.describeConfigs); KafkaError for an error."""
    layers = state.configs
    if rtype == ResourceType.TOPIC:
        validate_topic_name(name)
        topic = state.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        entries = [layers.topic_entry(topic, n, docs) for n in sorted(TOPIC_CONFIGS) if _wanted(n, keys)]
    elif rtype == ResourceType.BROKER:
        if not name:
            entries = [layers.broker_entry(n, False, docs) for n in sorted(layers.cluster) if _wanted(n, keys)]
        elif _broker_id(name, "Broker id must be an integer, but it is: ") == state.config.node_id:
            entries = [layers.broker_entry(n, True, docs) for n in layers.broker_names() if _wanted(n, keys)]
        else:
            raise _invalid_request(f"Unexpected broker id, expected {state.config.node_id} or empty string, "
                                   f"but received {name}")
    elif rtype == ResourceType.GROUP:
        if not name:
            raise _invalid_request("Group name must not be empty")
        entries = state.group_configs.entries(name, keys, docs)
    elif rtype == ResourceType.BROKER_LOGGER:
        if not name:
            raise _invalid_request("Broker id must not be empty")
        if _broker_id(name, "Broker id must be an integer, but it is: ") != state.config.node_id:
            raise _invalid_request(f"Unexpected broker id, expected {state.config.node_id} but received {name}")
        entries = [e for e in broker_logger.entries() if _wanted(e.name, keys)]
    else:
        raise _invalid_request(f"Unsupported resource type: {_type_name(rtype)}")
    return entries if synonyms else [_without_synonyms(e) for e in entries]


def _wanted(name: str, keys: list[str] | None) -> bool:
    return not keys or name in keys


def _without_synonyms(e: Entry) -> Entry:
    return Entry(e.name, e.value, e.source, e.read_only, e.sensitive, e.type, e.doc, ())


def _broker_id(name: str, complaint: str) -> int:
    try:
        return int(name)
    except ValueError:
        raise _invalid_request(complaint + name) from None


def _type_name(rtype: int) -> str:
    try:
        return ResourceType(rtype).name
    except ValueError:
        return "UNKNOWN"


# ---------------------------------------------------------------------------- planning


def duplicates(resources: list[Any]) -> set[int]:
    """Indexes of resources named more than once in one request (each is refused)."""
    seen: dict[tuple[int, str], list[int]] = {}
    for i, r in enumerate(resources):
        seen.setdefault((r.resource_type, r.resource_name), []).append(i)
    return {i for idx in seen.values() if len(idx) > 1 for i in idx}


DUPLICATE_RESOURCE = "Each resource must appear at most once."

# a resource's outcome in an AlterConfigs / IncrementalAlterConfigs answer: (error code, message)
Outcome = tuple[ErrorCode, "str | None"]
_APPLIED: Outcome = (ErrorCode.NONE, None)
_NAMED_TWICE: Outcome = (ErrorCode.INVALID_REQUEST, DUPLICATE_RESOURCE)


def _failed(e: KafkaError | OSError) -> Outcome:
    return error_code_of(e), getattr(e, "message", None) or str(e)


def each_resource(resources: list[Any], apply: Callable[[Any], None]) -> list[Outcome]:
    """Every resource's outcome, in order: `apply(resource)` for each one named once (a
    resource named twice is refused, INVALID_REQUEST); its KafkaError or OSError is its error,
    and the others go on."""
    dup = duplicates(resources)
    out = []
    for i, r in enumerate(resources):
        try:
            out.append(_NAMED_TWICE if i in dup else apply(r) or _APPLIED)  # apply returns None
        except (KafkaError, OSError) as e:
            out.append(_failed(e))
    return out


async def each_resource_awaited(resources: list[Any], apply: Callable[[Any], Awaitable[None]]) -> list[Outcome]:
    """each_resource with an `apply` that waits (a change published to ZooKeeper)."""
    dup = duplicates(resources)
    out = []
    for i, r in enumerate(resources):
        try:
            out.append(_NAMED_TWICE if i in dup else await apply(r) or _APPLIED)  # None
        except (KafkaError, OSError) as e:
            out.append(_failed(e))
    return out


def _check_names_and_nulls(configs: list[Any], null_ok: Any) -> None:
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise _invalid_request("Error due to duplicate config keys")
    nulls = [c.name for c in configs if c.value is None and not null_ok(c)]
    if nulls:
        raise _invalid_request("Null value not supported for : " + ", ".join(nulls))


def plan_legacy(state: ConfigState, resource: Any) -> Plan:
    """AlterConfigs: the resource's configs become exactly those given."""
    _check_names_and_nulls(resource.configs, lambda c: False)
    rtype, name = resource.resource_type, resource.resource_name
    new = {c.name: c.value for c in resource.configs}
    if rtype == ResourceType.BROKER:
        per_node = _broker_resource(state, name)
        _check_broker_configs(state, new, per_node)
        return Plan(ResourceType.BROKER, name, new)
    if rtype == ResourceType.TOPIC:
        return _plan_topic(state, name, new)
    if rtype == ResourceType.GROUP:
        return _plan_group(state, name, new)
    # legacy AlterConfigs has no BROKER_LOGGER either
    raise _invalid_request(f"Unknown resource type {rtype}")


def plan_incremental(state: ConfigState, resource: Any) -> Plan | None:
    """IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT on the current configs. None for
    BROKER_LOGGER, which is checked (and applied by `apply_loggers`) apart."""
    _check_names_and_nulls(resource.configs, lambda c: c.config_operation == DELETE)
    rtype, name = resource.resource_type, resource.resource_name
    if rtype == ResourceType.BROKER_LOGGER:
        broker_logger.check(state.config.node_id, name, resource.configs)
        return None
    if rtype == ResourceType.BROKER:
        per_node = _broker_resource(state, name)
        for c in resource.configs:
            if c.config_operation not in _OP_NAMES:
                raise _invalid_request(f"Unknown operations type {c.config_operation}")
        new = dict(state.configs.layer(per_node))
        for c in resource.configs:
            key = broker_config_key(c.name)
            if c.config_operation in (APPEND, SUBTRACT) and (key is None or key.type != ConfigType.LIST):
                verb = "append" if c.config_operation == APPEND else "subtract"
                raise _invalid_config(f"Config value {verb} is not allowed for config key: {c.name}")
            _apply_op(new, c, key.default_text if key is not None else None)
        _check_broker_configs(state, new, per_node)
        return Plan(ResourceType.BROKER, name, new)
    if rtype == ResourceType.TOPIC:
        topic = state.topics.get(name) if name else None
        new = dict(topic.configs) if topic is not None else {}
        for c in resource.configs:
            if c.config_operation not in _OP_NAMES:
                raise _invalid_request(f"Unknown operations type {c.config_operation}")
            key = TOPIC_CONFIGS.get(c.name)
            if c.config_operation in (APPEND, SUBTRACT) and (key is None or key.type != ConfigType.LIST):
                raise _invalid_config(f"Can't {_OP_NAMES[c.config_operation]} to key {c.name} because its "
                                      "type is not LIST.")
            _apply_op(new, c, key.default_text if key is not None else None)
        return _plan_topic(state, name, new)
    if rtype == ResourceType.GROUP:
        for c in resource.configs:
            if c.config_operation not in _OP_NAMES:
                raise _invalid_request(f"Unknown operations type {c.config_operation}")
        new = dict(state.group_configs.get(name)) if name else {}
        for c in resource.configs:
            if c.config_operation in (APPEND, SUBTRACT):  # no group config is a LIST
                raise _invalid_config(f"Can't {_OP_NAMES[c.config_operation]} to key {c.name} because its "
                                      "type is not LIST.")
            _apply_op(new, c, None)
        return _plan_group(state, name, new)
    raise _invalid_request(f"Unknown resource type {rtype}")


def _apply_op(configs: dict[str, str], c: Any, default: str | None) -> None:
    """One incremental operation on a config map; APPEND and SUBTRACT start from the current
    value, else the default, and work on its non-empty comma-separated parts."""
    op = c.config_operation
    if op == SET:
        configs[c.name] = c.value
    elif op == DELETE:
        configs.pop(c.name, None)
    else:
        parts = [p for p in (configs.get(c.name, default) or "").split(",") if p]
        for v in c.value.split(","):
            if op == APPEND and v not in parts:
                parts.append(v)
            elif op == SUBTRACT and v in parts:
                parts.remove(v)  # one occurrence per value given, as Kafka's list removal
        configs[c.name] = ",".join(parts)


def _plan_topic(state: ConfigState, name: str, new: dict[str, str | None]) -> Plan:
    """ControllerConfigurationValidator + the existence check, in Kafka's order: the values
    first (INVALID_CONFIG), then whether the topic exists."""
    if not name:
        raise _invalid_request("Default topic resources are not allowed.")
    validate_topic_name(name)
    try:
        check_topic_configs(new, state.configs.topic_defaults())
    except ConfigError as e:
        raise _invalid_config(str(e)) from None
    if state.topics.get(name) is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    return Plan(ResourceType.TOPIC, name, {k: v for k, v in new.items() if v is not None})


def _plan_group(state: ConfigState, name: str, new: dict[str, str | None]) -> Plan:
    """ControllerConfigurationValidator for GROUP: a named group (existing or not), then
    GroupConfig.validate on its complete new map (INVALID_CONFIG)."""
    if not name:
        raise _invalid_request("Default group resources are not allowed.")
    try:
        return Plan(ResourceType.GROUP, name, state.group_configs.check(new))
    except ConfigError as e:
        raise _invalid_config(str(e)) from None


def _broker_resource(state: ConfigState, name: str) -> bool:
    """True for this node's own configs, False for the cluster default (an empty name)."""
    if name:
        node = _broker_id(name, "Node id must be an integer, but it is: ")
        if node != state.config.node_id:
            raise _invalid_request(f"Unexpected broker id, expected {state.config.node_id}, but received {name}")
        return True
    return False


def _check_broker_configs(state: ConfigState, new: dict[str, str], per_node: bool) -> None:
    """DynamicBrokerConfig.validate: only dynamic configs, per-broker ones only with a broker
    id, every value of its type and range (Kafka answers these INVALID_REQUEST, KAFKA-13609)."""
    fixed = sorted(n for n in new if (k := broker_config_key(n)) is not None and k.dynamic == Dynamic.READ_ONLY)
    if fixed:
        raise _invalid_request(f"Cannot update these configs dynamically: Set({', '.join(fixed)})")
    for n, v in new.items():
        key = broker_config_key(n)
        if key is not None:
            try:
                key.parse(v)
            except ConfigError as e:
                raise _invalid_request(str(e)) from None
    if not per_node:
        only_node = sorted(n for n in new if (k := broker_config_key(n)) is not None and k.dynamic == Dynamic.PER_BROKER)
        if only_node:
            raise _invalid_request("Cannot update these configs at default cluster level, broker id must be "
                                   f"specified: Set({', '.join(only_node)})")


# ---------------------------------------------------------------------------- committing


def commit(state: ConfigState, plan: Plan) -> None:
    """Install a planned config map durably (OSError: nothing changed)."""
    if plan.type == ResourceType.TOPIC:
        topic = state.topics.get(plan.name)
        if topic is None:  # gone since the plan (nothing in between yields: cannot happen)
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{plan.name}' does not exist.")
        old = topic.configs
        topic.configs = dict(plan.configs)
        try:
            state.topics.save()
        except OSError:
            topic.configs = old
            raise
        state.configs.changed()
        apply_configs_to_logs(state.configs, state.logs, topic)
        log.info("Topic %s configs now %s", plan.name, plan.configs)
    elif plan.type == ResourceType.GROUP:
        state.group_configs.replace(plan.name, plan.configs)
        log.info("Group %s configs now %s", plan.name, plan.configs)
    else:
        state.configs.replace(bool(plan.name), plan.configs)
        for topic in state.topics.topics.values():
            apply_configs_to_logs(state.configs, state.logs, topic)
        log.info("Dynamic %s configs now %s", f"broker {plan.name}" if plan.name else "cluster default",
                 {k: v if not _secret(k) else "[hidden]" for k, v in plan.configs.items()})


def _secret(name: str) -> bool:
    key = broker_config_key(name)
    return key is None or key.sensitive
