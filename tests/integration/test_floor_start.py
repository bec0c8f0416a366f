"""``firebet floor`` says at start what it lacks, on time-stamped log lines, and runs on:
no broker reachable, no surveillance users, no table yet, no configuration; a state
directory it cannot write in is refused naming it."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from controller.cli.floor import warn_missing
from controller.floor.settings import FloorSettings
from tests.broker import free_port
from tests.support import ROOT, read_line, wait_for

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d{4} "  # controller/cli/logs.py's


def floor(tmp_path: Path, config: str, state: Path) -> subprocess.Popen[str]:
    path = tmp_path / "floor.toml"
    path.write_text(config)
    with open(tmp_path / "floor.log", "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "controller", "floor", "--config", str(path),
             "--state-dir", str(state), "--http", "127.0.0.1:0"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
        )  # fmt: skip


def test_no_broker_and_no_users_are_warned_with_time_stamps_and_the_floor_runs_on(
    tmp_path: Path,
) -> None:
    port = free_port()  # nothing listens there
    proc = floor(tmp_path, f'[floor]\nbroker = "mqtt://127.0.0.1:{port}"\n', tmp_path / "state")
    log = tmp_path / "floor.log"
    try:
        assert proc.stdout is not None
        line = read_line(proc.stdout, "firebet floor's start")
        assert "console at " in line, log.read_text()
        url = line.split("console at ")[1].split()[0]
        wait_for(lambda: "no broker reachable" in log.read_text(), what="the broker warning")
        text = log.read_text()
        lines = text.splitlines()
        users = next(x for x in lines if "no surveillance users" in x)
        assert re.match(STAMP + "WARNING firebet.floor: no surveillance users in ", users)
        assert "the console is read-only" in users and "firebet floor passwd NAME" in users
        broker = next(x for x in lines if "no broker reachable" in x)
        assert re.match(STAMP + f"WARNING firebet.floor: no broker reachable at mqtt://127.0.0.1:{port}"
                        r" within 3 s", broker)  # fmt: skip
        assert "the floor keeps trying" in broker
        # SPEC section 6 (issue 30): a floor with no approvals says so at start
        approvals = next(x for x in lines if "no [approved.*] rules in " in x)
        assert re.match(STAMP + "WARNING firebet.floor: no \\[approved", approvals), approvals
        assert "every hand is decided under unapproved rules" in approvals
        assert any(re.match(STAMP + "WARNING firebet.floor: no table has reported", x)
                   for x in lines)  # fmt: skip
        assert all(re.match(STAMP, x) for x in lines), text  # every line stamped
        assert "Traceback" not in text
        # it runs on, and tells a load balancer it cannot serve: 503, the reason in words
        with pytest.raises(urllib.error.HTTPError) as no_broker:
            urllib.request.urlopen(url + "healthz", timeout=10)
        with no_broker.value as reply:
            assert reply.code == 503
            said = json.loads(reply.read())
        assert said["broker"] is False and said["serving"] is False and not said["ok"]
        assert said["problems"][0].startswith("not connected to the broker")
        with urllib.request.urlopen(url + "figures", timeout=10) as reply:
            assert reply.status == 200
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_state_directory_the_floor_cannot_write_in_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    proc = floor(tmp_path, '[floor]\nbroker = "mqtt://127.0.0.1:1"\n', blocker / "state")
    assert proc.wait(timeout=60) == 1
    if proc.stdout is not None:
        proc.stdout.close()
    text = (tmp_path / "floor.log").read_text()
    assert f"state directory {blocker / 'state'}: cannot make it" in text
    assert "Traceback" not in text


def test_no_configuration_is_warned(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="firebet.floor"):
        warn_missing(FloorSettings(), None)
    said = [r.getMessage() for r in caplog.records]
    assert any("no floor configuration" in m and "running on the defaults, broker "
               "mqtt://127.0.0.1:1883" in m for m in said)  # fmt: skip
    assert any("no surveillance users in defaults" in m for m in said)
