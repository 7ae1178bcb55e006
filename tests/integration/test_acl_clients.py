"""ACLs with real clients: the Admin clients of confluent-kafka, kafka-python and Java manage
ACLs (CreateAcls / DescribeAcls / DeleteAcls); consumers of confluent-kafka and Java are let
into the group and topic their ACLs name and see Kafka's authorization errors (group, topic)
elsewhere. One server: SASL/PLAIN users on one listener, StandardAuthorizer, User:admin super."""
from __future__ import annotations

import json
import time

import pytest
from clientlib import compile_java4, java4_classpath, run, run_java
from conftest import KcoordProcess, free_port, unique

pytestmark = pytest.mark.integration

USERS = {"admin": "admin-Pw0", "alice": "alice-Pw0"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
MESSAGES = 3


class Env:
    def __init__(self, srv: KcoordProcess, sasl_port: int, topic: str, secret: str) -> None:
        self.srv = srv
        self.sasl = f"127.0.0.1:{sasl_port}"
        self.topic = topic
        self.secret = secret

    def conf(self, user: str) -> dict[str, str]:
        return {"bootstrap.servers": self.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                "sasl.username": user, "sasl.password": USERS[user]}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    plain, sasl = free_port(), free_port()
    srv = KcoordProcess(tmp_path_factory.mktemp("acl-clients") / "data", port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
    }).start()
    e = Env(srv, sasl, unique("acl-data"), unique("acl-secret"))
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(e.conf("admin"))
    for f in admin.create_topics([NewTopic(e.topic, 1, 1), NewTopic(e.secret, 1, 1)]).values():
        f.result(30)
    producer = Producer(e.conf("admin"))
    for t in (e.topic, e.secret):
        for i in range(MESSAGES):
            producer.produce(t, value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    # alice: READ on the data topic, READ on the groups prefixed g-alice
    bindings = [AclBinding(ResourceType.TOPIC, e.topic, ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW),
                AclBinding(ResourceType.GROUP, "g-alice", ResourcePatternType.PREFIXED, "User:alice", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)]
    for f in admin.create_acls(bindings).values():
        assert f.result(30) is None
    yield e
    srv.stop()


def test_confluent_kafka_admin_manages_acls(env):
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(env.conf("admin"))
    extra = AclBinding(ResourceType.TOPIC, "tmp-", ResourcePatternType.PREFIXED, "User:bob", "*",
                       AclOperation.WRITE, AclPermissionType.DENY)
    for f in admin.create_acls([extra]).values():
        assert f.result(30) is None
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    listed = admin.describe_acls(everything).result(30)
    assert {(b.restype, b.name, b.principal, b.operation) for b in listed} >= {
        (ResourceType.TOPIC, env.topic, "User:alice", AclOperation.READ),
        (ResourceType.GROUP, "g-alice", "User:alice", AclOperation.READ),
        (ResourceType.TOPIC, "tmp-", "User:bob", AclOperation.WRITE)}
    bobs = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                            AclOperation.ANY, AclPermissionType.ANY)
    deleted = [b for f in admin.delete_acls([bobs]).values() for b in f.result(30)]
    assert [(b.name, b.permission_type) for b in deleted] == [("tmp-", AclPermissionType.DENY)]
    # not a super user: CLUSTER_AUTHORIZATION_FAILED
    from confluent_kafka import KafkaException

    not_super = AdminClient(env.conf("alice"))
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED|Cluster authorization failed"):
        for f in not_super.create_acls([extra]).values():
            f.result(30)
    # librdkafka drops DescribeAcls' top-level error code (it keeps only the message): the
    # client sees no ACLs, and none are shown to it
    assert not_super.describe_acls(everything).result(30) == []


def test_kafka_python_admin_describes_acls(env):
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        KafkaAdminClient,
        ResourcePatternFilter,
    )
    from kafka.admin import ACLResourcePatternType as Pattern
    from kafka.admin import ResourceType as KPResourceType

    admin = KafkaAdminClient(bootstrap_servers=env.sasl, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                             sasl_plain_username="admin", sasl_plain_password=USERS["admin"],
                             request_timeout_ms=20000)
    try:
        acls, error = admin.describe_acls(ACLFilter(principal="User:alice", host=None, operation=ACLOperation.ANY,
                                                    permission_type=ACLPermissionType.ANY,
                                                    resource_pattern=ResourcePatternFilter(
                                                        KPResourceType.ANY, None, Pattern.ANY)))
    finally:
        admin.close()
    assert error.errno == 0
    assert sorted((a.resource_pattern.resource_name, a.resource_pattern.pattern_type) for a in acls) == \
        sorted([(env.topic, Pattern.LITERAL), ("g-alice", Pattern.PREFIXED)])


def _confluent_consume(env, group: str, topic: str) -> tuple[int, list[str], int | None]:
    """(records read, errors seen, the offset committed as the consumer then reads it back)."""
    from confluent_kafka import Consumer, TopicPartition

    errors: list[str] = []
    c = Consumer({**env.conf("alice"), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    n, deadline = 0, time.monotonic() + 40
    while n < MESSAGES and not errors and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error() is not None:
            errors.append(m.error().name())
        else:
            n += 1
    offset = None
    if n:
        c.commit(asynchronous=False)
        offset = c.committed([TopicPartition(topic, 0)], timeout=20)[0].offset
    c.close()
    return n, errors, offset


def test_confluent_kafka_consumers_get_in_only_where_their_acls_say(env):
    assert _confluent_consume(env, unique("g-alice-cf"), env.topic) == (MESSAGES, [], MESSAGES)
    n, errors, _ = _confluent_consume(env, unique("g-bob"), env.topic)
    assert n == 0 and errors[:1] == ["GROUP_AUTHORIZATION_FAILED"], errors
    n, errors, _ = _confluent_consume(env, unique("g-alice-cf"), env.secret)
    assert n == 0 and errors[:1] == ["TOPIC_AUTHORIZATION_FAILED"], errors


@pytest.mark.java
def test_java_consumers_and_admin(env, tmp_path):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="{u}" password="{p}";'

    def props(user: str, expect: str, group: str, topic: str, **extra: str) -> str:
        p = {"bootstrap.servers": env.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.jaas.config": jaas.format(u=user, p=USERS[user]), "group.id": group,
             "kcoord.expect": expect, "kcoord.topic": topic, "kcoord.messages": str(MESSAGES), **extra}
        return "".join(f"{k}={v}\n" for k, v in p.items())

    ok_group = unique("g-alice-java")
    (tmp_path / "1-consume.properties").write_text(props("alice", "consume", ok_group, env.topic))
    (tmp_path / "2-group.properties").write_text(props("alice", "denied", unique("g-bob"), env.topic))
    (tmp_path / "3-topic.properties").write_text(props("alice", "denied", unique("g-alice-j"), env.secret))
    (tmp_path / "4-acls.properties").write_text(props("admin", "acls", "unused", env.topic, **{
        "kcoord.acl.principal": "User:carol", "kcoord.acl.prefix": "carol-"}))
    res = run_java("SecureClient", tmp_path, timeout=180)
    out = {r["name"]: r for r in res.records()}
    assert out.get("1-consume", {}).get("kind") == "consumed", res.describe()
    assert out["1-consume"]["committed"] == str(MESSAGES)
    assert (out.get("2-group", {}).get("kind"), out["2-group"].get("error")) == \
        ("denied", "GroupAuthorizationException"), res.describe()
    assert (out.get("3-topic", {}).get("kind"), out["3-topic"].get("error")) == \
        ("denied", "TopicAuthorizationException"), res.describe()
    assert out.get("4-acls") == {"kind": "acls", "name": "4-acls", "described": "1", "deleted": "1"}, res.describe()


def test_confluent_kafka_transactions_need_their_transactional_id(env):
    """A transactional producer (librdkafka) whose principal may not WRITE its transactional id
    is refused at init_transactions with TRANSACTIONAL_ID_AUTHORIZATION_FAILED; once the ACL is
    added, a producer with the same transactional id commits a transaction with a consumer
    group's offsets."""
    from confluent_kafka import (
        Consumer,
        ConsumerGroupTopicPartitions,
        KafkaException,
        Producer,
        TopicPartition,
    )
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient(env.conf("admin"))
    tid = unique("tx-alice")
    topic_grant = AclBinding(ResourceType.TOPIC, env.topic, ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.WRITE, AclPermissionType.ALLOW)
    txn_grant = AclBinding(ResourceType.TRANSACTIONAL_ID, tid, ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)
    grants = [topic_grant, txn_grant]
    for f in admin.create_acls([topic_grant]).values():
        assert f.result(30) is None
    try:
        refused = Producer({**env.conf("alice"), "transactional.id": tid})
        with pytest.raises(KafkaException) as e:
            refused.init_transactions(30)
        assert e.value.args[0].name() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
        del refused

        for f in admin.create_acls([txn_grant]).values():
            assert f.result(30) is None
        p = Producer({**env.conf("alice"), "transactional.id": tid})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(env.topic, value=b"in a transaction", partition=0)
        group = unique("g-alice-tx")
        consumer = Consumer({**env.conf("alice"), "group.id": group})
        p.send_offsets_to_transaction([TopicPartition(env.topic, 0, 1)], consumer.consumer_group_metadata(), 30)
        consumer.close()
        p.commit_transaction(30)
        # EndTxn is answered once PrepareCommit is durable, as Kafka answers it; the offsets
        # become the group's with the COMMIT marker, written just after
        deadline = time.monotonic() + 30
        while True:
            committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [
                TopicPartition(env.topic, 0)])])[group].result(30)
            if [tp.offset for tp in committed.topic_partitions] == [1] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert [tp.offset for tp in committed.topic_partitions] == [1]
    finally:
        for grant in grants:
            f = AclBindingFilter(grant.restype, grant.name, grant.resource_pattern_type, grant.principal, "*",
                                 grant.operation, grant.permission_type)
            for r in admin.delete_acls([f]).values():
                r.result(30)


@pytest.mark.java
def test_java4_transactions_v2_need_their_transactional_id(env):
    """Java kafka-clients 4.3 on transactions v2 (InitProducerId v5, Produce v12, TxnOffsetCommit
    v5, EndTxn v5): refused at initTransactions without WRITE on its transactional id
    (TransactionalIdAuthorizationException); with it, the transaction commits, ending with the
    epoch bump only an EndTxn v5 makes."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )
    from kafka.protocol.admin.transactions import DescribeTransactionsRequest
    from wire import WireClient

    def transaction() -> dict:
        compile_java4()
        r = run(["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                 "-Dorg.slf4j.simpleLogger.logFile=System.err", "-cp", java4_classpath(), "SecureTxnV2", env.sasl,
                 "alice", USERS["alice"], env.topic, group, tid], timeout=180)
        lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        assert len(lines) == 1, (r.stdout, r.stderr[-3000:])
        return lines[0]

    admin = AdminClient(env.conf("admin"))
    tid, group = unique("tx-alice-j4"), unique("g-alice-j4")
    topic_grant = AclBinding(ResourceType.TOPIC, env.topic, ResourcePatternType.LITERAL, "User:alice", "*",
                             AclOperation.WRITE, AclPermissionType.ALLOW)
    txn_grant = AclBinding(ResourceType.TRANSACTIONAL_ID, tid, ResourcePatternType.LITERAL, "User:alice", "*",
                           AclOperation.WRITE, AclPermissionType.ALLOW)
    for f in admin.create_acls([topic_grant]).values():
        assert f.result(30) is None
    try:
        assert transaction() == {"kind": "refused", "at": "init", "error": "TransactionalIdAuthorizationException"}
        for f in admin.create_acls([txn_grant]).values():
            assert f.result(30) is None
        assert transaction() == {"kind": "committed"}
        committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [
            TopicPartition(env.topic, 0)])])[group].result(30)
        assert [tp.offset for tp in committed.topic_partitions] == [1]
        with WireClient(env.sasl) as c:
            c.authenticate("PLAIN", "admin", USERS["admin"])
            state = c.call(DescribeTransactionsRequest(version=0, transactional_ids=[tid]), 0).transaction_states[0]
        # the first producer id's epoch 0, bumped by the commit's EndTxn v5 (v1 would leave it at 0)
        assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "CompleteCommit", 1)
    finally:
        for grant in (topic_grant, txn_grant):
            f = AclBindingFilter(grant.restype, grant.name, grant.resource_pattern_type, grant.principal, "*",
                                 grant.operation, grant.permission_type)
            for r in admin.delete_acls([f]).values():
                r.result(30)
