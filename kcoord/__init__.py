"""kcoord: a Kafka-protocol-compatible consumer-group coordinator (and small broker).

The one import package of the distribution. Its parts keep the repository's layout:
kcoord.server (server/), kcoord.protocol (protocol/), kcoord.storage (storage/),
kcoord.sidecar (sidecar/), and kcoord.testing, the pytest plugin. In the repository those
four are symbolic links to the top-level folders; the wheel holds them as folders."""
