"""Share groups (KIP-932), the third group type: the group coordinator's side (membership, the
`simple` assignor, epochs, sessions, the ShareGroup* records of __consumer_offsets:
coordinator.py and the modules beside it) and the share-partition state machine (partition.py).
docs/share-groups.md says what is served."""
