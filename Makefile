# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test lint typecheck bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

run: $(VENV)/.installed
	$(BIN)/fleetcron serve

test: $(VENV)/.installed
	bash scripts/system-deps.sh
	$(BIN)/pytest

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy src/fleetcron


bench: $(VENV)/.installed
	$(BIN)/python bench/cron_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
