"""kafka-configs.sh for client quotas (--entity-type users / clients / ips, and users with
clients together): --describe through DescribeClientQuotas (a strict filter of the named
entities, or of every entity of the given types), --alter through AlterClientQuotas, with
ConfigCommand's checks, output and messages. SCRAM credentials of users go elsewhere
(server/kafkatools/scram_configs.py; configs.py decides which path a users command takes)."""
from __future__ import annotations

from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest

from kcoord.server.config_catalogue import java_double
from kcoord.server.kafkatools.wire import Client, check

USERS, CLIENTS, IPS = "users", "clients", "ips"
ENTITY_TYPE = {USERS: "user", CLIENTS: "client-id", IPS: "ip"}
USER_CLIENT_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
IP_KEYS = ("connection_creation_rate",)
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_LABEL = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}


class QuotaUsageError(Exception):
    """ConfigCommand's IllegalArgumentException: the message alone, on stderr."""


def is_scram(key: str) -> bool:
    return key in SCRAM_MECHANISMS


def is_quota(key: str) -> bool:
    return key in USER_CLIENT_KEYS


def _check_keys(types: list[str], add: dict[str, str], remove: list[str]) -> None:
    if types[0] == IPS:
        unknown = [k for k in [*add, *remove] if k not in IP_KEYS]
        if unknown:
            raise QuotaUsageError("Only connection quota configs can be added for 'ip' using --bootstrap-server. "
                                  f"Unexpected config names: {','.join(unknown)}")
        return
    unknown_add = [k for k in add if not is_quota(k) and not is_scram(k)]
    unknown_del = [k for k in remove if not is_quota(k) and not is_scram(k)]
    if types[0] == CLIENTS or len(types) == 2:
        bad_add = unknown_add + [k for k in add if is_scram(k)]
        bad_del = unknown_del + [k for k in remove if is_scram(k)]
        if bad_add:
            raise QuotaUsageError("Only quota configs can be added for 'clients' using --bootstrap-server. "
                                  f"Unexpected config names: {_scala_set(bad_add)}")
        if bad_del:
            raise QuotaUsageError("Only quota configs can be deleted for 'clients' using --bootstrap-server. "
                                  f"Unexpected config names: {_scala_list(bad_del)}")
        return
    if unknown_add:
        raise QuotaUsageError("Only quota and SCRAM credential configs can be added for 'users' using "
                              f"--bootstrap-server. Unexpected config names: {_scala_set(unknown_add)}")
    if unknown_del:
        raise QuotaUsageError("Only quota and SCRAM credential configs can be deleted for 'users' using "
                              f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_del)}")
    if any(is_scram(k) for k in [*add, *remove]):
        raise QuotaUsageError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                              "using --bootstrap-server.")


def _scala_list(keys: list[str]) -> str:
    return f"List({', '.join(keys)})"


def _scala_set(keys: list[str]) -> str:
    return f"Set({', '.join(keys)})"


def alter(client: Client, types: list[str], names: list[str], add: dict[str, str], remove: list[str]) -> None:
    _check_keys(types, add, remove)
    E = AlterClientQuotasRequest.EntryData
    entity = {ENTITY_TYPE[t]: (n or None) for t, n in zip(types, names, strict=False)}
    ops = []
    for key, value in add.items():
        try:
            number = float(value)
        except ValueError:
            raise QuotaUsageError(f"Cannot parse quota configuration value for {key}: {value}") from None
        ops.append(E.OpData(key=key, value=number, remove=False))
    ops += [E.OpData(key=key, value=0.0, remove=True) for key in remove]
    resp = client.send(AlterClientQuotasRequest, validate_only=False, entries=[
        E(entity=[E.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()], ops=ops)])
    for entry in resp.entries:
        check(entry.error_code, entry.error_message)


def describe(client: Client, types: list[str], names: list[str]) -> None:
    """getAllClientQuotasConfigs + describeClientQuotaAndUserScramCredentialConfigs' quota lines."""
    C = DescribeClientQuotasRequest.ComponentData
    components = []
    for i, t in enumerate(types):
        name = names[i] if i < len(names) else None
        if name is None:
            components.append(C(entity_type=ENTITY_TYPE[t], match_type=2, match=None))
        elif name == "":
            components.append(C(entity_type=ENTITY_TYPE[t], match_type=1, match=None))
        else:
            components.append(C(entity_type=ENTITY_TYPE[t], match_type=0, match=name))
    resp = client.send(DescribeClientQuotasRequest, components=components, strict=True)
    check(resp.error_code, resp.error_message)
    for entry in resp.entries or []:
        names_by_type = {e.entity_type: e.entity_name for e in entry.entity}
        parts = [f"{_LABEL[t]} '{names_by_type[t]}'" if names_by_type[t] is not None else f"the default {_LABEL[t]}"
                 for t in ("user", "client-id", "ip") if t in names_by_type]
        values = ", ".join(f"{v.key}={java_double(v.value)}" for v in entry.values)
        print(f"Quota configs for {', '.join(parts)} are {values}")
