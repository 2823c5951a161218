# jetpy: two set-up commands, `make run` and `make test`; both install what they need.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint typecheck layers pytest reference browser bench clean demo java-check test-backup-1g raft-sim raft-bench chaos

$(STAMP): pyproject.toml setup.py src/jetpy-spark-python.pth
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@# an editable install skips the wheel's top-level .pth (see setup.py): put it in place
	cp src/jetpy-spark-python.pth "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/"
	@touch $(STAMP)

# The server on 127.0.0.1:4222, JetStream on, file store under ./data, monitoring on 8222.
run: $(STAMP)
	$(BIN)/jetpy-server -a 127.0.0.1 -p 4222 -m 8222 -js -sd ./data

# Debian's nats-server and Go with Debian's nats.go: references for the differential tests (skipped visibly without).
reference:
	@bash scripts/install-reference.sh || true

# Debian's Chromium and chromedriver for the dashboard's browser test (skipped visibly without).
browser:
	@bash scripts/install-browser.sh || true

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts examples
	$(BIN)/ruff format --check src tests scripts examples

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

# The suite runs on PYTEST_WORKERS processes (pytest-xdist): most tests wait on servers, timers
# and restarts rather than compute, so more workers than cores. tests/conftest.py groups what must
# share one worker. One test serially: make pytest PYTEST_ARGS='tests/x.py -n0'
PYTEST_WORKERS ?= 3
pytest: $(STAMP)
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

test: $(STAMP) reference browser java-check lint typecheck layers pytest

# A 1 GiB stream backed up and restored, every message compared (`make test` runs a 48 MiB slice;
# this one needs ~4 GB of free disk under /tmp and about a minute).
test-backup-1g: $(STAMP)
	JETPY_BACKUP_1G=1 $(BIN)/pytest -q -s tests/integration/test_backup_large.py -k 1GiB

# jetpy vs nats-server with the same fast Go client, in alternation (see README, Performance).
bench: $(STAMP) reference
	$(BIN)/python scripts/compare_bench.py $(BENCH_ARGS)

# The consumer fault suite's long runs (`make test` runs a fast slice of the same tests): kill -9
# under consume with AckSync, damaged or deleted consumer files; JETPY_FAULT_RUNS=N for more.
.PHONY: faults-consumer
faults-consumer: $(STAMP)
	JETPY_FAULT_RUNS=$${JETPY_FAULT_RUNS:-10} $(BIN)/pytest -q -s --timeout=3600 tests/faults/test_consumer_*.py

# The Raft simulation over many seeds (CI runs a 2,400-seed slice in tests/raft/test_sim.py);
# failing seeds are printed with their plan: replay one with `python -m tests.raft.sim --seed N -v`.
SEEDS ?= 100000
START ?= 0
raft-sim: $(STAMP)
	$(BIN)/python -m tests.raft.sim --seeds $(SEEDS) --start $(START)
	$(BIN)/python -m tests.raft.sim --seeds $$(( $(SEEDS) / 5 )) --start $(START) --storm

# Raft library throughput (entries per CPU second through the simulation, the library alone, and
# on disk); see the README's Raft section.
raft-bench: $(STAMP)
	$(BIN)/python -m tests.raft.bench_raft

# The fault suite's long runs (`make test` runs a fast slice of the same tests): kill -9 under
# publish, random and targeted damage to every stream file, a full disk; JETPY_FAULT_RUNS=N.
.PHONY: faults
faults: $(STAMP)
	JETPY_FAULT_RUNS=$${JETPY_FAULT_RUNS:-10} $(BIN)/pytest -q --timeout=3600 tests/faults

# The fault harness (tests/chaos, see README's fault harness section): three then five servers of
# the replicated test service under every fault, then the same faults on three then five clustered
# JetStream servers (a replicated stream and KV bucket, chaos/jsrun.py), then a replicated JetStream
# consumer under kill -9 (chaos/js_consumers.py), CHAOS_SECONDS of faults each (about seven minutes
# in all by default); CHAOS_SECONDS=600 for long runs, CHAOS_SEED=N to replay a run, CHAOS_FAULTS=a,b
# to choose the faults. Each run prints its report and where report.json is; it fails on any loss.
CHAOS_SECONDS ?= 60
CHAOS_SEED ?=
CHAOS_FAULTS ?=
CHAOS_ARGS = --duration $(CHAOS_SECONDS) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED)) $(if $(CHAOS_FAULTS),--faults $(CHAOS_FAULTS))
chaos: $(STAMP)
	cd tests && ../$(BIN)/python -m chaos.run --size 3 $(CHAOS_ARGS)
	cd tests && ../$(BIN)/python -m chaos.run --size 5 $(CHAOS_ARGS)
	cd tests && ../$(BIN)/python -m chaos.jsrun --size 3 $(CHAOS_ARGS)
	cd tests && ../$(BIN)/python -m chaos.jsrun --size 5 $(CHAOS_ARGS)
	cd tests && ../$(BIN)/python -m chaos.js_consumers --duration $(CHAOS_SECONDS) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

# Spark (tests marked `spark`, `make demo`) needs a JVM; without one those tests skip and say why.
java-check:
	@command -v java >/dev/null 2>&1 || test -n "$$JAVA_HOME" || \
	  echo "NOTE: no Java found: the Spark tests will be skipped (install Java 17+, e.g. apt-get install openjdk-17-jre-headless)"

# Seeds 000 and 002 end to end: embedded server, local Spark, then a standalone Spark cluster.
demo: $(STAMP) java-check
	$(BIN)/python examples/demo.py $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
