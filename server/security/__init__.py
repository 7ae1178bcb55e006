"""Security: TLS, SASL (PLAIN, SCRAM), principals and the ACL authorizer, with Kafka's names.

    settings.py     the settings (Kafka's names, defaults, which ones are secrets)
    principal.py    KafkaPrincipal, client certificate DN -> principal (ssl.principal.mapping.rules)
    tls.py          a listener's SSLContext from PEM keystore / truststore settings
    jaas.py         sasl.jaas.config parsing (PLAIN users: user_<name>="<password>")
    plain.py        the SASL/PLAIN server
    scram.py        SCRAM-SHA-256/512 (RFC 5802/7677): messages, the server, credentials
    sasl.py         a connection's SASL authentication: one transition table (Kafka's SaslServerAuthenticator)
    store.py        durable JSON state (SCRAM credentials, ACLs): replayed change records, atomic writes
    credentials.py  the SCRAM credential store (AlterUserScramCredentials / DescribeUserScramCredentials)
    acl.py          ACL bindings and filters (Kafka's resource types, operations, pattern types)
    authorizer.py   StandardAuthorizer: super.users, deny before allow, prefixed/literal/wildcard
    guard.py        what a policy is, and the policy put in front of a handler by the dispatcher
    policies/       each API's authorization policy (named by its route), one module per family
"""
