"""kafka-acls.sh (--bootstrap-server mode): --add, --remove and --list ACLs of topics, groups,
the cluster, transactional ids, delegation tokens and user principals, with Kafka's AclCommand
flags (--allow-principal, --deny-principal, --allow-host, --deny-host, --operation,
--resource-pattern-type, --producer, --consumer, --idempotent, --force), output and exit
codes, over CreateAcls / DeleteAcls / DescribeAcls. What the server does with them is its
authorizer's business (a server without one answers SECURITY_DISABLED, as Kafka's does)."""
from __future__ import annotations

import re
import sys
from typing import Any

from kafka.protocol.admin.acl import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from kcoord.server.kafkatools.options import ToolParser, check_invalid, check_required, load_properties
from kcoord.server.kafkatools.wire import Client, KafkaCallError, check

WHAT = "This tool helps to manage acls on kafka."
CLUSTER_NAME = "kafka-cluster"
RESOURCE_TYPES = {"ANY": 1, "TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5, "DELEGATION_TOKEN": 6,
                  "USER": 7}
PATTERN_TYPES = {"ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {"ANY": 1, "ALL": 2, "READ": 3, "WRITE": 4, "CREATE": 5, "DELETE": 6, "ALTER": 7, "DESCRIBE": 8,
              "CLUSTER_ACTION": 9, "DESCRIBE_CONFIGS": 10, "ALTER_CONFIGS": 11, "IDEMPOTENT_WRITE": 12,
              "CREATE_TOKENS": 13, "DESCRIBE_TOKENS": 14}
PERMISSIONS = {"ANY": 1, "DENY": 2, "ALLOW": 3}
# AclEntry.supportedOperations per resource type (ALL is always accepted)
SUPPORTED = {
    "TOPIC": {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
    "GROUP": {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
    "CLUSTER": {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE"},
    "TRANSACTIONAL_ID": {"DESCRIBE", "WRITE"},
    "DELEGATION_TOKEN": {"DESCRIBE"},
    "USER": {"CREATE_TOKENS", "DESCRIBE_TOKENS"},
}
_NAMES = {v: k for k, v in RESOURCE_TYPES.items()}
_PATTERNS = {v: k for k, v in PATTERN_TYPES.items()}
_OPS = {v: k for k, v in OPERATIONS.items()}
_PERMS = {v: k for k, v in PERMISSIONS.items()}

Pattern = tuple[str, str | None, str]  # resource type, name, pattern type
Entry = tuple[str, str, str, str]  # principal, host, operation, permission


class UsageError(Exception):
    pass


def parser() -> ToolParser:
    p = ToolParser("kafka-acls.sh", WHAT)
    a = p.add_argument
    a("--bootstrap-server", metavar="server to connect to", help="The Kafka cluster to connect to.")
    a("--command-config", metavar="command-config", help="A property file containing configs to be passed to Admin "
                                                         "Client.")
    a("--topic", action="append", help="topic to which ACLs should be added or removed ('*': all topics).")
    a("--cluster", action="store_true", help="Add/Remove cluster ACLs.")
    a("--group", action="append", help="Consumer Group to which the ACLs should be added or removed.")
    a("--transactional-id", action="append", help="The transactionalId to which ACLs should be added or removed.")
    a("--idempotent", action="store_true", help="Enable idempotence for the producer (with --producer).")
    a("--delegation-token", action="append", help="Delegation token to which ACLs should be added or removed.")
    a("--user-principal", action="append", help="Specifies a user principal as a resource.")
    a("--resource-pattern-type", default="literal", help="literal, prefixed, any or match (default: literal)")
    a("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    a("--remove", action="store_true", help="Indicates you are trying to remove ACLs.")
    a("--list", action="store_true", help="List ACLs for the specified resource.")
    a("--operation", action="append", help="Operation that is being allowed or denied (default: All).")
    a("--allow-principal", action="append", help="principal is in principalType:name format.")
    a("--deny-principal", action="append", help="principal is in principalType:name format.")
    a("--principal", action="append", nargs="?", const="", help="List ACLs for the specified principal.")
    a("--allow-host", action="append", help="Host from which principals listed in --allow-principal have access.")
    a("--deny-host", action="append", help="Host from which principals listed in --deny-principal are denied.")
    a("--producer", action="store_true", help="Convenience option to add/remove ACLs for producer role.")
    a("--consumer", action="store_true", help="Convenience option to add/remove ACLs for consumer role.")
    a("--force", action="store_true", help="Assume Yes to all queries and do not prompt.")
    return p


def check_args(p: ToolParser, o: Any) -> None:
    """AclCommandOptions.checkArgs (the --bootstrap-server form)."""
    check_required(p, o, "bootstrap-server")
    if sum(map(bool, (o.add, o.remove, o.list))) != 1:
        p.usage_exit("Command must include exactly one action: --list, --add, --remove. ")
    check_invalid(p, o, "list", ["producer", "consumer", "allow-host", "allow-principal", "deny-host",
                                 "deny-principal"])
    check_invalid(p, o, "producer", ["operation", "deny-principal", "deny-host"])
    check_invalid(p, o, "consumer", ["operation", "deny-principal", "deny-host"])
    if o.principal is not None and not o.list:
        p.usage_exit("The --principal option is only available if --list is set")
    if o.producer and not o.topic:
        p.usage_exit("With --producer you must specify a --topic")
    if o.idempotent and not o.producer:
        p.usage_exit("The --idempotent option is only available if --producer is set")
    if o.consumer and (not o.topic or not o.group or (not o.producer and (o.cluster or o.transactional_id))):
        p.usage_exit("With --consumer you must specify a --topic and a --group and no --cluster or "
                     "--transactional-id option should be specified.")


def main(argv: list[str] | None = None) -> int:
    p = parser()
    o = p.parse(list(sys.argv[1:] if argv is None else argv), WHAT)
    check_args(p, o)
    pattern = o.resource_pattern_type.upper()
    if pattern not in PATTERN_TYPES:
        p.usage_exit(f"Unknown resource-pattern-type: {o.resource_pattern_type}")
    try:
        plan = resource_acls(p, o, pattern)
        props = load_properties(o.command_config) if o.command_config else {}
        client = Client(o.bootstrap_server, float(props.get("request.timeout.ms", 30000)) / 1000,
                        props.get("client.id", "kafka-acls"))
    except UsageError as e:
        p.usage_exit(str(e))
    except (OSError, KafkaCallError) as e:
        print(f"Error while executing ACL command: {e}")
        return 1
    try:
        if o.add:
            add(client, p, plan, pattern)
        elif o.remove:
            remove(client, o, plan)
        else:
            list_acls(client, o, pattern)
        return 0
    except (KafkaCallError, OSError, UsageError) as e:
        print(f"Error while executing ACL command: {e}")
        return 1
    finally:
        client.close()


# ---------------------------------------------------------------------------- building ACLs


def operation(name: str) -> str:
    """SecurityUtils.operation: a CamelCase name (Read, IdempotentWrite) or an enum name."""
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name.strip()).upper()
    if key not in OPERATIONS or key == "ANY":
        raise UsageError(f"Unknown operation name: {name}")
    return key


def operation_name(key: str) -> str:
    return "".join(w.capitalize() for w in key.split("_"))


def principal(text: str) -> str:
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise UsageError(f"expected a string in format principalType:principalName but got {text.strip()}")
    return f"{kind}:{name}"


def entries(o: Any, ops: set[str]) -> set[Entry]:
    out: set[Entry] = set()
    for principals, hosts, perm in ((o.allow_principal, o.allow_host, "ALLOW"),
                                    (o.deny_principal, o.deny_host, "DENY")):
        if principals:
            for pr in principals:
                for host in [h.strip() for h in hosts] if hosts else ["*"]:
                    for op in ops:
                        out.add((principal(pr), host, op, perm))
    return out


def filters(o: Any, pattern: str, required: bool = True) -> list[Pattern]:
    out: list[Pattern] = [("TOPIC", t.strip(), pattern) for t in o.topic or []]
    if pattern == "LITERAL" and (o.cluster or o.idempotent):
        out.append(("CLUSTER", CLUSTER_NAME, "LITERAL"))
    out += [("GROUP", g.strip(), pattern) for g in o.group or []]
    out += [("TRANSACTIONAL_ID", t, pattern) for t in o.transactional_id or []]
    out += [("DELEGATION_TOKEN", t.strip(), pattern) for t in o.delegation_token or []]
    out += [("USER", u.strip(), pattern) for u in o.user_principal or []]
    if not out and required:
        raise UsageError("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
                         "--delegation-token <Delegation Token ID>")
    return list(dict.fromkeys(out))


def resource_acls(p: ToolParser, o: Any, pattern: str) -> dict[Pattern, set[Entry]]:
    """getResourceFilterToAcls: the CLI's ACLs, or the --producer / --consumer role's."""
    if o.list:
        return {}
    plan: dict[Pattern, set[Entry]] = {}
    if not o.producer and not o.consumer:
        ops = {operation(x) for x in o.operation or ["All"]}
        for f in filters(o, pattern):
            plan[f] = entries(o, ops)
    if o.producer:
        for f in filters(o, pattern):
            if f[0] == "TOPIC":
                plan[f] = entries(o, {"WRITE", "DESCRIBE", "CREATE"})
            elif f[0] == "TRANSACTIONAL_ID":
                plan[f] = entries(o, {"WRITE", "DESCRIBE"})
        if o.idempotent:
            plan[("CLUSTER", CLUSTER_NAME, "LITERAL")] = entries(o, {"IDEMPOTENT_WRITE"})
    if o.consumer:
        for f in filters(o, pattern):
            if f[0] == "TOPIC":
                plan[f] = plan.get(f, set()) | entries(o, {"READ", "DESCRIBE"})
            elif f[0] == "GROUP":
                plan[f] = plan.get(f, set()) | entries(o, {"READ"})
    for (rtype, _, _), acls in plan.items():
        valid = SUPPORTED.get(rtype, set()) | {"ALL"}
        if {e[2] for e in acls} - valid:
            p.usage_exit(f"ResourceType {rtype} only supports operations "
                         + ", ".join(operation_name(x) for x in sorted(valid)))
    return plan


def pattern_text(f: Pattern) -> str:
    return f"ResourcePattern(resourceType={f[0]}, name={f[1] if f[1] is not None else '<any>'}, patternType={f[2]})"


def entry_text(e: Entry) -> str:
    return f"(principal={e[0]}, host={e[1]}, operation={e[2]}, permissionType={e[3]})"


def _block(title: str, acls: set[Entry]) -> str:
    body = "\n".join("\t" + entry_text(e) for e in sorted(acls))
    return f"{title}: \n {body} \n"


# ---------------------------------------------------------------------------- actions


def add(client: Client, p: ToolParser, plan: dict[Pattern, set[Entry]], pattern: str) -> None:
    if pattern not in ("LITERAL", "PREFIXED"):
        p.usage_exit(f"A '--resource-pattern-type' value of '{pattern}' is not valid when adding acls.")
    if any(not acls for acls in plan.values()):
        p.usage_exit("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    C = CreateAclsRequest.AclCreation
    for f, acls in plan.items():
        print(_block(f"Adding ACLs for resource `{pattern_text(f)}`", acls))
        resp = client.send(CreateAclsRequest, creations=[
            C(resource_type=RESOURCE_TYPES[f[0]], resource_name=f[1], resource_pattern_type=PATTERN_TYPES[f[2]],
              principal=e[0], host=e[1], operation=OPERATIONS[e[2]], permission_type=PERMISSIONS[e[3]])
            for e in sorted(acls)])
        for r in resp.results:
            check(r.error_code, r.error_message)


def remove(client: Client, o: Any, plan: dict[Pattern, set[Entry]]) -> None:
    F = DeleteAclsRequest.DeleteAclsFilter
    for f, acls in plan.items():
        if not acls:
            question = f"Are you sure you want to delete all ACLs for resource filter `{pattern_text(f)}`? (y/n)"
        else:
            question = _block("Are you sure you want to remove ACLs", acls) + \
                f" from resource filter `{pattern_text(f)}`? (y/n)"
        if not o.force:
            print(question)
            if sys.stdin.readline().strip().lower() != "y":
                continue
        wanted = sorted(acls) or [(None, None, "ANY", "ANY")]
        resp = client.send(DeleteAclsRequest, filters=[
            F(resource_type_filter=RESOURCE_TYPES[f[0]], resource_name_filter=f[1],
              pattern_type_filter=PATTERN_TYPES[f[2]], principal_filter=e[0], host_filter=e[1],
              operation=OPERATIONS[e[2]], permission_type=PERMISSIONS[e[3]]) for e in wanted])
        for r in resp.filter_results:
            check(r.error_code, r.error_message)


def list_acls(client: Client, o: Any, pattern: str) -> None:
    wanted = filters(o, pattern, required=False) or [("ANY", None, "ANY")]
    found: dict[Pattern, set[Entry]] = {}
    for f in wanted:
        resp = client.send(DescribeAclsRequest, resource_type_filter=RESOURCE_TYPES[f[0]], resource_name_filter=f[1],
                           pattern_type_filter=PATTERN_TYPES[f[2]], principal_filter=None, host_filter=None,
                           operation=OPERATIONS["ANY"], permission_type=PERMISSIONS["ANY"])
        check(resp.error_code, resp.error_message)
        for r in resp.resources:
            key = (_NAMES.get(r.resource_type, "UNKNOWN"), r.resource_name, _PATTERNS.get(r.pattern_type, "UNKNOWN"))
            found.setdefault(key, set()).update(
                (a.principal, a.host, _OPS.get(a.operation, "UNKNOWN"), _PERMS.get(a.permission_type, "UNKNOWN"))
                for a in r.acls)
    principals = [principal(x) for x in o.principal or [] if x]
    if not principals:
        for f, acls in found.items():
            print(_block(f"Current ACLs for resource `{pattern_text(f)}`", acls))
        return
    for pr in principals:
        print(f"ACLs for principal `{pr}`")
        for f, acls in found.items():
            mine = {e for e in acls if e[0] == pr}
            if mine:
                print(_block(f"Current ACLs for resource `{pattern_text(f)}`", mine))


if __name__ == "__main__":
    sys.exit(main())
