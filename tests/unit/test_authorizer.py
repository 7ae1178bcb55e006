"""The authorizer's decisions as Kafka's StandardAuthorizer makes them, the ACL filters of
DescribeAcls / DeleteAcls, CreateAcls validation, durability, and the table of per-API
authorization policies."""
from __future__ import annotations

import asyncio

import pytest

from kcoord.server.handlers import HANDLERS
from kcoord.server.handlers.routes import POLICIES
from kcoord.server.security.acl import (
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
)
from kcoord.server.security.authorizer import Authorizer, parse_super_users

Op, Perm, Pat, Res = AclOperation, AclPermissionType, PatternType, ResourceType
HOST = "10.0.0.1"


def acl(rtype, name, principal, op, perm=Perm.ALLOW, pattern=Pat.LITERAL, host="*") -> StandardAcl:
    return StandardAcl(rtype, name, pattern, principal, host, op, perm)


def authorizer(tmp_path, *acls: StandardAcl, super_users: str = "", allow_everyone: bool = False) -> Authorizer:
    a = Authorizer(tmp_path, super_users, allow_everyone)
    records, results = a.create(list(acls))
    assert all(code == 0 for code, _ in results), results
    asyncio.run(a.commit(records))
    return a


def may(a: Authorizer, principal: str, op: AclOperation, rtype: ResourceType, name: str, host: str = HOST) -> bool:
    return a.authorize(principal, host, op, rtype, name, "Test", log_denied=False)


def test_literal_prefixed_and_wildcard_acls(tmp_path):
    a = authorizer(tmp_path,
                   acl(Res.TOPIC, "orders", "User:alice", Op.READ),
                   acl(Res.TOPIC, "eu-", "User:alice", Op.WRITE, pattern=Pat.PREFIXED),
                   acl(Res.GROUP, "*", "User:alice", Op.READ))
    assert may(a, "User:alice", Op.READ, Res.TOPIC, "orders")
    assert not may(a, "User:alice", Op.READ, Res.TOPIC, "orders2")  # literal means exactly
    assert not may(a, "User:alice", Op.WRITE, Res.TOPIC, "orders")
    assert may(a, "User:alice", Op.WRITE, Res.TOPIC, "eu-orders")
    assert may(a, "User:alice", Op.WRITE, Res.TOPIC, "eu-")
    assert not may(a, "User:alice", Op.WRITE, Res.TOPIC, "eu")
    assert may(a, "User:alice", Op.READ, Res.GROUP, "anything")
    assert not may(a, "User:bob", Op.READ, Res.GROUP, "anything")
    assert not may(a, "User:alice", Op.READ, Res.TRANSACTIONAL_ID, "orders")


def test_deny_wins_and_implied_operations(tmp_path):
    a = authorizer(tmp_path,
                   acl(Res.TOPIC, "*", "User:carol", Op.ALL),
                   acl(Res.TOPIC, "secret-", "User:carol", Op.READ, Perm.DENY, Pat.PREFIXED),
                   acl(Res.TOPIC, "t", "User:dan", Op.WRITE),
                   acl(Res.TOPIC, "t", "User:dan", Op.ALTER_CONFIGS),
                   acl(Res.TOPIC, "u", "User:erin", Op.DESCRIBE, Perm.DENY),
                   acl(Res.TOPIC, "u", "User:erin", Op.READ))
    assert may(a, "User:carol", Op.READ, Res.TOPIC, "public")
    assert not may(a, "User:carol", Op.READ, Res.TOPIC, "secret-x")  # a DENY beats the wildcard ALLOW ALL
    assert may(a, "User:carol", Op.DESCRIBE, Res.TOPIC, "secret-x")  # denying READ does not deny DESCRIBE
    assert may(a, "User:dan", Op.DESCRIBE, Res.TOPIC, "t")  # WRITE implies DESCRIBE
    assert may(a, "User:dan", Op.DESCRIBE_CONFIGS, Res.TOPIC, "t")  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert not may(a, "User:dan", Op.READ, Res.TOPIC, "t")
    assert may(a, "User:erin", Op.READ, Res.TOPIC, "u")
    assert not may(a, "User:erin", Op.DESCRIBE, Res.TOPIC, "u")  # an explicit DENY DESCRIBE wins over READ


def test_principal_wildcard_hosts_super_users_and_the_default(tmp_path):
    a = authorizer(tmp_path,
                   acl(Res.TOPIC, "shared", "User:*", Op.READ),
                   acl(Res.TOPIC, "lan", "User:alice", Op.READ, host=HOST),
                   acl(Res.TOPIC, "owned", "User:bob", Op.READ),
                   super_users="User:admin; User:ops")
    assert may(a, "User:anyone", Op.READ, Res.TOPIC, "shared")
    assert may(a, "User:alice", Op.READ, Res.TOPIC, "lan")
    assert not may(a, "User:alice", Op.READ, Res.TOPIC, "lan", host="10.0.0.2")
    assert may(a, "User:admin", Op.DELETE, Res.CLUSTER, "kafka-cluster")
    assert may(a, "User:ops", Op.READ, Res.TOPIC, "owned")
    assert not may(a, "User:ANONYMOUS", Op.READ, Res.TOPIC, "no-acls")  # allow.everyone.if.no.acl.found=false
    (tmp_path / "b").mkdir()
    everyone = authorizer(tmp_path / "b", acl(Res.TOPIC, "owned", "User:bob", Op.READ), allow_everyone=True)
    assert may(everyone, "User:ANONYMOUS", Op.READ, Res.TOPIC, "no-acls")  # no ACL on the resource
    assert not may(everyone, "User:alice", Op.READ, Res.TOPIC, "owned")  # the resource has ACLs: not for alice
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_super_users("admin")


def test_decisions_follow_acl_changes(tmp_path):
    a = authorizer(tmp_path, acl(Res.GROUP, "g", "User:alice", Op.READ))
    assert may(a, "User:alice", Op.READ, Res.GROUP, "g")  # cached now
    records, results = a.delete([AclFilter(Res.GROUP, "g", Pat.LITERAL, None, None, Op.ANY, Perm.ANY)])
    assert [len(m) for _, _, m in results] == [1]
    asyncio.run(a.commit(records))
    assert not may(a, "User:alice", Op.READ, Res.GROUP, "g")


def test_the_commit_fast_path_follows_acl_changes(tmp_path):
    """The direct OffsetCommit route's remembered (group, topic) decision is dropped with the
    authorizer's cache when the ACLs change (a DENY added, an ALLOW deleted)."""
    from kafka.protocol.consumer import OffsetCommitRequest

    from kcoord.protocol.api import ApiKey
    from kcoord.server.handlers.routes import ALLOWED_AS_IS

    T = OffsetCommitRequest.OffsetCommitRequestTopic

    def commit(*topics: str) -> OffsetCommitRequest:
        return OffsetCommitRequest(version=8, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                                   group_instance_id=None, topics=[T(name=t, partitions=[]) for t in topics])

    allowed = ALLOWED_AS_IS[ApiKey.OFFSET_COMMIT]
    a = authorizer(tmp_path, acl(Res.GROUP, "g", "User:alice", Op.READ), acl(Res.TOPIC, "t", "User:alice", Op.READ),
                   acl(Res.TOPIC, "u", "User:alice", Op.READ))
    assert allowed(a, "User:alice", HOST, commit("t"), "OffsetCommit")
    assert allowed(a, "User:alice", HOST, commit("t"), "OffsetCommit")  # remembered
    assert allowed(a, "User:alice", HOST, commit("t", "u"), "OffsetCommit")
    assert not allowed(a, "User:bob", HOST, commit("t"), "OffsetCommit")
    assert not allowed(a, "User:alice", HOST, commit("v"), "OffsetCommit")
    records, _ = a.create([acl(Res.TOPIC, "t", "User:alice", Op.READ, Perm.DENY)])
    asyncio.run(a.commit(records))
    assert not allowed(a, "User:alice", HOST, commit("t"), "OffsetCommit")
    assert not allowed(a, "User:alice", HOST, commit("u", "t"), "OffsetCommit")
    assert allowed(a, "User:alice", HOST, commit("u"), "OffsetCommit")
    records, _ = a.delete([AclFilter(Res.GROUP, "g", Pat.LITERAL, None, None, Op.ANY, Perm.ANY)])
    asyncio.run(a.commit(records))
    assert not allowed(a, "User:alice", HOST, commit("u"), "OffsetCommit")


def test_authorize_by_resource_type(tmp_path):
    """InitProducerId's check: WRITE on some topic, a prefixed deny covering the allow revokes it."""
    a = authorizer(tmp_path,
                   acl(Res.TOPIC, "logs", "User:alice", Op.WRITE),
                   acl(Res.TOPIC, "x-", "User:bob", Op.WRITE, pattern=Pat.PREFIXED),
                   acl(Res.TOPIC, "x", "User:bob", Op.WRITE, Perm.DENY, Pat.PREFIXED),
                   acl(Res.TOPIC, "*", "User:carol", Op.WRITE, Perm.DENY))
    assert a.authorize_by_resource_type("User:alice", HOST, Op.WRITE, Res.TOPIC)
    assert not a.authorize_by_resource_type("User:bob", HOST, Op.WRITE, Res.TOPIC)
    assert not a.authorize_by_resource_type("User:carol", HOST, Op.WRITE, Res.TOPIC)
    assert not a.authorize_by_resource_type("User:dave", HOST, Op.WRITE, Res.TOPIC)


def test_filters_match_as_kafka_filters():
    lit = acl(Res.TOPIC, "orders", "User:a", Op.READ)
    pre = acl(Res.TOPIC, "ord", "User:a", Op.READ, pattern=Pat.PREFIXED)
    wild = acl(Res.TOPIC, "*", "User:a", Op.READ)

    def f(name, pattern, **kw) -> AclFilter:
        return AclFilter(kw.get("rtype", Res.TOPIC), name, pattern, kw.get("principal"), kw.get("host"),
                         kw.get("op", Op.ANY), kw.get("perm", Perm.ANY))
    assert [x.matches(y) for x in (f("orders", Pat.MATCH),) for y in (lit, pre, wild)] == [True, True, True]
    assert [f("orders", Pat.ANY).matches(y) for y in (lit, pre, wild)] == [True, False, False]
    assert [f("ord", Pat.PREFIXED).matches(y) for y in (lit, pre, wild)] == [False, True, False]
    assert [f(None, Pat.LITERAL).matches(y) for y in (lit, pre, wild)] == [True, False, True]
    assert not f(None, Pat.ANY, principal="User:b").matches(lit)
    assert not f(None, Pat.ANY, op=Op.WRITE).matches(lit)
    assert f(None, Pat.ANY, rtype=Res.ANY, perm=Perm.ALLOW).matches(lit)


def test_create_validates_as_kafka_and_keeps_one_copy(tmp_path):
    a = Authorizer(tmp_path)
    good = acl(Res.TOPIC, "t", "User:a", Op.READ)
    records, results = a.create([
        good, good,
        acl(Res.CLUSTER, "other", "User:a", Op.ALTER),
        acl(Res.TOPIC, "", "User:a", Op.READ),
        acl(Res.TOPIC, "t", "alice", Op.READ),
        acl(Res.ANY, "t", "User:a", Op.READ),
        acl(Res.TOPIC, "t", "User:a", Op.ANY),
        acl(Res.TOPIC, "t", "User:a", Op.READ, pattern=Pat.MATCH),
        acl(Res.TOPIC, "t", "User:a", Op.READ, perm=Perm.ANY),
    ])
    assert [c for c, _ in results] == [0, 0, 42, 42, 42, 42, 42, 42, 42]
    assert [m for _, m in results][2:] == [
        "The only valid name for the CLUSTER resource is kafka-cluster", "Resource name should not be empty",
        "Could not parse principal from `alice` (no colon is present separating the principal type from the "
        "principal name)", "Invalid resourceType ANY", "Invalid operation ANY", "Invalid patternType MATCH",
        "Invalid permissionType ANY"]
    assert len(records) == 1  # the same ACL twice is one ACL


def test_acls_are_durable(tmp_path):
    a = authorizer(tmp_path, acl(Res.TOPIC, "t", "User:a", Op.READ), acl(Res.GROUP, "g-", "User:a", Op.READ,
                                                                         pattern=Pat.PREFIXED))
    again = Authorizer(tmp_path)
    assert again.load() == 2
    assert sorted(again.acls.values(), key=str) == sorted(a.acls.values(), key=str)
    assert may(again, "User:a", Op.READ, Res.GROUP, "g-1")


def test_every_served_api_has_an_authorization_policy():
    """A new API must say who may call it (the policy of its route, server/handlers/routes.py), or it is
    refused while an authorizer is configured."""
    missing = sorted(int(k) for k in HANDLERS if k not in POLICIES)
    assert not missing, f"API keys without an authorization policy: {missing}"
