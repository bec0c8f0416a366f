"""Every benchmark the README quotes still runs: each at a small size, its figures printed.

A benchmark that no longer runs is a figure nobody can reproduce; these run each one as the
README shows it, only smaller, and check it printed what it measures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# (script and its small-size arguments, a word its figures always print)
BENCHES = [
    (["engine.py", "--rolls", "2000"], "rolls/s"),
    (["journal.py", "--sizes", "300", "--appends", "20"], "verify"),
    (["replay.py", "--lines", "2000"], "lines/s"),
    (["odds.py", "--hands", "2000", "--reference", "200"], "hands/s"),
    (["latency.py", "--rolls", "50"], "start-up to READY"),
    (["after_ready.py", "--records", "2000", "--after", "1"], "the full check after READY ended"),
    (["floorlink.py", "--backlog", "500", "--rolls", "50"], "p99"),
    (
        ["cpu.py", "--rolls", "1000", "--idle-s", "2", "--paced-rolls", "5"],
        "per roll at a table's pace (5 rolls, one every 0.2 s)",
    ),
]


@pytest.mark.parametrize(("args", "figure"), BENCHES, ids=[b[0][0] for b in BENCHES])
def test_the_benchmark_runs_and_prints_its_figures(
    args: list[str], figure: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / args[0]), *args[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"bench/{args[0]} failed:\n{done.stdout}\n{done.stderr}"
    assert figure in done.stdout, done.stdout


def test_the_recorded_flood_reaches_the_floor_whole_and_checked(tmp_path: Path) -> None:
    """``bench/floor.py --publisher recorded`` (docs/floor.md, "Tests and figures"): its
    messages are the real tables', so the floor stores every record once, checks each
    command's events and raises no audit alert (a recording the floor refused would measure
    refusals, not the console), and it prints the console's lag."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "floor.py"), "--publisher", "recorded",
         "--tables", "2", "--rate", "40", "--flood-s", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert "records lost: 0    stored twice: 0    (of 42 in 2 journals)" in lines, done.stdout
    assert any(
        line.startswith("second opinion: 40 command records came with the table's events; "
                        "not checked: 0; audit alerts: 0") for line in lines
    ), done.stdout  # fmt: skip
    assert "commands to the tables" not in done.stdout, done.stdout  # no resend was needed
    assert any(line.startswith("  publish -> console live update: p50 ") for line in lines)
