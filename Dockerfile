# kcoord's images (docs/docker.md):
#   docker build -t kcoord --target kcoord .                        the server
#   docker build -t kcoord-compactor --target compactor .           the Spark compaction sidecar
#   docker build -t kcoord-demo-python --target demo-python .       the Python demo clients
# ZooKeeper for the three-node docker-compose.cluster.yml: docker/zookeeper/Dockerfile.
# BASE / COMPACTOR_BASE: any Debian-like image with python3 and its venv module (default
# python:3.12-slim). The compactor installs a Java runtime unless its base has one.
# Offline builds: --build-arg PIP_NO_INDEX=1 --build-arg PIP_FIND_LINKS=/src/wheels with the
# wheels (of the project's dependencies, for the base's Python) in ./wheels of the context.
ARG BASE=python:3.12-slim
ARG COMPACTOR_BASE=python:3.12-slim

# --- the server: a virtual environment built in one stage, copied alone into the next
FROM ${BASE} AS build
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN python3 -m venv /opt/kcoord && /opt/kcoord/bin/pip install -q /src \
 && /opt/kcoord/bin/pip uninstall -q -y pip \
 && find /opt/kcoord -name 'tests' -path '*/site-packages/*/tests' -prune -exec rm -rf {} +

FROM ${BASE} AS kcoord
RUN groupadd --system --gid 1000 kcoord \
 && useradd --system --uid 1000 --gid 1000 --home-dir /data --no-create-home kcoord \
 && mkdir -p /data && chown kcoord:kcoord /data
COPY --from=build /opt/kcoord /opt/kcoord
ENV PATH=/opt/kcoord/bin:$PATH PYTHONUNBUFFERED=1 \
    KAFKA_LOG_DIRS=/data \
    KAFKA_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092
USER kcoord
WORKDIR /data
VOLUME ["/data"]
EXPOSE 9092
# SIGTERM: the server closes its listeners, flushes and fsyncs its logs, then exits
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=5s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python3", "-m", "kcoord.server.healthcheck"]
ENTRYPOINT ["kcoord"]
CMD ["serve"]

# --- the demo clients (examples/python/demo.py, confluent-kafka)
FROM ${BASE} AS demo-build
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN python3 -m venv /opt/demo && /opt/demo/bin/pip install -q confluent-kafka \
 && /opt/demo/bin/pip uninstall -q -y pip

FROM ${BASE} AS demo-python
RUN useradd --system --uid 1000 --user-group demo
COPY --from=demo-build /opt/demo /opt/demo
COPY --from=demo-build /src/examples/python/demo.py /examples/demo.py
ENV PATH=/opt/demo/bin:$PATH PYTHONUNBUFFERED=1
USER demo
ENTRYPOINT ["python3", "/examples/demo.py"]

# --- the compactor: the same project with PySpark, on a base with a Java runtime
FROM ${COMPACTOR_BASE} AS compactor-build
ARG PIP_NO_INDEX
ARG PIP_FIND_LINKS
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN python3 -m venv /opt/kcoord && /opt/kcoord/bin/pip install -q "/src[spark]" \
 && /opt/kcoord/bin/pip uninstall -q -y pip \
 && find /opt/kcoord -name 'tests' -path '*/site-packages/*/tests' -prune -exec rm -rf {} +

FROM ${COMPACTOR_BASE} AS compactor
RUN if ! command -v java >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends default-jre-headless procps \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && groupadd --system --gid 1000 kcoord \
 && useradd --system --uid 1000 --gid 1000 --home-dir /data --no-create-home kcoord \
 && mkdir -p /data && chown kcoord:kcoord /data
COPY --from=compactor-build /opt/kcoord /opt/kcoord
ENV PATH=/opt/kcoord/bin:$PATH PYTHONUNBUFFERED=1 PYSPARK_PYTHON=/opt/kcoord/bin/python3 \
    KAFKA_LOG_DIRS=/data
USER kcoord
WORKDIR /data
VOLUME ["/data"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["kcoord-compact"]
CMD ["/data", "--in-place", "--verify"]
