"""A halted table states only what it can prove (issue 30): a $5 bet edited to $4 in the
journal, then a restart. ``history``, ``export``, ``status`` and the ``clear-halt`` preview
mark every hand, wager and payout resting on the edited record or after it as unverified
(text and JSON, with the break's record number), never print the edited figure as fact,
and give the last verified figures beside it. Before, ``history`` printed ``#3 wins
$3,996`` with exit 0 and no warning."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from controller.core.commands import Bet, Roll
from controller.core.engine import Engine
from controller.journal import Journal, recover
from controller.journal.play import decide
from controller.service.jobs import Checked
from tests.integration.test_clear_halt_preview import SIX_POINTS, edit_the_5_bet
from tests.support import recall_firebet, table_running, wait_for
from tests.support import run_firebet as firebet

ENGINE = Engine()
EDITED = "$3,996"  # what the edited $4 would win at 999 to 1; the table paid $4,995


def build(state: Path) -> int:
    """Hand 1: a $2 bet on 1, lost (point 4, seven-out). Hand 2: a $1 bet on 1, a $5 bet
    on 3, six points made and a seven-out: 999 to 1. The $5 bet is then edited to $4 (its
    seal breaks): the record of that bet is returned (the break)."""
    path = state / "journal.db"
    with Journal(path) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        decide(journal, replayed, Bet(1, 2, actor="alice"))
        for d1, d2 in [(2, 2), (3, 4)]:
            decide(journal, replayed, Roll(d1, d2, actor="alice"))
        decide(journal, replayed, Bet(1, 1, actor="alice"))
        decide(journal, replayed, Bet(3, 5, actor="alice"))
        edited = journal.last_record
        for d1, d2 in [*SIX_POINTS, (5, 5), (5, 5), (2, 2), (3, 4)]:
            decide(journal, replayed, Roll(d1, d2, actor="alice"))
    edit_the_5_bet(path)
    return edited


def assert_no_edited_figure_as_fact(text: str) -> None:
    """The edited figure shows only on a line that says it is unproven."""
    for line in text.splitlines():
        if EDITED in line or "amount=4" in line:
            assert "unproven" in line or "UNVERIFIED" in line, line


def assert_history_marked(text: str, json_lines: list[dict[str, object]], edited: int) -> None:
    # hand 1 settled before the break: stated as fact
    assert "hand 1: 0 different points (none) - lose - #1 lost $2" in text
    assert f"hand 2: UNVERIFIED - it rests on records past the break at record {edited}" in text
    assert_no_edited_figure_as_fact(text)
    # the last verified figures: before the edited bet, only the $1 on 1 rode
    assert f"last verified (record {edited - 1}): 0 different points (none) - in play; " \
        "wagers #1 $1" in text  # fmt: skip
    assert re.search(rf"bet position=3 amount=4  UNVERIFIED \(record {edited}\)", text)
    one, two = json_lines[:2]
    assert one["verified"] is True and one["break"] == edited and one["last_verified"] is None
    assert two["verified"] is False and two["break"] == edited
    assert two["last_verified"] == {
        "record": edited - 1, "points": [], "unique_points": 0, "result": None,
        "odds_to_one": None, "payouts": {}, "wagers": {"1": 1},
    }  # fmt: skip
    actions = two["actions"]
    assert isinstance(actions, list)
    (edited_bet,) = [a for a in actions if a["record"] == edited]
    assert edited_bet["verified"] is False and edited_bet["amount"] == 4
    assert all("verified" not in a for a in actions if a["record"] < edited)


def test_history_export_and_the_preview_offline_mark_what_the_chain_does_not_prove(
    tmp_path: Path,
) -> None:
    edited = build(tmp_path)
    where = ("--state-dir", str(tmp_path), "--socket", str(tmp_path / "none.sock"))

    text = firebet("history", *where)
    as_json = firebet("history", "--json", *where)
    # a halted journal: the recall is shown, marked, and the exit says integrity (4)
    assert text.returncode == 4 and as_json.returncode == 4, text.stderr
    assert f"journal halted: record {edited} does not match its seal" in text.stderr
    assert "UNVERIFIED (marked)" in text.stderr
    assert_history_marked(text.stdout, [json.loads(x) for x in as_json.stdout.splitlines()], edited)

    exported = firebet("export", "--format", "jsonl", *where)
    assert exported.returncode == 0, exported.stderr
    assert f"every record from {edited} on is marked unverified" in exported.stderr
    records = [json.loads(x) for x in exported.stdout.splitlines()]
    assert all(r["break"] == edited for r in records)
    assert [r["record"] for r in records if not r["verified"]] == list(
        range(edited, records[-1]["record"] + 1)
    )
    rows = list(csv.DictReader(io.StringIO(firebet("export", "--format", "csv", *where).stdout)))
    assert {r["verified"] for r in rows if int(r["record"]) < edited} == {"yes"}
    assert {r["verified"] for r in rows if int(r["record"]) >= edited} == {"no"}
    # the CSV's plain columns (no payload: contract 2) show the edited bet, marked unproven
    (bet,) = [r for r in rows if int(r["record"]) == edited]
    assert "payload" not in bet and bet["verified"] == "no"
    assert (bet["what"], bet["position"], bet["amount"]) == ("bet", "3", "4")

    preview = firebet("clear-halt", *where, "--note", "edited bet", input="no\n")
    assert preview.returncode == 1, preview.stderr
    out = preview.stdout
    assert f"hand 2: UNVERIFIED - it rests on records past the break at record {edited}" in out
    assert f"last verified (record {edited - 1}): " in out and "wagers #1 $1" in out
    assert "unproven, as the records set aside say: fire bets taken $4, payouts $4,995" in out
    assert_no_edited_figure_as_fact(out)


def test_through_the_service_after_a_restart_the_same_marks(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    edited = build(state)
    sock = tmp_path / "c.sock"
    with table_running(state, sock) as t:
        status = t.status()
        assert status["mode"] == "halted"
        # recovery stopped at the break: the state shown is the one the records before
        # it prove (the $1 riding on 1), and it says so
        assert status["verified"] is True and status["break"] == edited
        assert status["bets"] == {"1": 1} and status["last_verified"] is None
        where = ("--socket", str(sock))
        text = recall_firebet(*where)
        as_json = recall_firebet("--json", *where)
        assert text.returncode == 4 and as_json.returncode == 4, text.stderr
        lines = [json.loads(x) for x in as_json.stdout.splitlines()]
        assert_history_marked(text.stdout, lines, edited)
        preview = firebet("clear-halt", *where, "--note", "edited bet", input="no\n")
        assert "firebet clear-halt would (through the service)" in preview.stdout
        assert f"past the break at record {edited}" in preview.stdout
        assert_no_edited_figure_as_fact(preview.stdout)
        done = firebet("clear-halt", *where, "--note", "edited bet", "--yes")
        assert done.returncode == 0, done.stderr
        # cleared: nothing is past a break any more, and history exits 0 unmarked
        after = recall_firebet("--json", *where)
        assert after.returncode == 0, after.stderr
        assert all("verified" not in json.loads(x) for x in after.stdout.splitlines())
        assert t.status()["verified"] is True and t.status()["break"] is None


def test_a_check_begun_before_the_clear_halt_does_not_halt_the_table_again(
    tmp_path: Path,
) -> None:
    """The full check after ready runs apart and may end after the technician cleared the
    halt. What it found (the edited record, now set aside) must not halt the cleared table
    again, nor stand as the table's check: the check begun with the clear-halt answers.
    Before, a late answer halted the table a second time on the very break it had cleared
    (seen under load: ``history`` right after ``clear-halt`` exited 4)."""
    state = tmp_path / "state"
    state.mkdir()
    edited = build(state)
    with table_running(state, tmp_path / "c.sock") as t:
        assert t.status()["mode"] == "halted"
        done = t.ask("clear-halt", note="edited bet")
        assert done["ok"] is True, done
        wait_for(lambda: t.status()["journal_check"] == "ok", what="the check after the clear")
        # the answer of the check begun before the clear arrives late: the edited record
        t.controller.queue.put(Checked("damage", edited, "does not match its seal", clears=0))
        # a bet goes through the same queue after it: by its reply the late answer was read
        assert t.controller.submit(Bet(5, 1, actor="alice"))["ok"] is True
        status = t.status()
        assert status["mode"] != "halted" and status["journal_check"] == "ok", status
        assert status["bets"].get("5") == 1
