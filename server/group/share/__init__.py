"""Share groups (KIP-932), the third group type: so far the share-partition state machine
(partition.py) and the durable record codecs (protocol/share_records.py). Not composed into the
coordinator and not served yet (docs/share-groups.md)."""
