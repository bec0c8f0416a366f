# firebet: the two commands a newcomer needs are `make sim` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# the distribution packages each step needs, installed when missing (.ci/setup-host says what)
SETUP  := .ci/setup-host

.PHONY: sim floor-demo test test-stress lint typecheck bench install-service clean \
	setup-test deb test-deb bench-pi bench-surrender bench-watch soak-reader

$(BIN)/python:
	@PYTHON=$(PYTHON) $(SETUP) python
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

# two floor services on one PostgreSQL (started on a free port), one SIGKILLed mid-stream,
# narrated; then the ingest rate and bytes a record of SQLite and PostgreSQL (docs/floor.md)
.PHONY: floor-ha-demo
floor-ha-demo: setup-test $(STAMP)
	$(BIN)/python bench/floor_ha.py

# the console's pictures in docs/floor.md, made by its browser tests (headless Chromium)
.PHONY: screenshots
screenshots: $(STAMP)
	FIREBET_SCREENSHOTS=docs/images $(BIN)/python -m pytest -q -p no:logging \
		tests/e2e/test_floor_browser.py -k "thirty_tables or table_s_page or shift_figures or off_the_scale or dark_room"

# first the packages the suite needs (mosquitto, chromium, tmux): on a fresh box this installs
# them (as root or through sudo) or stops at once with the command to run
# in parallel workers (pytest-xdist; TEST_WORKERS=1 for one process), the slow tests first
TEST_WORKERS ?= auto
test: setup-test $(STAMP) lint typecheck
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

setup-test:
	@PYTHON=$(PYTHON) $(SETUP) python test

# the suite RUNS times while BUSY (4) busy loops keep every core busy: no test may need luck
RUNS ?= 10
BUSY ?= 4
test-stress: $(STAMP)
	PYTHON=$(BIN)/python BUSY=$(BUSY) TEST_WORKERS=$(TEST_WORKERS) tests/stress.sh $(RUNS) $(PYTEST_ARGS)

# the JSON Schemas of the floor messages and the CLI's JSON, and the console's OpenAPI
# document, made from the code (issue 33)
.PHONY: schemas
schemas: $(STAMP)
	$(BIN)/python -m controller.cli.contract

lint: $(STAMP)
	$(BIN)/ruff check controller drivers tests bench
	$(BIN)/ruff format --check controller drivers tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/engine.py

# the old surrender exploit (issue 30) over 200,000 hands through `firebet replay`
bench-surrender: $(STAMP)
	$(BIN)/python bench/surrender.py --hands 200000

# the service's CPU beside SPEC section 7's budget (a roll, an idle second, start-up, RSS)
.PHONY: bench-cpu profile-roll
bench-cpu: $(STAMP)
	$(BIN)/python bench/cpu.py

# where a roll's CPU goes: firebet run on a pty under cProfile (CPU time, every thread)
profile-roll: $(STAMP)
	$(BIN)/python bench/profile_roll.py

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache *.egg-info build dist

# the Debian package, dist/firebet_<version>_all.deb: the program and its Python packages
# inside, for an offline Raspberry Pi OS (docs/install.md) [DEB_VERSION=... to override]
deb: $(STAMP)
	@$(SETUP) deb
	PYTHON=$(BIN)/python debian/build $(if $(DEB_VERSION),--version $(DEB_VERSION))

# the package installed, upgraded, rolled back, removed and purged with apt in a Debian 12
# chroot (never on this machine's own /etc or /var/lib): what CI runs after `make test`
test-deb: $(STAMP)
	@$(SETUP) deb-test
	PYTHON=$(BIN)/python debian/test-package

# the journal watch's CPU at idle and the ACK's tail while it sweeps, on journals of
# 1,000 to 1,000,000 records (docs/journal.md, "The watch"; about 10 minutes)
bench-watch: $(STAMP)
	$(BIN)/python bench/watch.py

# the service, verify and replay under a CPU quota standing for a Pi Zero 2 W (root)
bench-pi: $(STAMP)
	$(BIN)/python bench/pi_speed.py

# reader protocol 3 on a hostile channel, long: prints its seed and figures (issue 29);
# SOAK_ARGS=--service: through a real firebet run on a pty (kill -9, unplug, replays)
soak-reader: $(STAMP)
	$(BIN)/python bench/soak_reader.py $(SOAK_ARGS)

# install or upgrade the systemd service on the Pi (root): make install-service [INSTALL_FLAGS=--dry-run]
install-service:
	@if [ "$$(id -u)" = 0 ]; then systemd/install.sh $(INSTALL_FLAGS); else sudo systemd/install.sh $(INSTALL_FLAGS); fi
