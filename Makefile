# Each target sets itself up on a fresh machine: it creates .venv and installs fathom into it.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# LangGraph's development server in its own environment (it is Elastic-licensed, so never a
# dependency of fathom): tests/server runs the same client-side tests against it and against
# `fathom serve`. It loads the scripted graphs of tests/server/deploy, which import fathom.
LGDEV_VENV := benchmarks/.venv-langgraph-dev
LGDEV_STAMP := $(LGDEV_VENV)/.installed
# The reference implementation (deepagents) in its own environment: the benchmarks compare
# against it, and tests/test_async_interop_reference.py runs its async subagents against fathom.
REF_VENV := benchmarks/.venv-deepagents
REF_STAMP := $(REF_VENV)/.installed
# Arize Phoenix, an OpenTelemetry collector and trace viewer, in its own environment (its
# pinned dependencies are many): tests/tracing/test_phoenix.py sends fathom's spans to it.
PHOENIX_VENV := benchmarks/.venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed

.PHONY: test demo lint typecheck clean bench flake

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,openai,anthropic]'
	touch $(STAMP)

test: $(STAMP) $(LGDEV_STAMP) $(REF_STAMP) $(PHOENIX_STAMP)
	$(BIN)/ruff check src tests examples
	$(BIN)/basedpyright
	$(BIN)/pytest -q -n auto -p randomly; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

# The flake hunt: the whole suite N times (default 3), each run in a new random order with a
# busy loop on every core; it ends with every test that failed in any run, with the
# random-order seeds that replay it: `.venv/bin/pytest -n auto -p randomly --randomly-seed=N`.
N ?= 3
flake: $(STAMP) $(LGDEV_STAMP) $(REF_STAMP) $(PHOENIX_STAMP)
	$(BIN)/python tests/flake_hunt.py --runs $(N)

demo: $(STAMP)
	$(BIN)/fathom demo
	$(BIN)/fathom demo --server

lint: $(STAMP)
	$(BIN)/ruff check src tests examples

# basedpyright, configured in pyproject.toml ([tool.basedpyright]: src/, standard mode).
typecheck: $(STAMP)
	$(BIN)/basedpyright

# Benchmarks: fathom runs in .venv; the reference implementation (deepagents) runs in its own
# environment, created once. benchmarks/bench.py lists the two-sided benchmarks it runs.
$(REF_STAMP): Makefile
	$(PYTHON) -m venv $(REF_VENV)
	$(REF_VENV)/bin/pip install -q 'deepagents[quickjs,video]==0.7.32' langgraph-checkpoint-sqlite pytest pytest-asyncio
	touch $(REF_STAMP)

$(LGDEV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(LGDEV_VENV)
	$(LGDEV_VENV)/bin/pip install -q 'langgraph-cli[inmem]==0.4.40' -e .
	touch $(LGDEV_STAMP)

$(PHOENIX_STAMP):
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/pip install -q arize-phoenix==20.26.1
	touch $(PHOENIX_STAMP)

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,openai,anthropic,bench]'
	touch $(BENCH_STAMP)

# One table with both sides (benchmarks/bench.py); then the sandbox's cost per command.
bench: $(STAMP) $(BENCH_STAMP) $(REF_STAMP) $(LGDEV_STAMP)
	$(BIN)/python benchmarks/bench.py
	$(BIN)/python benchmarks/sandbox.py

clean:
	rm -rf $(VENV) $(REF_VENV) $(LGDEV_VENV) $(PHOENIX_VENV) build *.egg-info src/*.egg-info
