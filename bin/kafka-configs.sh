#!/bin/sh
# Kafka's kafka-configs.sh, served by kcoord (server/kafkatools), for tools that run
# $KAFKA_PATH/bin/kafka-configs.sh: the source tree's venv when there is one, else kcoord on PATH.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -x "$root/.venv/bin/kcoord" ]; then
  exec "$root/.venv/bin/kcoord" configs "$@"
fi
exec kcoord configs "$@"
