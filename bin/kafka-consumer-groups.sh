#!/bin/sh
# Kafka's kafka-consumer-groups.sh, served by kcoord (server/kafkatools), for tools that run
# $KAFKA_PATH/bin/kafka-consumer-groups.sh: the source tree's venv when there is one, else kcoord on PATH.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -x "$root/.venv/bin/kcoord" ]; then
  exec "$root/.venv/bin/kcoord" consumer-groups "$@"
fi
exec kcoord consumer-groups "$@"
