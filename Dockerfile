# kcoord: the coordinator server, plus (target "compactor") the Spark compaction job, which
# also runs `kcoord sidecar` (docker-compose.yml's sidecar service).
#   docker build -t kcoord .                       # server image
#   docker build -t kcoord-compactor --target compactor .
FROM python:3.11-slim AS kcoord
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY protocol ./protocol
COPY server ./server
COPY storage ./storage
COPY sidecar ./sidecar
RUN pip install .
VOLUME ["/data"]
EXPOSE 9092
ENTRYPOINT ["kcoord"]
CMD ["serve", "--override", "log.dirs=/data", \
     "--override", "listeners=PLAINTEXT://0.0.0.0:9092", \
     "--override", "advertised.listeners=PLAINTEXT://localhost:9092"]

# The compactor: the same code with pyspark and a Java 17 runtime (Spark's JVM).
FROM kcoord AS compactor
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/* \
 && pip install ".[spark]"
ENV PYSPARK_PYTHON=python3
ENTRYPOINT ["kcoord-compact"]
CMD ["/data", "--in-place", "--verify"]
