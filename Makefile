# firebet: the two commands a newcomer needs are `make sim` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: sim floor-demo test test-stress lint typecheck bench install-service clean

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) (Python 3.11): install it or run make PYTHON=python3"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	@touch $(STAMP)

sim: $(STAMP)
	$(BIN)/firebet sim

# mosquitto, six simulated tables and the floor console; prints the console's address
floor-demo: $(STAMP)
	$(BIN)/python bench/floor_demo.py

test: $(STAMP) lint typecheck
	$(BIN)/python -m pytest

# the suite RUNS times while two busy loops keep both cores busy: no test may need luck
RUNS ?= 10
test-stress: $(STAMP)
	PYTHON=$(BIN)/python tests/stress.sh $(RUNS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check controller drivers tests bench
	$(BIN)/ruff format --check controller drivers tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/engine.py

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache *.egg-info

# install or upgrade the systemd service on the Pi (root): make install-service [INSTALL_FLAGS=--dry-run]
install-service:
	@if [ "$$(id -u)" = 0 ]; then systemd/install.sh $(INSTALL_FLAGS); else sudo systemd/install.sh $(INSTALL_FLAGS); fi
