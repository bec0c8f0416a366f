"""``make floor-demo`` stops cleanly on Ctrl-C: the demo (bench/floor_demo.py) sent
SIGINT as a terminal sends it (to its whole process group) ends with one line and exit
0, no traceback or error line, its temporary folder gone and its children (mosquitto,
``firebet floor``) ended."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support import ROOT, read_line, wait_for

pytestmark = pytest.mark.slow


def children(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs."""
    found: list[int] = []
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return found
    for child in map(int, text.split()):
        found += [child, *children(child)]
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_ctrl_c_stops_the_demo_cleanly_and_leaves_nothing_behind(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    with open(tmp_path / "stderr", "w") as stderr:
        demo = subprocess.Popen(
            [sys.executable, "bench/floor_demo.py", "--tables", "2", "--pace", "0.5",
             "--http", "127.0.0.1:0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True,
            env={**os.environ, "TMPDIR": str(temp)}, start_new_session=True,
        )  # fmt: skip
    assert demo.stdout is not None
    try:
        said = []
        deadline = time.monotonic() + 60
        while not said or "Ctrl-C stops the demo" not in said[-1]:
            line = read_line(demo.stdout, "the floor demo", max(deadline - time.monotonic(), 0.1))
            assert line and time.monotonic() < deadline, (said, (tmp_path / "stderr").read_text())
            said.append(line)
        console = next(x for x in said if "floor console:" in x).split()[2]
        [work] = list(temp.iterdir())
        kids = children(demo.pid)
        assert len(kids) >= 2 and all(alive(k) for k in kids)  # mosquitto and the floor

        def playing() -> bool:
            with urllib.request.urlopen(console + "api/tables", timeout=10) as reply:
                return sum(t["record"] for t in json.loads(reply.read())) >= 6

        wait_for(playing, what="the demo's tables on the floor")
        os.killpg(demo.pid, signal.SIGINT)  # Ctrl-C in its terminal
        assert demo.wait(timeout=60) == 0
        after = [x for x in demo.stdout.read().splitlines() if x.strip()]
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait()
        demo.stdout.close()
    assert after == [f"floor demo stopped: tables, floor and mosquitto ended, {work} removed"]
    errors = (tmp_path / "stderr").read_text()
    for word in ("Traceback", "rror", "lost the broker", "cannot reach"):
        assert word not in errors, errors
    assert list(temp.iterdir()) == []
    wait_for(lambda: not any(alive(k) for k in kids), what="the demo's children to end")
