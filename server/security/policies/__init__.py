"""Each API's authorization policy, one module per family of APIs (groups, data, topics,
configs, txn, cluster). A route names its policy as "module.name" (server/handlers/routes.py);
server/security/guard.py says what a policy is and puts it in front of the handler."""
