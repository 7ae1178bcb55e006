"""Client quotas as Kafka keeps and enforces them (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546):

- entities.py: quota entities (user, client-id, ip and their defaults), the keys each accepts,
  Kafka's validation of AlterClientQuotas and of DescribeClientQuotas filters;
- store.py: the quotas, kept durably as Kafka's ClientQuotaRecords (fsynced before an answer);
- rate.py: Kafka's sampled rate (quota.window.num windows of quota.window.size.seconds);
- manager.py: which quota applies to a (user, client id) (ClientQuotaManager's precedence),
  recording and the throttle time;
- gate.py: the dispatcher's quota path (on only while a user or client-id quota exists):
  throttle_time_ms in the answer, the connection muted for that time.
"""
