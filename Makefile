# Two entry points: `make demo` (the main job on local defaults) and `make test`.
# Each creates .venv at the repo root and installs what it needs on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed-%: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[$*]"
	touch $@

# the tests' user-defined statistics plugin (tests/plugin) is installed beside lakestats
$(VENV)/.installed-test: pyproject.toml tests/plugin/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e ".[test]" -e ./tests/plugin
	touch $@

demo: $(VENV)/.installed-demo
	$(BIN)/lakestats demo

# the SAM CLI pins its own dependencies: a venv of its own, for `sam validate --lint` in tests
SAM := .venv-sam/bin/sam
$(SAM):
	$(PYTHON) -m venv .venv-sam
	.venv-sam/bin/pip install --quiet aws-sam-cli

test: $(VENV)/.installed-test $(SAM)
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q tests

bench: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/bench_compute.py
	$(BIN)/python benchmarks/bench_throughput.py
	$(BIN)/python benchmarks/bench_spark.py
	$(BIN)/python benchmarks/bench_quantiles.py
	$(BIN)/python benchmarks/bench_frequencies.py
	$(BIN)/python benchmarks/bench_pruning.py
	$(BIN)/python benchmarks/bench_latency.py
	$(BIN)/python benchmarks/bench_freshness.py
	$(BIN)/python benchmarks/bench_lookups.py

clean:
	rm -rf $(VENV) .venv-sam .demo
