#!/usr/bin/env bash
# Kafka's bin/kafka-run-class.sh, as far as librdkafka's test suite uses it: runs a Java class
# with the real Java kafka-clients jar. scripts/rdkafka_suite.py links this into the Kafka home
# it assembles for $KAFKA_PATH (bin/ beside libs/, which holds the jar).
home="$(cd "$(dirname "$0")/.." && pwd)"
exec java -cp "${CLASSPATH:+$CLASSPATH:}$home/libs/*:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-simple.jar" "$@"
