# kcoord: `make run` sets up and runs the server; `make test` sets up and runs every test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TSTAMP := $(VENV)/.installed-test

.PHONY: setup test-setup clients run test test-loaded unit integration bench lint up down clean

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

run: setup
	$(BIN)/kcoord serve $(ARGS)

test: setup clients
	$(BIN)/python -m pytest -q -p no:cacheprovider tests

# The whole suite twice in a row from a fresh clone of HEAD while a CPU-bound process keeps
# one core busy (scripts/test-loaded.sh; results in .cache/loaded/summary.txt).
test-loaded:
	bash scripts/test-loaded.sh

unit: test-setup
	$(BIN)/python -m pytest -q tests/unit tests/property

integration: setup clients
	$(BIN)/python -m pytest -q tests/integration tests/compat

# Every benchmark, each beside its ceiling measured in the same run; writes bench/REPORT.md.
bench: test-setup
	$(BIN)/python bench/report.py

# The same server in Docker (where a Docker engine exists), data in the volume kcoord-data.
up:
	docker compose up -d --build kcoord sidecar

down:
	docker compose down

lint: test-setup
	$(BIN)/ruff check protocol server storage sidecar tests bench scripts examples

clean:
	rm -rf $(VENV) .cache build *.egg-info tests/compat/node/node_modules

# The README's client compatibility matrix, rewritten from an integration run (failures show as FAILED).
.PHONY: compat
compat: setup clients
	$(BIN)/python -m pytest -q tests/integration; rc=$$?; $(BIN)/python scripts/compat_matrix.py && exit $$rc
