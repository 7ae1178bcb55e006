#!/bin/sh
# Kafka's kafka-share-groups.sh, served by kcoord (server/kafkatools), for tools that run
# $KAFKA_PATH/bin/kafka-share-groups.sh: the source tree's venv when there is one, else kcoord on PATH.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -x "$root/.venv/bin/kcoord" ]; then
  exec "$root/.venv/bin/kcoord" share-groups "$@"
fi
exec kcoord share-groups "$@"
