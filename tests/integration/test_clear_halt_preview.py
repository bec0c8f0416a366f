"""clear-halt shows what it will set aside and asks first (issue 25): one edited $5 bet
sets aside the records after it, a 999-to-1 win among them, and the technician sees the
hands, wagers and payouts that come off history and the meters before saying yes; a note
is required; --yes is for scripts."""

from __future__ import annotations

import json
from pathlib import Path

from controller.core.commands import Bet, Roll
from controller.core.engine import Engine
from controller.journal import Journal, recover
from controller.journal.play import decide
from tests.support import run_firebet as firebet
from tests.support import table_running

ENGINE = Engine()
SIX_POINTS = [(2, 2), (2, 2), (2, 3), (2, 3), (3, 3), (3, 3), (4, 4), (4, 4), (4, 5), (4, 5)]


def build(state: Path) -> Path:
    """A $1 bet on 1, a $5 bet on 3, then all six points made and a seven-out: 999 to 1."""
    path = state / "journal.db"
    with Journal(path) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        decide(journal, replayed, Bet(1, 1, actor="alice"))
        decide(journal, replayed, Bet(3, 5, actor="alice"))
        for d1, d2 in [*SIX_POINTS, (5, 5), (5, 5), (2, 2), (3, 4)]:
            decide(journal, replayed, Roll(d1, d2, actor="alice"))
    edit_the_5_bet(path)
    return path


def edit_the_5_bet(path: Path) -> None:
    """The journal's (first) $5 bet edited to $4 in the file: its seal breaks."""
    data = bytearray(path.read_bytes())
    at = data.index(b'"amount":5')
    data[at + len(b'"amount":')] = ord("4")
    path.write_bytes(bytes(data))


def test_clear_halt_shows_the_hands_wagers_and_payouts_it_sets_aside(tmp_path: Path) -> None:
    build(tmp_path)
    where = ("--state-dir", str(tmp_path))
    assert firebet("journal", "verify", *where).returncode == 4
    no_note = firebet("clear-halt", *where, input="yes\n")
    assert no_note.returncode == 2 and "needs --note" in no_note.stderr

    declined = firebet("clear-halt", *where, "--note", "edited bet found", input="no\n")
    assert declined.returncode == 1, declined.stderr
    out = declined.stdout
    assert "set aside records" in out and "kept in the file, never replayed" in out
    # what the records set aside say, never as fact: marked unproven (issue 30)
    assert "hand 1: UNVERIFIED - it rests on records past the break at record 3" in out
    assert "unproven, as those records say: 6 different points (4, 5, 6, 8, 9, 10) - WIN " \
        "999 to 1 - #1 wins $999, #3 wins $3,996" in out  # fmt: skip
    assert "last verified (record 2): 0 different points (none) - in play; wagers #1 $1" in out
    assert "payouts $4,995; whatever they say comes off history and the meters" in out
    assert "Type yes to go on" in out and "not confirmed: the journal stays halted" in out
    assert firebet("journal", "verify", *where).returncode == 4  # still halted, nothing done

    done = firebet("clear-halt", *where, "--note", "edited bet found", input="yes\n")
    assert done.returncode == 0, done.stderr
    assert "halt cleared by" in done.stdout
    assert firebet("journal", "verify", *where).returncode == 0
    again = firebet("clear-halt", *where, "--note", "twice", "--yes")
    # not halted: refused (exit 1), as through the service (tests/e2e/test_exit_codes.py)
    assert again.returncode == 1 and "not halted: nothing to clear" in again.stderr


def test_through_the_service_the_same_preview_then_the_clear(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    build(state)
    sock = tmp_path / "c.sock"
    with table_running(state, sock) as t:
        assert t.status()["mode"] == "halted"
        where = ("--socket", str(sock), "--state-dir", str(state))
        declined = firebet("clear-halt", *where, "--note", "edited bet", input="\n")
        assert declined.returncode == 1, declined.stderr
        assert "firebet clear-halt would (through the service)" in declined.stdout
        assert "payouts $4,995; whatever they say comes off history" in declined.stdout
        assert t.status()["mode"] == "halted"
        done = firebet("clear-halt", *where, "--note", "edited bet", "--yes", "--json")
        assert done.returncode == 0, done.stderr
        assert "halt cleared through the service" in done.stderr  # the words: stdout is JSON
        (line,) = done.stdout.splitlines()  # one object (checked by its schema in firebet())
        shown = json.loads(line)
        assert (shown["ok"], shown["through"]) == (True, "service")
        assert shown["preview"]["paid"] == 4995 and "resumed from record 2" in shown["resumed"]
        assert t.status()["mode"] == "running"


def test_clear_halt_json_is_one_object_refused_or_done(tmp_path: Path) -> None:
    """#33: clear-halt took no --json; a script now reads one object (the words on stderr)."""
    build(tmp_path)
    where = ("--state-dir", str(tmp_path), "--json")
    no_note = firebet("clear-halt", *where)
    assert no_note.returncode == 2
    assert json.loads(no_note.stdout)["code"] == "bad_input"
    declined = firebet("clear-halt", *where, "--note", "edited bet found", input="no\n")
    assert declined.returncode == 1, declined.stderr
    refused = json.loads(declined.stdout)  # nothing but the object: the prompt is on stderr
    assert (refused["code"], refused["exit"]) == ("not_confirmed", 1)
    assert "Type yes to go on" in declined.stderr and "set aside records" in declined.stderr
    done = firebet("clear-halt", *where, "--note", "edited bet found", "--yes")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert (shown["through"], shown["preview"]["set_aside"]["records"][0]) == ("offline", 3)
    assert shown["preview"]["wagered"] == 4 and shown["preview"]["paid"] == 4995
    again = firebet("clear-halt", *where, "--note", "twice", "--yes")
    assert again.returncode == 1 and json.loads(again.stdout)["code"] == "not_halted"
