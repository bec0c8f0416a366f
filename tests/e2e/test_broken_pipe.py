"""A broken pipe (``firebet ... | head``) ends every command quietly (docs/cli.md, issue 14.1)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import PROCESS_DEADLINE_S, ROOT, run_firebet

pytestmark = pytest.mark.slow


def firebet_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """Run firebet with its standard output on a pipe whose reader has already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `head -1` does once it has its line: every write is EPIPE
    try:
        return subprocess.run(
            [sys.executable, "-m", "controller", *args],
            cwd=ROOT,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=PROCESS_DEADLINE_S,
        )
    finally:
        os.close(write_end)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Path:
    state = tmp_path_factory.mktemp("played")
    proc = run_firebet("sim", "--rolls", "40", "--seed", "3", "--state-dir", str(state))
    assert proc.returncode == 0, proc.stderr
    return state


@pytest.mark.parametrize(
    "args",
    [
        ("export", "--format", "csv"),
        ("export", "--format", "jsonl"),
        ("history",),
        ("history", "--json"),
        ("journal", "verify"),
    ],
)
def test_journal_readers_end_quietly_on_a_closed_pipe(played: Path, args: tuple[str, ...]) -> None:
    proc = firebet_into_closed_pipe(*args, "--state-dir", str(played))
    assert proc.stderr == ""
    assert proc.returncode == 0


@pytest.mark.parametrize(
    "args",
    [
        ("odds",),
        ("odds", "--json"),
        ("--help",),
        ("history", "--help"),
        ("diag", "leds", "--json", "--pin-factory", "mock", "--step", "0"),
    ],
)
def test_other_commands_end_quietly_on_a_closed_pipe(args: tuple[str, ...]) -> None:
    proc = firebet_into_closed_pipe(*args)
    assert proc.stderr == ""
    assert proc.returncode == 0


def test_head_gets_its_line_and_nothing_is_said(played: Path) -> None:
    proc = subprocess.run(
        f"{sys.executable} -m controller export --format csv --state-dir {played} | head -1",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=PROCESS_DEADLINE_S,
    )
    assert proc.stdout == (
        "record,at,actor,kind,snapshot,prev_hash,hash,what,d1,d2,position,amount,hand,detail\n"
    )
    # no error; the count only when the pipe took every record before head went away
    assert proc.stderr in ("", "firebet: exported 53 records (records 1 to 53)\n")
