# The two commands of the README: `make run` and `make test` (which also builds the wheel
# and runs it installed outside the checkout: tests/e2e/test_wheel_install.py).
# `make dist` writes the sdist and the wheel to dist/.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test quick screenshots lint bench dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

run: $(VENV)/.installed
	$(BIN)/fleetcron serve

# The suite runs in two parts at the same time (tests/conftest.py); the target fails if either
# does. The `serial` fault scenarios (tests/fault/) wait out real claim deadlines and leases in
# one pytest process of their own; their report is printed when both parts are done.
# Everything else runs beside them on $(TEST_WORKERS) pytest-xdist workers (tests sharing a
# module- or package-scoped fixture stay on one worker, and the workers get the largest of
# these groups first, the browser tests' among them, then the long single tests, the short
# unit tests last: tests/conftest.py orders them, --no-loadscope-reorder keeps that order)
# at a lower CPU priority (nice $(TEST_NICE)), so the scenarios' scheduler processes get the
# CPU as soon as they wake and their margins hold, while the rest of the suite uses the time
# they spend waiting. `.venv/bin/pytest` alone runs
# everything in one process. Each part prints its 20 slowest tests (`make test DURATIONS=0`: all).
# Honest by default (pyproject.toml, tests/conftest.py): a warning fails its test, and with
# CI (or STRICT_SKIPS) set a skip whose reason is not in ALLOWED_SKIPS fails the run.
#
# Where the time goes, measured, and what made it faster: docs/testing.md. In short, the
# suite is CPU-bound on two cores (a whole run keeps them busy for about 1,150 CPU-s: the
# pytest workers and their children about 720, the fault scenarios' nodes about 140, the
# PostgreSQL servers 140-180), so its wall time is about that divided by two; the serial
# part (about 440-465 s, mostly waiting) ends first. `make test` 508-575 s on 2026-12-07,
# 484-541 s on 2026-12-08.
# Four workers on two cores: a worker often waits (a command, a timeout, PostgreSQL, a
# browser) and the others fill the cores meanwhile; three and four were alike within the noise.
TEST_WORKERS ?= 4
# The fault scenarios mostly wait out real leases and deadlines: two at a time.
SERIAL_WORKERS ?= 2
# How many of the slowest tests each part reports (0: all of them).
DURATIONS ?= 20
TEST_NICE ?= 10

# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE set):
# otherwise every pytest worker rewrites and compiles each test module again (about 5 s of
# CPU per worker) and every process the suite starts (the CLI zygote, schedulers, the fault
# scenarios' nodes) compiles fleetcron from source (about 0.3 s each).
test quick: export PYTHONDONTWRITEBYTECODE :=

# The serial part collects only the directories marked serial (SERIAL_DIRECTORIES in
# tests/conftest.py): its two workers skip collecting the other 4,200 tests (3.5 CPU-s each).
SERIAL_TESTS := tests/fault

test: $(VENV)/.installed
	bash scripts/system-deps.sh
	@. scripts/test-tmpdir.sh; \
	serial_log=$$(mktemp); \
	echo "the fault scenarios (marked serial) run beside the rest; their report comes last"; \
	$(BIN)/pytest -m serial -n $(SERIAL_WORKERS) --dist loadgroup --durations=$(DURATIONS) $(SERIAL_TESTS) > $$serial_log 2>&1 & serial_pid=$$!; \
	nice -n $(TEST_NICE) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder -m "not serial" --durations=$(DURATIONS); \
	parallel=$$?; \
	wait $$serial_pid; serial=$$?; \
	cat $$serial_log; rm -f $$serial_log; \
	test $$parallel -eq 0 && test $$serial -eq 0

# The edit loop, under a minute on two cores: unit tests, the contract tests of the
# executors and the API, and a smoke test of the CLI and of the API, on SQLite. `--quick`
# (tests/conftest.py) leaves out whatever needs PostgreSQL, sshd, a browser or real deadlines.
QUICK_TESTS := tests/unit tests/integration/executors/test_executor_contract.py \
	tests/integration/web/test_schemathesis.py tests/integration/web/test_smoke_api.py \
	tests/e2e/test_smoke_cli.py

# Two workers (the API's fuzzing, a third of the CPU, comes in parts handed out first).
quick: $(VENV)/.installed
	@. scripts/test-tmpdir.sh; \
	$(BIN)/pytest --quick -q -n 2 --dist loadgroup --no-loadscope-reorder $(QUICK_TESTS)

# The browser tests with whole-page screenshots under test-artifacts/screenshots/ (the suite
# keeps only what each page's viewport shows: a whole page costs Chromium ten times more).
screenshots: $(VENV)/.installed
	TEST_SCREENSHOTS=full $(BIN)/pytest -q -n 0 tests/e2e/browser

# The complexity rules (C901, PLR0912, PLR0913, PLR0915, PLR0917) run in
# scripts/complexity_baseline.py, against lint-baseline.json, which may only shrink.
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/python scripts/complexity_baseline.py
	$(BIN)/mypy src/fleetcron
	$(BIN)/mypy tests bench scripts --exclude '^tests/(integration/executors|e2e/browser|fault)/'
	$(BIN)/mypy tests/fault
	MYPYPATH=tests/integration/executors $(BIN)/mypy tests/integration/executors
	MYPYPATH=tests/e2e/browser $(BIN)/mypy tests/e2e/browser


dist: $(VENV)/.installed
	rm -rf dist build
	$(BIN)/python -c "from setuptools import build_meta as b; b.build_sdist('dist')"
	$(BIN)/pip wheel --no-deps --no-build-isolation -q -w dist .

bench: $(VENV)/.installed
	$(BIN)/python bench/cron_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist
