#!/bin/sh
# Kafka's kafka-topics.sh, served by kcoord (server/kafkatools), for tools that run
# $KAFKA_PATH/bin/kafka-topics.sh: the source tree's venv when there is one, else kcoord on PATH.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -x "$root/.venv/bin/kcoord" ]; then
  exec "$root/.venv/bin/kcoord" topics "$@"
fi
exec kcoord topics "$@"
