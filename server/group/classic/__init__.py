"""The classic group type: JoinGroup / SyncGroup / Heartbeat / LeaveGroup groups whose
members assign partitions themselves (Kafka's ClassicGroup), stored as GroupMetadata records."""
