"""Privileges on the control socket, end to end with real peers of other users.

The service runs here as root; the clients are real processes running as
``nobody``, with the dealer group or without it. Needs root to switch users.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.core.config import load_config
from tests.isolation import sitecustomize as fence
from tests.support import FENCE_DIR, ROOT, TEST_CONFIG, RunningTable, table_running, wait_for

NOBODY = 65534
NOGROUP = 65534  # nobody's own group: the dealer group in this test's config
OTHER_GROUP = 1  # "daemon": neither dealer nor technician

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


SITE = [p for p in sys.path if p.endswith("site-packages")]


def _interpreter() -> str | None:
    """A Python 3.11 that ``nobody`` may run: ours when its path is open to all, else Debian's
    (ours may live under /root); the venv's pure-Python packages come in on PYTHONPATH."""
    for candidate in (sys.executable, "/usr/bin/python3.11"):
        try:
            probe = subprocess.run(
                [candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 11)"],
                user=NOBODY,
                group=OTHER_GROUP,
                extra_groups=[],
                cwd="/",
                capture_output=True,
                timeout=30,
            )
        except OSError:
            continue
        if probe.returncode == 0:
            return candidate
    return None


PYTHON = _interpreter() if os.geteuid() == 0 else None


def as_user(gid: int, *args: str, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``firebet ARGS`` as ``nobody`` in group ``gid``, with the test's own configuration
    (never the host's /etc/firebet, which nobody may not read) and the suite's fence."""
    assert PYTHON is not None
    return subprocess.run(
        [PYTHON, "-m", "controller", *args],
        capture_output=True,
        text=True,
        user=NOBODY,
        group=gid,
        extra_groups=[],
        cwd="/",
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join([str(FENCE_DIR), str(ROOT), *SITE]),
            fence.ENV: "1",
            "FIREBET_CONFIG": str(config or _CLIENT_CONFIG),
        },
        timeout=30,
    )


# the clients' configuration before a test's table has its own (the --version probe)
_CLIENT_CONFIG = ROOT / "config" / "table.toml"


@pytest.fixture
def table() -> Iterator[tuple[RunningTable, Path]]:
    if PYTHON is None:
        pytest.skip("no Python 3.11 that the unprivileged user may run")
    probe = as_user(OTHER_GROUP, "--version")
    if probe.returncode != 0:
        pytest.skip(f"the unprivileged user cannot run this checkout: {probe.stderr[-200:]}")
    top = Path(tempfile.mkdtemp(prefix="firebet-roles-"))
    top.chmod(0o755)  # the clients must reach the socket
    config = top / "table.toml"
    config.write_text(
        '[control]\ndealer_group = "nogroup"\ntechnician_group = "root"\n' + TEST_CONFIG
    )
    with table_running(top / "state", top / "control.sock", load_config(config)) as t:
        (top / "control.sock").chmod(0o666)  # stands in for membership of the service's group
        yield t, top
    shutil.rmtree(top, ignore_errors=True)


def test_an_unprivileged_peer_reads_status_but_cannot_void(
    table: tuple[RunningTable, Path],
) -> None:
    _, top = table
    sock = str(top / "control.sock")
    status = as_user(OTHER_GROUP, "status", "--json", "--socket", sock, config=top / "table.toml")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["mode"] == "running"
    void = as_user(OTHER_GROUP, "void", "--socket", sock, config=top / "table.toml")
    assert void.returncode == 1
    assert "permission denied: nobody is not in nogroup or root (needed for void)" in void.stderr


def test_a_dealer_acts_but_cannot_clear_a_halt_and_is_named_in_history(
    table: tuple[RunningTable, Path],
) -> None:
    t, top = table
    sock = str(top / "control.sock")
    bet = as_user(NOGROUP, "bet", "7", "5", "--socket", sock, config=top / "table.toml")
    assert bet.returncode == 0, bet.stderr
    clear = as_user(
        NOGROUP, "clear-halt", "--note", "x", "--yes", "--socket", sock, config=top / "table.toml"
    )
    assert clear.returncode != 0 and "needed for clear-halt" in clear.stderr
    t.throw(2, 2)
    wait_for(lambda: t.status()["rolls"] == 1)
    history = t.ask("history", hands=1)["hands"][-1]
    assert history["actions"][0]["actor"] == f"nobody({NOBODY})"
    assert history["actions"][0]["action"] == "bet"
