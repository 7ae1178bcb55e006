"""Kafka's command-line tools for topics, configs and consumer groups (kafka-topics.sh,
kafka-configs.sh, kafka-consumer-groups.sh): the same flags, output and exit codes as Kafka
3.9's, talking to any Kafka-protocol server over the wire (server/kafkatools/wire.py).

Run as `kcoord topics|configs|consumer-groups ...` or through the same-named wrappers the
package installs (`kafka-topics.sh`, ...; and bin/ in the source tree)."""

# what --version prints: the Kafka release whose tools these follow
KAFKA_VERSION = "3.9.0 (kcoord)"
