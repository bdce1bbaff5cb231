# Two entry points: `make demo` (the main job on local defaults) and `make test`
# (`make test-fast`: ruff and the unit tests alone, for the edit loop).
# Each creates .venv at the repo root and installs what it needs on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast lint-imports bench clean chromium jar

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

# localstack, for the serverless flow's test on localstack (the tests start it on a free port):
# 4.13.1 is its last release for Python 3.11, and newer dependencies break it, so they are
# resolved as of its release date, in a venv of its own
LOCALSTACK := .localstack-venv/.installed
$(LOCALSTACK):
	$(PYTHON) -m venv .localstack-venv
	.localstack-venv/bin/pip install --quiet uv
	.localstack-venv/bin/uv pip install --quiet -p .localstack-venv/bin/python \
		--exclude-newer 2026-02-03T00:00:00Z 'localstack-core[runtime]==4.13.1'
	touch $@

# Debian's Chromium, for the report's tests in a headless browser (apt-get, as root or sudo)
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium: $(CHROMIUM)
$(CHROMIUM):
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends \
		chromium >/dev/null || { $(SUDO) apt-get update -q >/dev/null && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q \
		--no-install-recommends chromium >/dev/null; }

# the `lakestats` Spark data source's jar, compiled against the installed PySpark with the
# Scala compiler its jars include, on the Java Spark runs on (spark_bridge/jar.py)
jar: $(VENV)/.installed-test
	$(BIN)/python -c "from lakestats.spark_bridge.jar import jar_path; print(jar_path())"

test: $(VENV)/.installed-test $(SAM) $(LOCALSTACK) $(CHROMIUM) jar
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=20 tests

# the edit loop: ruff, then the unit tests only (no service, no Spark, nothing slow; among
# them import-linter's layer contracts, tests/test_architecture.py);
# markers select the rest: -m services, -m spark, -m slow
test-fast: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q tests -m "unit and not slow"

# import-linter's contracts (pyproject.toml) over the repository, which reads as the installed
# package: lakestats/core links ../core, and so on
lint-imports: $(VENV)/.installed-test
	$(BIN)/lint-imports

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
	$(BIN)/python benchmarks/bench_exits.py
	$(BIN)/python benchmarks/bench_scale.py
	$(BIN)/python benchmarks/bench_source.py
	$(MAKE) chromium
	$(BIN)/python benchmarks/bench_report.py

clean:
	rm -rf $(VENV) .venv-sam .localstack-venv .demo
