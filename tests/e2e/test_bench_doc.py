"""docs/bench.md's bench session runs as written (issue 25): its command lines, read from
the page, against a real `firebet run --simulated-reader`, to the settlement."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import PROCESS_DEADLINE_S, ROOT, run_firebet, wait_for

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "bench.md"
DOC_STATE = "/tmp/bench"  # the page's state directory; the test's own stands in for it


def _blocks(section: str) -> list[list[str]]:
    """The ```sh blocks of ``section`` of docs/bench.md, each as its lines."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else len(text)]
    return [b.strip("\n").splitlines() for b in re.findall(r"```sh\n(.*?)```", body, re.S)]


def _words(line: str, state: Path) -> list[str]:
    return [w.replace(DOC_STATE, str(state)) for w in shlex.split(line, comments=True)]


def test_the_bench_session_runs_as_written_to_a_settlement(tmp_path: Path) -> None:
    state = tmp_path / "bench"
    (start,) = _blocks("Start the service on a simulated reader")
    (run,) = [_words(line, state) for line in start if line.strip()]
    assert run[:2] == ["firebet", "run"] and "--simulated-reader" in run
    env = dict(os.environ)
    log = tmp_path / "service.log"
    with log.open("w") as out:
        service = subprocess.Popen(
            [sys.executable, "-m", "controller", *run[1:]],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        up = lambda: run_firebet("status", "--state-dir", str(state)).returncode == 0  # noqa: E731
        wait_for(up, what="the bench service's socket")
        (session,) = _blocks("A bench session")
        said: dict[str, str] = {}
        for line in session:
            words = _words(line, state)
            if not words:
                continue
            if words[0] == "export":
                name, _, value = words[1].partition("=")
                env[name] = value
                continue
            assert words[0] == "firebet", line
            proc = run_firebet(*words[1:], env=env)
            assert proc.returncode == 0, f"{line!r} exited {proc.returncode}: {proc.stderr}"
            said[" ".join(words[1:])] = proc.stdout
        # what the page's comments promise
        assert "HELD by the controller as held roll 1" in said["sim-reader throw 3 4"]
        assert "1: 3 4" in said["held"]
        assert "settled hand 1" in said["held apply 1"] and "#3 lost $5" in said["held apply 1"]
        assert "journal OK" in said["journal verify"]
        history = said["history --hands 2"]
        assert "hand 1: 2 different points (4, 6) - lose" not in history  # one made: 4
        assert "hand 1: 1 different point (4) - lose - #3 lost $5" in history
        assert "MANUAL: keyed by a dealer" in history and "reader_fault code=CAMERA" in history
        assert "held roll 1 (reader seq" in history and "held_apply" in history
        assert re.search(r"\d\d:\d\d:\d\d\S*  2-2  reader seq \d+", history)
        # right after the seven-out, one hand is the hand just settled (runbook)
        one = run_firebet("history", "--hands", "1", env=env).stdout
        assert one.startswith("hand 1: 1 different point (4) - lose")
        assert one.rstrip().endswith("hand 2: in play, no roll or action yet")
        lines = run_firebet("history", "--hands", "1", "--json", env=env).stdout.splitlines()
        assert [json.loads(x)["hand"] for x in lines] == [2]  # the JSON: the hand in play
        status = json.loads(run_firebet("status", "--json", env=env).stdout)
        assert status["meters"]["hands"] == 1 and status["hand"] == 2
        assert status["last_settlement"]["payouts"] == {"3": 0}
        assert status["held_rolls"] == [] and status["mode"] == "running"
    finally:
        service.terminate()
        service.wait(timeout=PROCESS_DEADLINE_S)
