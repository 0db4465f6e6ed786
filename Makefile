# dealtrail: two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export DEALTRAIL_PYTHON := $(abspath $(BIN)/python)

.PHONY: demo test install lock lint typecheck schemas docs screenshots control-pictures bench bench-stream bench-engine bench-console bench-reads bench-history bench-control bench-group soak kafka-fetch kafka-up kafka-down kafka-status clean

PIP_VERSION := 26.3

# The locked versions, checked against their hashes, then dealtrail itself without dependencies:
# two installs a month apart are the same program. `make lock` after a change of dependencies.
$(STAMP): pyproject.toml requirements-dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet pip==$(PIP_VERSION)
	$(BIN)/pip install --quiet --require-hashes -r requirements-dev.lock
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

# requirements.lock (what the image installs) and requirements-dev.lock (make install, CI), with
# hashes, for Python 3.11 (the Dockerfile's base image)
LOCK := $(BIN)/pip-compile --quiet --generate-hashes --strip-extras --allow-unsafe --no-emit-index-url \
	--no-emit-find-links --upgrade
lock:
	test -x $(BIN)/pip || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet pip-tools
	$(LOCK) -o requirements.lock pyproject.toml
	$(LOCK) --extra dev -o requirements-dev.lock pyproject.toml

demo: $(STAMP)
	$(BIN)/dealtrail demo --out out

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

schemas: $(STAMP)
	$(BIN)/dealtrail export-schemas --out schemas/json

# docs/settings.md, docs/rules.md and docs/events.md from the code (a test fails while they are stale)
docs: $(STAMP)
	$(BIN)/python -m dealtrail.docgen docs

# docs/img/report.png and docs/img/finding.png from the demo's output (make demo first)
screenshots: $(STAMP)
	$(BIN)/python ops/screenshots.py

control-pictures: $(STAMP)
	$(BIN)/python ops/control_pictures.py

bench: $(STAMP)
	$(BIN)/python bench/bench_audit.py $(BENCH_ARGS)

bench-stream: $(STAMP)
	$(BIN)/python bench/bench_stream.py $(BENCH_STREAM_ARGS)

# The engine as it is, with its state changed in place (an upper bound) and compiled by mypyc,
# on copies of the code: instructions (valgrind) and CPU time per event.
bench-engine: $(STAMP)
	$(BIN)/python bench/engine_variants.py $(BENCH_ENGINE_ARGS)

bench-console: $(STAMP)
	$(BIN)/python bench/bench_console.py $(BENCH_CONSOLE_ARGS)

# What recording a reading in the access log costs each console page (none, deferred, inline),
# and the access-log forwarder's idle round; no broker needed.
bench-reads: $(STAMP)
	$(BIN)/python bench/bench_reads.py $(BENCH_READS_ARGS)

# Report, console pages, API, replica and archive on stores of 1 and 30 days of 8 tables, built
# once into .cache/bench-history/ or $DEALTRAIL_BENCH_CACHE (about 35 minutes for the 30 days here);
# BENCH_HISTORY_ARGS="--days 1" for one.
bench-history: $(STAMP)
	$(BIN)/python bench/bench_history.py $(BENCH_HISTORY_ARGS)

# The control chart's cost on a dealer's and a table's page, over a month of 8 tables (issue 50).
bench-control: $(STAMP)
	$(BIN)/python bench/bench_control.py $(BENCH_CONTROL_ARGS)

# A group of properties (3 stores of the history bench, 30 days each, other seeds, cached beside
# its stores): each property-day's export and the group report; BENCH_GROUP_ARGS="--days 1" for less.
bench-group: $(STAMP)
	$(BIN)/python bench/bench_group.py $(BENCH_GROUP_ARGS)

# Soak: 3,000 events/s for 10 minutes through two workers and the projector (broker up first);
# SOAK_ARGS="--rate 1000 --minutes 2" for a shorter run.
soak: $(STAMP)
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

kafka-fetch:
	ops/kafka/broker fetch

kafka-up: $(STAMP)
	ops/kafka/broker up

kafka-down:
	ops/kafka/broker down

kafka-status: $(STAMP)
	ops/kafka/broker status

clean:
	rm -rf out .pytest_cache .mypy_cache .ruff_cache
