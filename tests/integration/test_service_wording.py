"""What the running service tells a dealer (issue 14): a reversed settlement is gone from
`status`, a roll refused while halted or in diagnostics says why, a second wager gives the
new total, `whoami` names the caller's role; dealer commands as real processes."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

from controller.service.jobs import Halt
from tests.support import RunningTable, run_firebet, table_running, wait_for


def cli(table: RunningTable, *args: str) -> tuple[int, str, str]:
    proc = run_firebet(*args, "--socket", str(table.socket))
    return proc.returncode, proc.stdout, proc.stderr


def test_a_void_of_the_seven_out_takes_its_settlement_out_of_status(
    running_table: RunningTable,
) -> None:
    t = running_table
    assert t.ask("bet", position=3, amount=5)["ok"]
    t.throw(2, 2)
    t.throw(3, 4)  # seven-out: hand 1 settled, lost
    assert t.status()["last_settlement"]["hand"] == 1
    code, out, err = cli(t, "void")
    assert code == 0, err
    assert "settlement of hand 1 reversed: hand 1 is back in play" in out
    s = t.status()
    assert s["last_settlement"] is None and s["hand"] == 1 and s["point"] == 4
    code, out, _ = cli(t, "status")
    assert code == 0 and "settled hand 1" not in out
    # and a later seven-out settles it again
    t.throw(3, 4)
    assert t.status()["last_settlement"]["hand"] == 1
    code, out, _ = cli(t, "status")
    assert "settled hand 1: 0 different points (none) - lose - #3 lost $5" in out
    assert "#3 $0" not in out


def test_a_roll_in_diagnostics_mode_names_the_mode(running_table: RunningTable) -> None:
    t = running_table
    code, _, err = cli(t, "roll", "2", "2")
    assert code != 0 and "the dice reader is working" in err  # the reader is fine: no roll
    assert t.ask("diagnostics-on")["ok"]
    code, _, err = cli(t, "roll", "2", "2")
    assert code == 1 and "diagnostics mode" in err and "reader is working" not in err
    assert "firebet diagnostics off" in err


def test_a_roll_on_a_halted_table_names_the_halt(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "journal.db").write_bytes(b"this is not a database" * 100)
    with table_running(state, tmp_path / "c.sock") as t:
        reply = t.ask("roll", d1=2, d2=2)
        assert not reply["ok"] and "halted" in reply["error"]
        assert "reader is working" not in reply["error"]


def test_a_second_wager_says_the_new_total(running_table: RunningTable) -> None:
    code, out, err = cli(running_table, "bet", "7", "1")
    assert code == 0, err
    assert out.strip() == "position 7: $1 fire bet taken"
    code, out, err = cli(running_table, "bet", "7", "2")
    assert code == 0, err
    assert out.strip() == "position 7: $2 fire bet added: $3 riding"


def test_whoami_names_the_callers_role(running_table: RunningTable) -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    code, out, err = cli(running_table, "whoami")
    assert code == 0, err
    assert out.splitlines()[0] == f"{me} (uid {os.getuid()}): technician"  # the service's user
    assert "clear-halt" in out and "roll" in out
    code, out, _ = cli(running_table, "whoami", "--json")
    reply = json.loads(out)
    assert reply["role"] == "technician" and reply["user"] == me and "clear-halt" in reply["may"]
    assert "sim-reader" not in reply["may"]  # a table on a reader: no bench device's op


def test_history_names_who_entered_a_manual_roll(running_table: RunningTable) -> None:
    t = running_table
    t.device.fault("CAMERA")
    wait_for(lambda: t.status()["mode"] == "reader_fault", what="the reader fault")
    code, _, err = cli(t, "roll", "3", "5")
    assert code == 0, err
    me = f"{pwd.getpwuid(os.getuid()).pw_name}({os.getuid()})"
    code, out, _ = cli(t, "history", "--json")
    hand = json.loads(out.splitlines()[-1])
    assert hand["rolls"] == [[3, 5]]
    (manual,) = [a for a in hand["actions"] if a["action"] == "manual_roll"]
    assert manual["actor"] == me and manual["dice"] == [3, 5]
    code, out, _ = cli(t, "history")
    assert f"{me} manual_roll dice=3 5" in " ".join(out.split())  # no Python list (#25)


def test_history_shows_the_clear_halt_with_who_and_why(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with table_running(state, tmp_path / "c.sock") as t:
        t.throw(2, 2)
        t.controller.queue.put(Halt(None, "a test halt"))
        wait_for(lambda: t.status()["mode"] == "halted", what="the halt")
        cleared = t.ask("clear-halt", note="checked the cable")
        assert cleared["ok"], cleared
        hand = t.ask("history", hands=1)["hands"][-1]
    (clear,) = [a for a in hand["actions"] if a["action"] == "clear_halt"]
    assert clear["note"] == "checked the cable" and "a test halt" in clear["was"]
    assert clear["actor"].endswith(f"({os.getuid()})")
    assert hand["rolls"] == [[2, 2]]
