"""kafka-configs.sh: --describe and --alter the configs of topics, brokers (one, or the cluster
default), broker loggers and groups (the GROUP config resource), with Kafka's ConfigCommand flags, checks, output and exit codes.
The SCRAM credentials of users go through AlterUserScramCredentials and
DescribeUserScramCredentials (server/kafkatools/scram_configs.py), client quotas (users, clients,
ips) through DescribeClientQuotas and AlterClientQuotas (server/kafkatools/quota_configs.py).
Client metrics use APIs kcoord does not serve: that entity type is accepted and answered as a
broker without them would be (UnsupportedVersionException)."""
from __future__ import annotations

import re
import sys
from typing import Any

from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
)

from kcoord.server.config_catalogue import TOPIC_CONFIGS
from kcoord.server.group_configs import GROUP_CONFIGS
from kcoord.server.kafkatools import quota_configs, scram_configs
from kcoord.server.kafkatools.options import ToolParser, check_invalid, load_properties
from kcoord.server.kafkatools.wire import Client, KafkaCallError, check
from kcoord.server.topics import validate_topic_name

WHAT = ("This tool helps to manipulate and describe entity config for a topic, client, user, broker, ip, "
        "client-metrics or group")
TOPICS, BROKERS, LOGGERS, USERS, CLIENTS, IPS, METRICS, GROUPS = ("topics", "brokers", "broker-loggers", "users",
                                                                 "clients", "ips", "client-metrics", "groups")
SUPPORTED = (TOPICS, CLIENTS, USERS, BROKERS, IPS, LOGGERS, METRICS, GROUPS)
RESOURCE_TYPES = {TOPICS: 2, BROKERS: 4, LOGGERS: 8, GROUPS: 32}
SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
           7: "DYNAMIC_CLIENT_METRICS_CONFIG", 8: "DYNAMIC_GROUP_CONFIG"}
SET, DELETE = 0, 1
UNSUPPORTED_APIS = {METRICS: "ListClientMetricsResources"}


class UsageError(Exception):
    """IllegalArgumentException / InvalidConfigurationException: the message alone, on stderr."""


def parser() -> ToolParser:
    p = ToolParser("kafka-configs.sh", WHAT)
    a = p.add_argument
    a("--bootstrap-server", metavar="server to connect to", help="The Kafka servers to connect to.")
    a("--bootstrap-controller", metavar="controller to connect to", help="The Kafka controllers to connect to.")
    a("--command-config", metavar="command config property file",
      help="Property file containing configs to be passed to Admin Client.")
    a("--alter", action="store_true", help="Alter the configuration for the entity.")
    a("--describe", action="store_true", help="List configs for the given entity.")
    a("--all", action="store_true", help="List all configs for the given topic, broker, or broker-logger entity "
                                         "(includes static configuration when the entity type is brokers)")
    a("--entity-type", action="append", help="Type of entity (topics/clients/users/brokers/broker-loggers/ips/"
                                             "client-metrics/groups)")
    a("--entity-name", action="append", help="Name of entity (topic name/client id/user principal name/broker id/"
                                             "ip/client metrics/group id)")
    a("--entity-default", action="store_true", help="Default entity name for clients/users/brokers/ips")
    a("--add-config", help="Key Value pairs of configs to add. Square brackets can be used to group values which "
                           "contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'. Topic configs: " + ", ".join(sorted(TOPIC_CONFIGS))
                           + ". Group configs: " + ", ".join(sorted(GROUP_CONFIGS)))
    a("--add-config-file", help="Path to a properties file with configs to add.")
    a("--delete-config", action="append", help="config keys to remove 'k1,k2'")
    a("--force", action="store_true", help="Suppress console prompts")
    a("--topic", help="The topic's name.")
    a("--client", help="The client's ID.")
    a("--client-defaults", action="store_true", help="The config defaults for all clients.")
    a("--user", help="The user's principal name.")
    a("--user-defaults", action="store_true", help="The config defaults for all users.")
    a("--broker", help="The broker's ID.")
    a("--broker-defaults", action="store_true", help="The config defaults for all brokers.")
    a("--broker-logger", help="The broker's ID for its logger config.")
    a("--ip-defaults", action="store_true", help="The config defaults for all IPs.")
    a("--ip", help="The IP address.")
    a("--group", help="The group's ID.")
    return p


ENTITY_FLAGS = (("topic", TOPICS), ("client", CLIENTS), ("user", USERS), ("broker", BROKERS),
                ("broker_logger", LOGGERS), ("ip", IPS), ("group", GROUPS))
DEFAULT_FLAGS = (("client_defaults", CLIENTS), ("user_defaults", USERS), ("broker_defaults", BROKERS),
                 ("ip_defaults", IPS))


def entity_types(o: Any) -> list[str]:
    return list(o.entity_type or []) + [t for f, t in ENTITY_FLAGS + DEFAULT_FLAGS if getattr(o, f)]


def entity_names(o: Any) -> list[str]:
    names = list(o.entity_name or []) + ([""] if o.entity_default else [])
    names += [getattr(o, f) for f, _ in ENTITY_FLAGS if getattr(o, f)]
    return names + ["" for f, _ in DEFAULT_FLAGS if getattr(o, f)]


def check_args(p: ToolParser, o: Any) -> None:
    """ConfigCommandOptions.checkArgs, in its order."""
    if int(o.alter) + int(o.describe) != 1:
        p.usage_exit("Command must include exactly one action: --describe, --alter")
    check_invalid(p, o, "describe", ["alter", "add-config", "delete-config"])
    types = entity_types(o)
    dup = sorted({t for t in types if types.count(t) > 1})
    if dup:
        raise UsageError(f"Duplicate entity type(s) specified: {','.join(dup)}")
    if not (o.bootstrap_server or o.bootstrap_controller):
        raise UsageError("One of the required --bootstrap-server, --boostrap-controller, or --zookeeper arguments "
                         "must be specified")
    for t in types:
        if t not in SUPPORTED:
            raise UsageError(f"Invalid entity type {t}, the entity type must be one of {', '.join(SUPPORTED)} with a "
                             "--bootstrap-server or --bootstrap-controller argument")
    if not types:
        raise UsageError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        raise UsageError(f"Only '{USERS}' and '{CLIENTS}' entity types may be specified together")
    flags = any(getattr(o, f) for f, _ in ENTITY_FLAGS + DEFAULT_FLAGS)
    if (o.entity_name or o.entity_type or o.entity_default) and flags:
        raise UsageError("--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    if o.bootstrap_server and o.bootstrap_controller:
        raise UsageError("Only one of --bootstrap-server, --boostrap-controller, and --zookeeper can be specified")
    names = entity_names(o)
    has_name = any(names)
    if has_name and (BROKERS in types or LOGGERS in types):
        for broker_id in [*(o.entity_name or []), o.broker, o.broker_logger]:
            if broker_id is not None and not re.fullmatch(r"[+-]?\d+", broker_id):
                raise UsageError(f"The entity name for {types[0]} must be a valid integer broker id, but it is: "
                                 f"{broker_id}")
    if o.describe and LOGGERS in types and not has_name:
        raise UsageError(f"an entity name must be specified with --describe of {','.join(types)}")
    if o.alter:
        if any(t in types for t in (USERS, CLIENTS, BROKERS, IPS)):
            if not names:
                raise UsageError("an entity-name or default entity must be specified with --alter of users, clients, "
                                 "brokers or ips")
        elif not has_name:
            raise UsageError(f"an entity name must be specified with --alter of {','.join(types)}")
        if o.add_config and o.add_config_file:
            raise UsageError("Only one of --add-config or --add-config-file must be specified")
        if not (o.add_config or o.add_config_file or o.delete_config):
            raise UsageError("At least one of --add-config, --add-config-file, or --delete-config must be specified "
                             "with --alter")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    p = parser()
    o = p.parse(args, WHAT)
    try:
        check_args(p, o)
        if o.alter and len(entity_types(o)) != len(entity_names(o)):
            raise UsageError("An entity name must be specified for every entity type")
        props = load_properties(o.command_config) if o.command_config else {}
        client = Client(o.bootstrap_server or o.bootstrap_controller,
                        float(props.get("request.timeout.ms", 30000)) / 1000, props.get("client.id", "kafka-configs"))
    except UsageError as e:
        print(e, file=sys.stderr)
        return 1
    except (OSError, KafkaCallError) as e:
        return _failed(args, f"org.apache.kafka.common.KafkaException: {e}")
    try:
        if o.alter:
            alter(client, o)
        else:
            describe(client, o)
        return 0
    except (UsageError, scram_configs.ScramUsageError, quota_configs.QuotaUsageError) as e:
        print(e, file=sys.stderr)
        return 1
    except KafkaCallError as e:
        return _failed(args, f"java.util.concurrent.ExecutionException: {e.java()}")
    except OSError as e:
        return _failed(args, f"org.apache.kafka.common.errors.TimeoutException: {e}")
    finally:
        client.close()


def _failed(args: list[str], exception: str) -> int:
    """The catch-all of ConfigCommand.main (the exception line stands for its stack trace)."""
    print(f"Error while executing config command with args '{' '.join(args)}'", file=sys.stderr)
    print(exception, file=sys.stderr)
    return 1


# ---------------------------------------------------------------------------- describe


def resource_configs(client: Client, etype: str, name: str, synonyms: bool, everything: bool) -> list[Any]:
    """ConfigCommand.getResourceConfig: the entries, sorted by name, only the dynamic ones of
    this entity unless `everything`."""
    if etype in UNSUPPORTED_APIS:
        raise KafkaCallError(35, f"The node does not support {_api_key(UNSUPPORTED_APIS[etype])}")
    wanted: int | None
    if etype == TOPICS:
        if name:
            try:
                validate_topic_name(name)
            except Exception as e:  # noqa: BLE001 - Topic.validate's InvalidTopicException
                raise KafkaCallError(17, getattr(e, "message", str(e))) from None
        wanted = 1
    elif etype == BROKERS:
        if name and not re.fullmatch(r"[+-]?\d+", name):
            raise UsageError(f"The entity name for {etype} must be a valid integer broker id, found: {name}")
        wanted = 2 if name else 3
    elif etype == GROUPS:
        wanted = 8  # DYNAMIC_GROUP_CONFIG
    else:
        if name and not re.fullmatch(r"[+-]?\d+", name):
            raise UsageError(f"The entity name for {etype} must be a valid integer broker id, found: {name}")
        wanted = None
    R = DescribeConfigsRequest
    node = int(name) if etype in (BROKERS, LOGGERS) and name else None
    resp = client.send(R, node=node, include_synonyms=synonyms, include_documentation=False, resources=[
        R.DescribeConfigsResource(resource_type=RESOURCE_TYPES[etype], resource_name=name, configuration_keys=None)])
    r = resp.results[0]
    check(r.error_code, r.error_message)
    entries = [c for c in r.configs if everything or wanted is None or c.config_source == wanted]
    return sorted(entries, key=lambda c: c.name)


def _api_key(api: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", api).upper()


def describe(client: Client, o: Any) -> None:
    etype = entity_types(o)[0]
    names = entity_names(o)
    if etype in (USERS, CLIENTS, IPS):
        # ConfigCommand prints the quota configs, then the users' SCRAM credentials (unless
        # describing defaults or clients too)
        quota_configs.describe(client, entity_types(o), names)
        if entity_types(o) == [USERS] and "" not in names:
            scram_configs.describe(client, names)
        return
    if etype in UNSUPPORTED_APIS:
        raise KafkaCallError(35, f"The node does not support {_api_key(UNSUPPORTED_APIS[etype])}")
    if names:
        entities = names[:1]
    elif etype == TOPICS:
        entities = client.topic_names()
    elif etype == GROUPS:  # Admin.listConsumerGroups
        from kafka.protocol.admin.groups import ListGroupsRequest

        resp = client.send(ListGroupsRequest, states_filter=[], types_filter=[])
        check(resp.error_code, None)
        entities = [g.group_id for g in resp.groups]
    else:
        client.metadata([])
        entities = [str(b) for b in sorted(client.brokers)] + [""]
    for entity in entities:
        if entity == "":
            print(f"Default configs for {etype} in the cluster are:")
        else:
            print(f"{'All' if o.all else 'Dynamic'} configs for {etype[:-1]} {entity} are:")
        for c in resource_configs(client, etype, entity, True, o.all):
            synonyms = ", ".join(f"{SOURCES.get(s.source, 'UNKNOWN')}:{s.name}={_v(s.value)}" for s in c.synonyms or [])
            print(f"  {c.name}={_v(c.value)} sensitive={'true' if c.is_sensitive else 'false'} synonyms={{{synonyms}}}")


def _v(value: str | None) -> str:
    return "null" if value is None else value


# ---------------------------------------------------------------------------- alter


def configs_to_add(o: Any) -> dict[str, str]:
    """ConfigCommand.parseConfigsToBeAdded: commas outside [] separate pairs, brackets dropped."""
    props: dict[str, str] = {}
    if o.add_config_file:
        props.update(load_properties(o.add_config_file))
    if o.add_config:
        outside = r"(?=[^\]]*(?:\[|$))"
        pairs = [re.split(r"\s*=\s*" + outside, item) for item in re.split("," + outside, o.add_config)]
        if not all(len(kv) == 2 for kv in pairs):
            raise UsageError('requirement failed: Invalid entity config: all configs to be added must be in the format '
                             '"key=val".')
        for k, v in pairs:
            props[k.strip()] = re.sub(r"\[?\]?", "", v).strip()
    if "message.format.version" in props:
        print(f"WARNING: The configuration message.format.version={props['message.format.version']} is specified. "
              "This configuration will be ignored if the version is newer than the inter.broker.protocol.version "
              "specified in the broker or if the inter.broker.protocol.version is 3.0 or newer. This configuration is "
              "deprecated and it will be removed in Apache Kafka 4.0.")
    for k in props:
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", k):
            raise UsageError(f"Invalid character found for config key: {k}")
    return props


def configs_to_delete(o: Any) -> list[str]:
    return [k.strip() for item in o.delete_config or [] for k in item.split(",")]


def alter(client: Client, o: Any) -> None:
    etype, name = entity_types(o)[0], entity_names(o)[0]
    add = configs_to_add(o)
    remove = configs_to_delete(o)
    if etype in (TOPICS, BROKERS, GROUPS):
        old = {c.name: c for c in resource_configs(client, etype, name, False, False)}
        missing = [k for k in remove if k not in old]
        if missing:
            raise UsageError(f"Invalid config(s): {','.join(missing)}")
    if etype in (TOPICS, GROUPS):
        _incremental(client, RESOURCE_TYPES[etype], name, None, add, remove)
    elif etype == BROKERS:
        new = {k: c.value for k, c in old.items() if k not in remove}
        new.update(add)
        secret = sorted(k for k, v in new.items() if v is None)
        if secret:
            raise UsageError("All sensitive broker config entries must be specified for --alter, missing entries: "
                             f"Set({', '.join(secret)})")
        R = AlterConfigsRequest.AlterConfigsResource
        resp = client.send(AlterConfigsRequest, node=int(name) if name else None, validate_only=False, resources=[
            R(resource_type=4, resource_name=name, configs=[R.AlterableConfig(name=k, value=v) for k, v in new.items()])])
        r = resp.responses[0]
        check(r.error_code, r.error_message)
    elif etype == LOGGERS:
        valid = {c.name for c in resource_configs(client, etype, name, True, False)}
        invalid = [k for k in remove if k not in valid] + [k for k in add if k not in valid]
        if invalid:
            raise UsageError(f"Invalid broker logger(s): {','.join(invalid)}")
        _incremental(client, 8, name, int(name), add, remove)
    elif etype == METRICS:
        raise KafkaCallError(35, f"The node does not support {_api_key(UNSUPPORTED_APIS[METRICS])}")
    elif entity_types(o) == [USERS] and scram_configs.takes_scram_path(add, remove):
        scram_configs.alter(client, entity_names(o), add, remove)
    else:  # client quotas
        if entity_types(o) == [USERS]:
            scram_configs.check_users(entity_names(o), add, remove)
        quota_configs.alter(client, entity_types(o), entity_names(o), add, remove)
    if name:
        print(f"Completed updating config for {etype[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {etype} in the cluster.")


def _incremental(client: Client, rtype: int, name: str, node: int | None, add: dict[str, str],
                 remove: list[str]) -> None:
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    ops = [R.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in add.items()]
    ops += [R.AlterableConfig(name=k, config_operation=DELETE, value="") for k in remove]
    resp = client.send(IncrementalAlterConfigsRequest, node=node, validate_only=False,
                       resources=[R(resource_type=rtype, resource_name=name, configs=ops)])
    r = resp.responses[0]
    check(r.error_code, r.error_message)


if __name__ == "__main__":
    sys.exit(main())
