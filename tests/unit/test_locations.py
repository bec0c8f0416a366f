"""One answer to "where is this table": the state directory and the journal key every
command uses (``controller/cli/options.py``, ``controller/journal/key.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from controller.cli import options
from controller.core.config.model import INSTALLED_KEY_FILE, INSTALLED_STATE_DIR
from controller.journal.key import key_file_for
from controller.service import integrity


def test_the_installed_state_directory_has_the_installed_key() -> None:
    assert key_file_for("", INSTALLED_STATE_DIR) == (
        INSTALLED_KEY_FILE,
        "the installed table's key",
    )
    assert key_file_for("", "/var/lib/firebet/")[0] == INSTALLED_KEY_FILE


def test_any_other_state_directory_keeps_its_key_beside_its_journal(tmp_path: Path) -> None:
    key, why = key_file_for("", tmp_path / "bench")
    assert key == tmp_path / "bench" / "journal.key"
    assert why == "beside the journal: not the installed table's"
    assert key_file_for("", "var")[0] == Path("var/journal.key")


def test_a_named_key_file_wins_relative_to_the_state_directory(tmp_path: Path) -> None:
    assert key_file_for("secret.key", tmp_path) == (tmp_path / "secret.key", "[journal] key_file")
    assert key_file_for("/srv/k", INSTALLED_STATE_DIR)[0] == Path("/srv/k")


def test_the_state_directory_of_a_checkout_and_of_an_installed_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FIREBET_STATE_DIR", raising=False)
    monkeypatch.setattr(integrity, "installed", lambda roots=None: False)
    assert options.state_dir_and_why(None) == (Path("var"), "a checkout's default")
    monkeypatch.setattr(integrity, "installed", lambda roots=None: True)
    assert options.state_dir_and_why(None) == (INSTALLED_STATE_DIR, "the installed table's")
    # sim's simulated table and the floor never default to the installed table's journal
    assert options.state_dir_and_why(None, installed_default=None) == (Path("var"), "sim's default")
    monkeypatch.setenv("FIREBET_STATE_DIR", "/tmp/bench")
    assert options.state_dir_and_why(None) == (Path("/tmp/bench"), "from $FIREBET_STATE_DIR")
    assert options.state_dir_and_why("d") == (Path("d"), "from --state-dir")


def test_locate_says_what_it_found_with_verbose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "t.toml"
    config.write_text('[table]\nid = "CR-09"\n', encoding="utf-8")  # names no key_file
    args = argparse.Namespace(config=str(config), state_dir=str(tmp_path / "s"), verbose=True)
    where = options.locate(args)
    assert where.config.table.id == "CR-09"
    assert where.key_file == tmp_path / "s" / "journal.key"
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"firebet: config: {config} (--config)",
        f"firebet: state directory: {tmp_path / 's'} (from --state-dir)",
        f"firebet: journal key: {tmp_path / 's' / 'journal.key'} (beside the journal: "
        "not the installed table's)",
    ]
    assert options.locate(args) is where  # asked twice by one command: said once
    assert capsys.readouterr().err == ""


def test_the_config_source_in_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIREBET_CONFIG", "/srv/t.toml")
    assert options.config_source(None) == "/srv/t.toml ($FIREBET_CONFIG)"
    assert options.config_source("a.toml") == "a.toml (--config)"


def test_a_checkout_never_reads_the_systems_program_manifest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(integrity.MANIFEST_ENV, raising=False)
    assert integrity.manifest_path() is None  # this checkout: not installed
    assert (
        integrity.check_program()
        .describe()
        .endswith("running from a checkout, no manifest to check")
    )
    installed = {"controller": Path("/usr/lib/firebet/site-packages/controller")}
    assert integrity.manifest_path(installed) == integrity.DEFAULT_MANIFEST
