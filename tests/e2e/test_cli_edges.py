"""Rough edges a newcomer met on the command line (issue 14: 9, 10, 11, 13), as real
processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import ROOT, run_firebet

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("amount", ["0", "-1", "٣", "1.5"])
def test_a_wager_that_is_no_amount_is_bad_usage(amount: str, tmp_path: Path) -> None:
    proc = run_firebet("bet", "4", amount, "--socket", str(tmp_path / "none.sock"))
    assert proc.returncode == 2  # refused before asking any service
    assert "a wager is whole dollars, at least 1" in proc.stderr


def test_replay_of_a_missing_file_says_so_plainly() -> None:
    proc = run_firebet("replay", "nofile.txt")
    assert proc.returncode == 2
    assert proc.stderr == "firebet: nofile.txt: cannot read the script: No such file or directory\n"


def test_odds_of_a_preset_file_is_titled_with_that_preset() -> None:
    proc = run_firebet("odds", "--config", "config/presets/three-tier.toml")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        "Fire bet odds: preset three-tier, configuration config/presets/three-tier.toml"
    )
    assert lines[-1] == "house edge: 20.7295%"  # not an 80-digit fraction
    first = (ROOT / "config/presets/three-tier.toml").read_text().splitlines()[0]
    assert "four-tier" not in first and first.startswith("# three-tier:")


def test_sim_script_prints_a_reversed_settlement_once_and_counts_it_out(tmp_path: Path) -> None:
    script = tmp_path / "void.txt"
    script.write_text("bet 3 5\n2 2\n3 4\nvoid\n2 2\n2 2\n3 3\n3 4\n")
    proc = run_firebet(
        "sim", "--script", str(script), "--plain", "--state-dir", str(tmp_path / "s")
    )
    assert proc.returncode == 0, proc.stderr
    hands = [line for line in proc.stdout.splitlines() if line.startswith("hand ")]
    assert hands == [
        "hand 1: 0 different points (none) - lose - #3 lost $5",
        "hand 1: settlement reversed by a void; it plays on",
        "hand 1: 1 different point (4) - lose - #3 lost $5",
    ]
    assert "this session: 1 hand settled, 0 won" in proc.stdout
    assert "5 rolls in" in proc.stdout


def test_sim_says_it_resumes_and_fresh_starts_a_new_table(tmp_path: Path) -> None:
    state = tmp_path / "var"
    first = run_firebet("sim", "--rolls", "3", "--seed", "1", "--state-dir", str(state))
    assert first.returncode == 0 and "resuming" not in first.stderr
    again = run_firebet("sim", "--rolls", "3", "--seed", "1", "--state-dir", str(state))
    assert again.returncode == 0
    assert f"resuming the table journaled in {state} (hand 1, 3 rolls so far)" in again.stderr
    assert "firebet sim --fresh starts a new one" in again.stderr
    assert "journal meters, every session" in again.stdout
    fresh = run_firebet("sim", "--rolls", "3", "--seed", "1", "--fresh", "--state-dir", str(state))
    assert fresh.returncode == 0 and "resuming" not in fresh.stderr
    assert "moved aside to" in fresh.stderr
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("var.")]
    assert len(moved) == 1 and (moved[0] / "journal.db").exists()
