"""``firebet run`` imports only what the service needs before READY (issue 31; SPEC section 7:
start-up to READY at most 1 s of CPU with no bytecode cache, and every module imported is
compiled then). The floor link (paho), the metrics file (prometheus_client), the parallel
check's process pool, the simulated reader, a terminal's tables (rich), the floor console
and every other command's module are loaded only by the commands and settings that use
them; a new import on the service's path must fit the budget below or be made lazy.

Each test starts the real entry point (``controller.cli.main``) in a process of its own and
takes ``sys.modules`` at the moment the service tells systemd it is ready, on the thread
that tells it (before the full check's thread, which imports what it needs after READY)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import COMMAND_MODULES
from tests.support import PROCESS_DEADLINE_S, ROOT, wait_for

# sys.modules at READY, counted when this was set (4 Dec 2026, Python 3.11): 301 on a
# reader's serial port, 305 with the simulated reader (gpiozero and colorzero bring 27,
# the interpreter's own start 60 or so)
MODULE_BUDGET = 315
NEVER_AT_START = (
    "paho",  # the floor link: only when [floor] names a broker
    "controller.link.link",
    "controller.wire.mqtt",
    "multiprocessing",  # journal verify's pool (the recall workers' pipes are recall.Pipe)
    "concurrent.futures.process",
    "ctypes",  # the recall worker's death signal: the worker's own
    "difflib",  # the "did you mean" of a mistyped option
    "rich",  # a terminal's tables, never the service
    "prometheus_client",  # only with [metrics] textfile_dir
    "controller.service.textfile",
    "controller.floor",  # the floor console and its web stack
    "starlette",
    "uvicorn",
    "jinja2",
    "psycopg",
    "anyio",
    "jsonschema",  # the contract's schemas: the suite's, never the service's
    "shtab",  # the completion and man page generators
    "argparse_manpage",
    "controller.cli.contract",
    "controller.cli.generated",
    "http",
    "urllib.request",
    *(m for m in COMMAND_MODULES if m != "controller.cli.run"),  # other commands' modules
)
ON_THE_READERS_PORT = ("drivers.sim_reader", "controller.cli.sim_device")  # the bench's only

# runs firebet's entry point; writes sys.modules to argv[1] when the service is ready
AT_READY = """
import json, sys
from controller.service import notify

def ready(tell=notify.ready):
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
    tell()

notify.ready = ready
from controller.cli import main
raise SystemExit(main(sys.argv[2:]))
"""


def modules_at_ready(tmp_path: Path, *reader: str) -> list[str]:
    """``firebet run`` with ``reader``'s arguments (mock pins, a fresh state directory):
    the modules it had imported when it became ready; then it is stopped."""
    found = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    command = [
        sys.executable, "-c", AT_READY, str(found), "run", *reader,
        "--pin-factory", "mock", "--state-dir", str(tmp_path / "state"),
    ]  # fmt: skip
    with (tmp_path / "service.log").open("w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
    try:
        wait_for(lambda: _complete(found) or proc.poll() is not None, what="READY")
        assert _complete(found), (tmp_path / "service.log").read_text()
        modules: list[str] = json.loads(found.read_text())
        return modules
    finally:
        proc.terminate()
        proc.wait(timeout=PROCESS_DEADLINE_S)


def _complete(path: Path) -> bool:
    """Whether ``path`` holds the whole module list (it is written while this reads it)."""
    try:
        json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return True


def loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    """The ``modules`` that are one of ``names`` or inside one of them."""
    return [m for m in modules if any(m == n or m.startswith(n + ".") for n in names)]


def assert_within_budget(modules: list[str], never: tuple[str, ...]) -> None:
    early = loaded(modules, never)
    assert not early, f"imported before READY: {early} (import them where they are used)"
    assert len(modules) <= MODULE_BUDGET, (
        f"firebet run imports {len(modules)} modules before READY, over its budget of "
        f"{MODULE_BUDGET}: import what only some commands or settings need where they use "
        "it (SPEC section 7, start-up CPU)"
    )


@pytest.mark.slow
def test_the_service_on_a_readers_port_imports_only_what_it_needs(tmp_path: Path) -> None:
    master, slave = os.openpty()  # the reader's line, silent: READY comes without it
    try:
        modules = modules_at_ready(tmp_path, "--serial", os.ttyname(slave))
    finally:
        os.close(slave)
        os.close(master)
    assert "drivers.serial_reader" in modules and "gpiozero" in modules  # the probe saw it
    assert_within_budget(modules, NEVER_AT_START + ON_THE_READERS_PORT)


@pytest.mark.slow
def test_the_service_on_the_simulated_reader_imports_only_what_it_needs(
    tmp_path: Path,
) -> None:
    modules = modules_at_ready(tmp_path, "--simulated-reader")
    assert "drivers.sim_reader" in modules
    assert_within_budget(modules, NEVER_AT_START)


PROBE = """
import contextlib, io, json, sys
from controller.cli import main
with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(json.dumps(sorted(sys.modules)))
"""


def modules_of(*words: str) -> list[str]:
    """The modules ``firebet WORDS`` had imported when it returned (its output dropped)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *words],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PROCESS_DEADLINE_S,
    )
    modules: list[str] = json.loads(done.stdout)
    assert "controller.cli" in modules, done.stderr
    return modules


@pytest.mark.parametrize("option", ["--version", "--contract-version"])
def test_the_version_options_load_no_command(option: str) -> None:
    """``firebet --version`` had loaded every command's module (the floor console's web
    stack too): four times the CPU of ``firebet status --help``."""
    assert loaded(modules_of(option), COMMAND_MODULES) == []


@pytest.mark.parametrize(
    "words", [["status", "--json"], ["bet", "1", "5", "--json"], ["status", "--help"]]
)
def test_the_dealers_commands_load_neither_rich_nor_the_journal(
    words: list[str], tmp_path: Path
) -> None:
    """A script's ``status --json`` or ``bet`` prints words (no service here: it says so);
    only the table drawn (``status`` without ``--json``, ``--watch``) loads rich, and only a
    command that reads the journal (or ``--verbose``, which names its key) loads it."""
    modules = modules_of(*words, "--socket", str(tmp_path / "control.sock"))
    assert "controller.cli.dealer" in modules
    drawing = ("rich", "controller.cli.display", "controller.cli.watch")
    journal = ("controller.journal", "controller.core.engine", "transitions", "sqlite3")
    assert loaded(modules, drawing + journal) == []
