"""``firebet run`` imports only what the service needs at start-up (issue 31; SPEC section 7:
start-up to READY at most 1 s of CPU with no bytecode cache, and every module imported is
compiled then). The floor link (paho), the metrics file (prometheus_client), the parallel
check's process pool, the simulated reader, the console's terminal (rich) and
``importlib.resources`` are loaded only by the commands and settings that use them; a new
import on the service's path must fit the budget below or be made lazy."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import ROOT

# the modules `firebet run` had imported before the service starts (232 when this was set)
MODULE_BUDGET = 245
NEVER_AT_START = (
    "paho",  # the floor link: only when [floor] names a broker
    "controller.link.link",
    "controller.wire.mqtt",
    "multiprocessing",  # journal verify's pool and the recall worker's pipes
    "concurrent.futures.process",
    "importlib.resources",  # the bundled config is a folder on disk
    "drivers.sim_reader",  # only with --simulated-reader
    "controller.cli.sim_device",  # the bench device's op: only on a bench's socket
    "rich",  # a terminal's tables, never the service
    "prometheus_client",  # only with [metrics] textfile_dir
    "controller.service.textfile",
)

PROBE = """
import json, sys
import controller.cli, controller.cli.run
print(json.dumps(sorted(sys.modules)))
"""


def test_firebet_run_imports_only_what_the_service_needs() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout)
    loaded = [
        m for m in modules for name in NEVER_AT_START if m == name or m.startswith(name + ".")
    ]
    assert loaded == [], f"imported at the service's start-up: {loaded}"
    assert len(modules) <= MODULE_BUDGET, (
        f"firebet run imports {len(modules)} modules, over its budget of {MODULE_BUDGET}: "
        "import what only some commands need inside them (SPEC section 7, start-up CPU)"
    )
