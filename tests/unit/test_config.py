"""Configuration: defaults, presets, layering and strict validation naming the key."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from controller.core.config import SCHEMA, load_config, preset_names
from controller.core.errors import ConfigError
from tests.support import ROOT


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "table.toml"
    path.write_text(text)
    return path


def test_defaults_are_nj_craps() -> None:
    c = load_config()
    assert c.preset == "nj" and c.table.game == "craps" and c.table.positions == 16
    assert c.firebet.pay_table() == {4: 24, 5: 249, 6: 999}
    assert (c.firebet.min_wager, c.firebet.max_wager, c.firebet.wager_increment) == (1, 5, 1)
    assert c.lights.markers == {4: 5, 5: 6, 6: 13, 8: 19, 9: 26, 10: 21}
    assert c.history_hands == 10 and c.journal.snapshot_every == 1000


def test_every_declared_key_has_a_commented_default_and_nothing_else() -> None:
    data = tomllib.loads((ROOT / "config" / "table.toml").read_text())
    declared = {(k.section, k.name) for k in SCHEMA}
    present = {(s, k) for s, body in data.items() for k in body}
    assert declared == present


def test_presets_exist_and_load(tmp_path: Path) -> None:
    assert {"nj", "nv-25-250-1000", "three-tier", "mini-craps", "custom"} <= set(preset_names())
    nv = load_config(write(tmp_path, '[firebet]\npreset = "nv-25-250-1000"\n'))
    assert nv.firebet.max_wager == 10 and nv.firebet.pay_table() == {4: 24, 5: 249, 6: 999}
    three = load_config(write(tmp_path, '[firebet]\npreset = "three-tier"\n'))
    assert three.firebet.pay_table() == {3: 6, 4: 29, 5: 149, 6: 299}
    mini = load_config(write(tmp_path, '[firebet]\npreset = "mini-craps"\n'))
    assert mini.table.game == "mini-craps" and mini.table.positions == 9


def test_a_file_holds_only_what_it_changes_and_wins_over_the_preset(tmp_path: Path) -> None:
    c = load_config(write(tmp_path, '[firebet]\npreset = "nv-25-250-1000"\nmax_wager = 25\n'))
    assert c.firebet.max_wager == 25 and c.firebet.min_wager == 1 and c.reader.baud == 9600


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("[firebet]\nmax_wagr = 5\n", "firebet.max_wagr", "unknown key"),
        ("[tabel]\nid = 'x'\n", "tabel", "unknown section"),
        ("[firebet]\nmax_wager = '5'\n", "firebet.max_wager", "must be a whole number"),
        ("[firebet]\nmax_wager = true\n", "firebet.max_wager", "must be a whole number"),
        ("[firebet]\npays = { 4 = 24, 5 = 20 }\n", "firebet.pays.5", "not increasing"),
        ("[firebet]\npays = { 7 = 24 }\n", "firebet.pays.7", "a tier must be 1 to 6"),
        ("[firebet]\nmin_wager = 10\n", "firebet.min_wager", "over the maximum"),
        ("[firebet]\npreset = 'atlantis'\n", "firebet.preset", "unknown preset"),
        ("[lights]\nstatus = 17\n", "lights.status", "already used by"),
        ("[buttons]\nack = 40\n", "buttons.ack", "not a BCM GPIO pin"),
        ("[firebet]\nbetting_closes = 'never'\n", "firebet.betting_closes", "must be one of"),
        ("[firebet]\nsurveillance_at = 7\n", "firebet.surveillance_at", "between 1 and 6"),
        ("[table]\ngame = 'mini-craps'\n", "table.positions", "at most 9 positions"),
        (
            "[firebet]\npreset = 'custom'\npays = { 4 = 24 }\npay_six_immediately = true\n",
            "firebet.pay_six_immediately",
            "6-point tier",
        ),
        ("[lights]\nmarkers = { 4 = 5 }\n", "lights.markers", "each point"),
    ],
)
def test_bad_config_names_the_key_and_the_reason(
    tmp_path: Path, text: str, key: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert err.value.key == key
    assert reason in str(err.value)


def test_unreadable_or_invalid_toml_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="not valid TOML") as err:
        load_config(write(tmp_path, "[firebet\n"))
    assert str(tmp_path) in str(err.value)


def test_cli_bad_config_exits_2_naming_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "[firebet]\npays = { 4 = 24, 5 = 10 }\n")
    script = tmp_path / "s.txt"
    script.write_text("3 4\n")
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "replay", str(script), "--config", str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert str(path) in proc.stderr and "firebet.pays.5" in proc.stderr


@pytest.mark.parametrize(
    ("text", "key", "rule"),
    [
        ("[firebet]\nmax_wager = 10\n", "firebet.max_wager", "maximum wager is $5"),
        ('[firebet]\npreset = "nj"\nmax_wager = 6\n', "firebet.max_wager", "maximum wager is $5"),
        ("[firebet]\nmin_wager = 0\n", "firebet.min_wager", "must be greater than 0"),
        ("[firebet]\nwager_increment = 5\nmin_wager = 5\n", "firebet.wager_increment", "$1"),
        ("[firebet]\npays = { 4 = 20, 5 = 249, 6 = 999 }\n", "firebet.pays.4", "at least 24 to 1"),
        ("[firebet]\npays = { 4 = 24, 5 = 249, 6 = 998 }\n", "firebet.pays.6", "999 to 1"),
        ("[firebet]\npays = { 4 = 24, 5 = 249 }\n", "firebet.pays.6", "999 to 1"),
        ("[firebet]\npays = { 5 = 249, 6 = 999 }\n", "firebet.pays.4", "at least 24 to 1"),
        ("[firebet]\npay_six_immediately = true\n", "firebet.pay_six_immediately", "loser 7"),
        ("[firebet]\nbetting_closes = 'first_point'\n", "firebet.betting_closes", "come-out"),
        ("[firebet]\nsurveillance_at = 6\n", "firebet.surveillance_at", "5 or less, not 6"),
    ],
)
def test_nj_preset_is_law_not_a_default(tmp_path: Path, text: str, key: str, rule: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(write(tmp_path, text))
    assert err.value.key == key
    assert rule in str(err.value)
    if "greater than 0" not in rule:
        assert "preset 'nj' is law" in str(err.value) and "custom" in str(err.value)


def test_nj_allows_richer_pays_and_tighter_limits(tmp_path: Path) -> None:
    c = load_config(
        write(tmp_path, "[firebet]\npays = { 3 = 2, 4 = 30, 5 = 300, 6 = 1200 }\nmax_wager = 3\n")
    )
    assert c.firebet.pay_table() == {3: 2, 4: 30, 5: 300, 6: 1200} and c.firebet.max_wager == 3
    c = load_config(write(tmp_path, "[firebet]\nmin_wager = 2\n"))
    assert (c.firebet.min_wager, c.firebet.max_wager) == (2, 5)
    c = load_config(write(tmp_path, "[firebet]\nsurveillance_at = 4\n"))  # sooner is allowed
    assert c.firebet.surveillance_at == 4


def test_custom_preset_takes_any_consistent_values(tmp_path: Path) -> None:
    text = (
        '[firebet]\npreset = "custom"\nmin_wager = 5\nmax_wager = 100\nwager_increment = 5\n'
        "pays = { 4 = 20, 5 = 200 }\n"
    )
    c = load_config(write(tmp_path, text))
    assert c.preset == "custom" and c.firebet.pay_table() == {4: 20, 5: 200}
    assert (c.firebet.min_wager, c.firebet.max_wager, c.firebet.wager_increment) == (5, 100, 5)
    with pytest.raises(ConfigError, match="not increasing"):
        load_config(write(tmp_path, '[firebet]\npreset = "custom"\npays = { 4 = 20, 5 = 10 }\n'))


def test_cli_refuses_a_looser_nj_table_with_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, "[firebet]\npays = { 4 = 20, 5 = 249, 6 = 999 }\n")
    proc = subprocess.run(
        [sys.executable, "-m", "controller", "odds", "--config", str(path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert str(path) in proc.stderr and "firebet.pays.4" in proc.stderr
    assert "24 to 1" in proc.stderr and "Traceback" not in proc.stderr
