"""A halted table answers a dealer with exit 4 through the socket, as the offline tools do."""

from __future__ import annotations

from pathlib import Path

from controller.service.integrity import ProgramCheck
from tests.support import RunningTable, run_firebet, table_running


def assert_dealer_gets_exit_4(table: RunningTable) -> None:
    """A bet and a void with the real client both exit 4 and say why."""
    assert table.status()["mode"] == "halted"
    for args in (("bet", "1", "5"), ("void",)):
        proc = run_firebet(*args, "--socket", str(table.socket))
        assert proc.returncode == 4, (args, proc.stdout, proc.stderr)
        assert "halted" in proc.stderr
    reply = table.ask("bet", position=1, amount=5)
    assert reply["ok"] is False and reply["exit"] == 4


def test_a_program_integrity_halt_is_exit_4_through_the_socket(tmp_path: Path) -> None:
    bad = ProgramCheck("ab" * 32, tmp_path / "m", "controller/core/engine.py differs")
    with table_running(tmp_path / "state", tmp_path / "c.sock", program=bad) as table:
        assert_dealer_gets_exit_4(table)


def test_a_journal_halt_is_exit_4_through_the_socket(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "journal.db").write_bytes(b"this is not a database" * 100)
    with table_running(tmp_path / "state", tmp_path / "c.sock") as table:
        assert_dealer_gets_exit_4(table)


def test_a_refusal_by_the_rules_stays_exit_1(running_table: RunningTable) -> None:
    over = run_firebet("bet", "1", "9", "--socket", str(running_table.socket))
    assert over.returncode == 1 and "maximum" in over.stderr
