"""The names of Kafka's internal topics, defined once: every other module imports them from here."""

OFFSETS_TOPIC = "__consumer_offsets"  # the group coordinator's log (server/group/)
TXN_TOPIC = "__transaction_state"  # the transaction coordinator's log (server/txn/)
SHARE_STATE_TOPIC = "__share_group_state"  # the share coordinator's log (server/share/)
