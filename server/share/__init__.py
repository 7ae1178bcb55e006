"""Share partitions (KIP-932): what serves records to share consumers (manager.py), their sessions (sessions.py) and durable state in __share_group_state (state.py)."""
