# kcoord: `make run` sets up and runs the server; `make test` sets up and runs every test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TSTAMP := $(VENV)/.installed-test

.PHONY: setup test-setup clients zookeeper-setup docker-setup bytecode rdkafka-setup rdkafka-suite run test test-loaded unit integration docker-test bench lint up down cluster-up cluster-down clean

# The server alone: what `make run` needs.
setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $@

# Test tools, the Python Kafka clients and PySpark (the compaction sidecar).
test-setup: $(TSTAMP)

$(TSTAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,spark]'
	touch $@

# Real clients from outside PyPI: kcat and a JDK (apt), kafkajs (npm), the Java client jar.
clients: test-setup
	bash scripts/setup-clients.sh

# Apache ZooKeeper from Debian's package, for the cluster tests and `kcoord cluster`
# (scripts/setup-zookeeper.sh; docs/cluster.md).
zookeeper-setup:
	bash scripts/setup-zookeeper.sh

# Debian's Docker engine, its compose and debootstrap, and the images' Debian-package bases
# (.cache/docker); tests/docker starts and stops its own dockerd (scripts/setup-docker.sh).
docker-setup:
	bash scripts/setup-docker.sh

# librdkafka 2.14.2 and its C test suite, built from Debian's source package into .cache/rdk.
rdkafka-setup:
	bash scripts/setup-rdkafka.sh

run: setup
	$(BIN)/kcoord serve $(ARGS)

# pytest, then librdkafka's own test suite against kcoord (both run; either failing fails).
# pytest (the cluster tests in a second process beside the rest: scripts/run-tests.sh), then
# librdkafka's suite.
test: setup clients zookeeper-setup docker-setup rdkafka-setup bytecode
	@rc=0; PY=$(BIN)/python bash scripts/run-tests.sh || rc=$$?; \
	$(MAKE) --no-print-directory rdkafka-suite ARGS=--check || rc=$$?; exit $$rc

# Every server a test starts imports the project: compiled once here, not per process (the
# machines this runs on may set PYTHONDONTWRITEBYTECODE, which makes each start compile it anew).
bytecode: setup
	@$(BIN)/python -m compileall -q kcoord

# librdkafka's suite against a kcoord it starts; the table in tests/rdkafka/, shown in docs/compatibility.md.
# Both group protocols: every broker test under the classic one, then the consumer-group tests
# again under KIP-848's (RDKAFKA_GROUP_PROTOCOLS=classic runs the first only).
RDKAFKA_GROUP_PROTOCOLS ?= classic consumer
RDKAFKA_JOBS ?= 3
rdkafka-suite: setup clients rdkafka-setup
	@rc=0; for p in $(RDKAFKA_GROUP_PROTOCOLS); do \
	  $(BIN)/python scripts/rdkafka_suite.py run --jobs $(RDKAFKA_JOBS) --group-protocol $$p $(ARGS) || rc=$$?; \
	done; exit $$rc

# The whole suite twice in a row from a fresh clone of HEAD while a CPU-bound process keeps
# one core busy (scripts/test-loaded.sh; results in .cache/loaded/summary.txt).
test-loaded:
	bash scripts/test-loaded.sh

unit: test-setup
	$(BIN)/python -m pytest -q tests/unit tests/property

integration: setup clients zookeeper-setup
	$(BIN)/python -m pytest -q tests/integration tests/compat

# Every benchmark, each beside its ceiling measured in the same run; writes bench/REPORT.md.
bench: test-setup
	$(BIN)/python bench/report.py

# The images built on a local Docker engine and run with their compose files (docs/docker.md).
docker-test: test-setup clients docker-setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -rA tests/docker

# The same server in Docker, data in the volume kcoord-data: `docker compose` where the CLI
# has the plugin, else Debian's docker-compose.
COMPOSE ?= $(shell docker compose version >/dev/null 2>&1 && echo docker compose || echo docker-compose)
up:
	$(COMPOSE) up -d --build kcoord sidecar

down:
	$(COMPOSE) down

# Three nodes and ZooKeeper (docker-compose.cluster.yml; localhost:9092-9094).
cluster-up:
	$(COMPOSE) -f docker-compose.cluster.yml up -d --build

cluster-down:
	$(COMPOSE) -f docker-compose.cluster.yml down

lint: test-setup
	$(BIN)/ruff check protocol server storage sidecar tests bench scripts examples

clean:
	rm -rf $(VENV) .cache build *.egg-info tests/compat/node/node_modules

# docs/compatibility.md's client compatibility matrix, rewritten from an integration run (failures show as FAILED).
.PHONY: compat
compat: setup clients
	$(BIN)/python -m pytest -q tests/integration; rc=$$?; $(BIN)/python scripts/compat_matrix.py && exit $$rc
