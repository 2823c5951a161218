# jetpy: two set-up commands, `make run` and `make test`; both install what they need.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: run test lint typecheck layers pytest reference browser bench clean demo java-check

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

# Debian's nats-server is the reference for the differential tests (skipped visibly without it).
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

pytest: $(STAMP)
	$(BIN)/pytest -q $(PYTEST_ARGS)

test: $(STAMP) reference browser java-check lint typecheck layers pytest

# jetpy vs nats-server with the same fast Go client, in alternation (see README, Performance).
bench: $(STAMP) reference
	$(BIN)/python scripts/compare_bench.py $(BENCH_ARGS)

# Spark (tests marked `spark`, `make demo`) needs a JVM; without one those tests skip and say why.
java-check:
	@command -v java >/dev/null 2>&1 || test -n "$$JAVA_HOME" || \
	  echo "NOTE: no Java found: the Spark tests will be skipped (install Java 17+, e.g. apt-get install openjdk-17-jre-headless)"

# Seeds 000 and 002 end to end: embedded server, local Spark, then a standalone Spark cluster.
demo: $(STAMP) java-check
	$(BIN)/python examples/demo.py $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
