"""Every command finds the same table: a checkout's journal (sim, a bench, ``run
--state-dir``) is read by ``history``, ``journal verify``, ``export`` and ``doctor`` with
the key it was made with; no journal is an error, not an empty success; long work shows
progress on a terminal only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import PROCESS_DEADLINE_S, ROOT, run_firebet


def checkout_config(tmp_path: Path) -> Path:
    """A table's file that names no key_file: the key is found by the state directory."""
    config = tmp_path / "table.toml"
    config.write_text('[table]\nid = "CR-09"\n', encoding="utf-8")
    return config


def test_a_sim_journal_is_read_by_every_tool_with_the_key_it_was_made_with(
    tmp_path: Path,
) -> None:
    config, state = str(checkout_config(tmp_path)), tmp_path / "var"
    where = ("--config", config, "--state-dir", str(state))
    made = run_firebet("sim", "--rolls", "30", "--seed", "4", "--plain", *where)
    assert made.returncode == 0, made.stderr
    assert (state / "journal.key").stat().st_mode & 0o777 == 0o600
    verify = run_firebet("journal", "verify", "--verbose", *where)
    assert verify.returncode == 0, verify.stderr
    assert "journal OK" in verify.stdout
    assert f"journal key: {state / 'journal.key'} (beside the journal" in verify.stderr
    history = run_firebet("history", "--json", *where)
    assert history.returncode == 0, history.stderr
    assert [json.loads(line)["hand"] for line in history.stdout.splitlines()]
    export = run_firebet("export", "--format", "jsonl", *where)
    assert export.returncode == 0, export.stderr
    assert "note" not in export.stderr  # the key was readable: no note about its hashes
    assert export.stderr.startswith("firebet: exported ")  # the count alone
    assert len(export.stdout.splitlines()) > 30
    doctor = run_firebet("doctor", "--json", "--pin-factory", "mock", "--serial", "loop://", *where)
    checks = {c["check"]: c for c in map(json.loads, doctor.stdout.splitlines())}
    assert checks["journal"]["ok"], checks["journal"]
    assert "DAMAGED" not in checks["journal"]["detail"]
    assert f"journal key {state / 'journal.key'}" in checks["table"]["detail"]


def test_export_and_history_without_a_journal_fail_and_say_where_they_looked(
    tmp_path: Path,
) -> None:
    where = ("--config", str(checkout_config(tmp_path)), "--state-dir", str(tmp_path / "none"))
    for args in (("export", "--format", "csv"), ("history",), ("journal", "verify")):
        proc = run_firebet(*args, *where)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert proc.stdout == ""
        assert f"there is no journal at {tmp_path / 'none' / 'journal.db'}" in proc.stderr


def test_verify_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path: Path) -> None:
    config, state = str(checkout_config(tmp_path)), tmp_path / "var"
    where = ("--config", config, "--state-dir", str(state))
    assert run_firebet("sim", "--rolls", "10", "--seed", "5", "--plain", *where).returncode == 0
    piped = run_firebet("journal", "verify", *where)
    assert piped.returncode == 0 and piped.stderr == ""
    master, slave = os.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "controller", "journal", "verify", *where],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=slave,
            text=True,
            timeout=PROCESS_DEADLINE_S,
        )
        os.close(slave)
        slave = -1
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0 and "journal OK" in proc.stdout
    assert b"\rverify: " in seen and b" records (100%)" in seen
