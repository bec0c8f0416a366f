"""`firebet sim` and `firebet doctor` as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import run_firebet as firebet


def test_sim_rolls_300_seed_1_exits_0_with_a_summary(tmp_path: Path) -> None:
    proc = firebet("sim", "--rolls", "300", "--seed", "1", "--state-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "firebet sim: seed 1, 300 rolls" in proc.stdout
    assert "reader frames: ok" in proc.stdout
    hands = [line for line in proc.stdout.splitlines() if line.startswith("hand ")]
    assert hands, proc.stdout
    # the journal it leaves is whole, and its history agrees with the summary's hands
    verify = firebet("journal", "verify", "--state-dir", str(tmp_path))
    assert verify.returncode == 0, verify.stderr
    history = firebet("history", "--json", "--hands", "3", "--state-dir", str(tmp_path))
    lines = [json.loads(x) for x in history.stdout.splitlines()]
    assert lines[-1]["result"] is None and all(h["result"] for h in lines[:-1])


def test_sim_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    a = firebet("sim", "--rolls", "60", "--seed", "7", "--state-dir", str(tmp_path / "a"))
    b = firebet("sim", "--rolls", "60", "--seed", "7", "--state-dir", str(tmp_path / "b"))
    strip = lambda out: [x for x in out.splitlines() if x.startswith("hand ")]  # noqa: E731
    assert strip(a.stdout) == strip(b.stdout) and strip(a.stdout)


def test_sim_script_throws_its_dice_through_the_reader(tmp_path: Path) -> None:
    script = tmp_path / "hand.txt"
    script.write_text(
        "bet 3 5\n2 2\n2 2\n3 2\n3 2\n3 3\n3 3\n4 4\n4 4\n2 2\n3 4\nbet 99 1  # refused\n"
    )
    proc = firebet("sim", "--script", str(script), "--state-dir", str(tmp_path / "s"))
    assert proc.returncode == 0, proc.stderr
    assert "hand 1: 4 different points (4, 5, 6, 8) - WIN 24 to 1 - #3 wins $120" in proc.stdout
    assert "12: refused: position 99 is not on this layout" in proc.stderr


def test_sim_bad_arguments_exit_2(tmp_path: Path) -> None:
    assert firebet("sim", "--rolls", "0", "--state-dir", str(tmp_path)).returncode == 2
    missing = firebet("sim", "--script", str(tmp_path / "none.txt"), "--state-dir", str(tmp_path))
    assert missing.returncode == 2 and "none.txt" in missing.stderr


def test_doctor_lists_each_check_with_its_fix(tmp_path: Path) -> None:
    firebet("sim", "--rolls", "20", "--seed", "2", "--state-dir", str(tmp_path))
    proc = firebet(
        "doctor", "--state-dir", str(tmp_path), "--pin-factory", "mock", "--serial",
        str(tmp_path / "ttyNONE"), "--json",
    )  # fmt: skip
    assert proc.returncode == 1
    checks = {c["check"]: c for c in map(json.loads, proc.stdout.splitlines())}
    assert list(checks) == [
        "config", "table", "program", "service", "serial", "gpio", "journal", "disk", "clock",
        "floor",
    ]  # fmt: skip
    assert f"state directory {tmp_path} (from --state-dir)" in checks["table"]["detail"]
    # the clock: ticked when synchronised, else a warning that does not fail doctor alone
    assert checks["clock"]["ok"] and ("synchronised" in checks["clock"]["detail"])
    assert checks["program"]["ok"] and "running from a checkout" in checks["program"]["detail"]
    assert checks["config"]["ok"] and checks["gpio"]["ok"] and checks["journal"]["ok"]
    assert not checks["service"]["ok"] and "systemctl start firebet" in checks["service"]["fix"]
    assert not checks["serial"]["ok"] and "does not exist" in checks["serial"]["detail"]


def test_doctor_names_a_bad_config(tmp_path: Path) -> None:
    bad = tmp_path / "t.toml"
    bad.write_text("[lights]\nstatus = 22\n")
    proc = firebet("doctor", "--config", str(bad), "--state-dir", str(tmp_path))
    assert proc.returncode == 2  # bad config is bad input, as the README's exit codes say
    assert "✗ config" in proc.stdout and "pin 22 is already used" in proc.stdout
