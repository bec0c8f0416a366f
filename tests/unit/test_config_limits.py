"""Impossible configuration values are refused, naming the key (issue 9 items 5 and 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.core.config import load_config
from controller.core.errors import ConfigError
from tests.support import run_firebet


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "table.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[reader]\nbaud = 3000000000\n", "reader.baud"),
        ("[reader]\nbaud = 0\n", "reader.baud"),
        ("[reader]\nbaud = 5000000\n", "reader.baud"),
        ("[reader]\nheartbeat_timeout_s = inf\n", "reader.heartbeat_timeout_s"),
        ("[reader]\nheartbeat_timeout_s = nan\n", "reader.heartbeat_timeout_s"),
        ("[reader]\nheartbeat_timeout_s = 1e-9\n", "reader.heartbeat_timeout_s"),
        ("[reader]\nheartbeat_timeout_s = 1e300\n", "reader.heartbeat_timeout_s"),
        ("[reader]\nprotocol = 4\n", "reader.protocol"),
        ("[buttons]\nhold_s = inf\n", "buttons.hold_s"),
        ("[buttons]\nhold_s = -1.0\n", "buttons.hold_s"),
        ('[journal]\npath = "."\n', "journal.path"),
        ('[journal]\npath = ".."\n', "journal.path"),
        ('[journal]\npath = "db/"\n', "journal.path"),
        ('[journal]\npath = "db/.."\n', "journal.path"),
    ],
)
def test_impossible_values_are_refused_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert caught.value.key == key


def test_possible_values_are_taken(tmp_path: Path) -> None:
    c = load_config(
        write(
            tmp_path,
            "[reader]\nbaud = 115200\nheartbeat_timeout_s = 2.5\nprotocol = 1\n"
            '[journal]\npath = "db/table.db"\n',
        )
    )
    assert (c.reader.baud, c.reader.heartbeat_timeout_s, c.reader.protocol) == (115200, 2.5, 1)
    assert c.journal.path == "db/table.db"
    assert load_config().reader.protocol == 2


def test_cli_huge_baud_exits_2_naming_the_key(tmp_path: Path) -> None:
    done = run_firebet(
        "run",
        "--config",
        str(write(tmp_path, "[reader]\nbaud = 3000000000\n")),
        "--state-dir",
        str(tmp_path / "state"),
        "--pin-factory",
        "mock",
    )
    assert done.returncode == 2, done.stderr
    assert "reader.baud" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "state").exists()


def test_cli_non_utf8_file_exits_2_naming_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, b'[table]\nid = "CR-07"\n# caf\xe9 table\n')
    done = run_firebet("odds", "--config", str(path))
    assert done.returncode == 2, done.stderr
    assert str(path) in done.stderr and "line 3" in done.stderr and "UTF-8" in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_socket_folder_that_does_not_exist_exits_2_naming_the_key(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "folder" / "control.sock"
    path = write(tmp_path, f'[control]\nsocket = "{missing}"\n')
    state = tmp_path / "state"
    done = run_firebet(
        "run", "--config", str(path), "--state-dir", str(state), "--pin-factory", "mock"
    )
    assert done.returncode == 2, done.stderr
    assert "control.socket" in done.stderr and "does not exist" in done.stderr
    assert "Traceback" not in done.stderr
    done = run_firebet(
        "run", "--socket", str(missing), "--state-dir", str(state), "--pin-factory", "mock"
    )
    assert done.returncode == 2, done.stderr
    assert "--socket" in done.stderr and "Traceback" not in done.stderr


def test_cli_journal_path_dot_exits_2_instead_of_halting(tmp_path: Path) -> None:
    path = write(tmp_path, '[journal]\npath = "."\n')
    done = run_firebet(
        "run", "--config", str(path), "--state-dir", str(tmp_path / "s"), "--pin-factory", "mock"
    )
    assert done.returncode == 2, done.stderr
    assert "journal.path" in done.stderr and "halt" not in done.stderr.lower()
