"""The CSV export is a spreadsheet's view (issue 33, command-line contract 2): plain
columns only, no JSON in any cell, over a journal holding every kind of record (starts,
rules and a change of them, bets, cancels, rolls from the reader and by hand, a void, a
correction, a surrender, a confirmation, a reader's HELLO, diagnostics on and off, a halt
and its clear-halt); each row's plain columns say what its JSONL line's sealed payload
says. Before, the CSV carried the payload's JSON text in a cell."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

from controller.cli.audit import CSV_FIELDS, PLAIN_FIELDS, plain_columns
from controller.core.commands import Confirm, Correct, ReaderHello, Roll
from controller.core.config import load_config
from controller.journal import RecordKind, clear_halt
from controller.journal.system import diagnostics_body
from tests.floor_support import TableJournal
from tests.integration.test_clear_halt_preview import SIX_POINTS
from tests.support import run_firebet

HOUSE = '[firebet]\npreset = "custom"\npays = { 3 = 5, 4 = 30, 5 = 300, 6 = 1000 }\nmax_wager = 7\n'
COLUMNS = ("d1", "d2", "position", "amount", "hand")  # the payload's names a cell each


def every_kind(state: Path) -> None:
    """A journal with every kind of record the table writes, and each dealer command."""
    table = TableJournal(state / "journal.db", config=load_config(None))  # start, rules
    try:
        table.do("bet 1 5", "bet 4 2", "cancel 4", "4 2", "void", "bet 3 5")
        table.apply(Roll(2, 2, source="reader", seq=17))
        table.apply(Roll(3, 4, source="manual", actor="dealer-7"))  # seven-out
        table.apply(ReaderHello(seq=0, model="DR-7", firmware="2.1.0"))
        table.do("bet 3 5", *(f"{a} {b}" for a, b in SIX_POINTS[:3]))
        table.apply(Correct(1, 4, actor="dealer-7"))  # the last roll (2 3) read wrong
        table.do(*(f"{a} {b}" for a, b in SIX_POINTS[3:]), "5 5", "5 5", "3 4")
        alert = table.replay.state.alert_hand
        assert alert is not None, "the 999 to 1 win raised no surveillance alert"
        table.apply(Confirm(alert, "sam", "c-1"))
        table.do("bet 2 1", "4 4", "surrender")
        house = state / "house.toml"
        house.write_text(HOUSE)
        table.take_rules(load_config(house))  # what changed: was / now, nested
        journal = table.journal
        for on in (True, False):
            journal.append_system(
                RecordKind.MODE, actor="tech-tom", state=table.replay.state,
                payload=diagnostics_body(on),
            )  # fmt: skip
        journal.halt(None, "self-check failed: marker lamp 6 dark")
    finally:
        table.close()


def clear(state: Path) -> None:
    table = TableJournal(state / "journal.db")
    try:
        done = clear_halt(table.journal, table.engine.rules, "tech-tom", note="lamp replaced")
        assert done is not None
        table.replay = done[0]
        table.do("bet 6 5", "6 1")
    finally:
        table.close()


def export(state: Path, form: str) -> str:
    done = run_firebet("export", "--format", form, "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    return done.stdout


def no_json(rows: list[dict[str, str]]) -> None:
    """No cell is JSON: none starts with ``{`` or ``[``, none reads as an object or list."""
    for row in rows:
        for name, cell in row.items():
            assert not cell.lstrip().startswith(("{", "[")), (row["record"], name, cell)
            try:
                read = json.loads(cell)
            except ValueError:
                continue
            assert not isinstance(read, dict | list), (row["record"], name, cell)


def says_what_the_payload_says(row: dict[str, str], payload: dict[str, Any]) -> None:
    """The row's plain cells carry the payload: ``what`` its command (or the kind), a
    column each for the dice, position, amount and hand, every other entry in ``detail``."""
    rest = dict(payload)
    command = rest.pop("command", None)
    assert row["what"] == (command if row["kind"] == "command" else row["kind"])
    for name in COLUMNS:
        assert row[name] == (str(rest.pop(name)) if name in rest else ""), (row, name)
    if rest.get("at") == "":
        rest.pop("at")
    parts = row["detail"].split("; ") if row["detail"] else []
    for key in rest:
        assert any(p.startswith((f"{key}=", f"{key}.")) for p in parts), (key, row["detail"])


def test_the_csv_has_plain_columns_only_and_they_say_what_the_payload_says(
    tmp_path: Path,
) -> None:
    every_kind(tmp_path)
    halted = list(csv.DictReader(io.StringIO(export(tmp_path, "csv"))))
    assert list(halted[0]) == [*CSV_FIELDS, "verified", *PLAIN_FIELDS]
    no_json(halted)
    clear(tmp_path)

    text = export(tmp_path, "csv")
    header = next(csv.reader(io.StringIO(text)))
    assert header == [*CSV_FIELDS, *PLAIN_FIELDS] and "payload" not in header
    rows = list(csv.DictReader(io.StringIO(text)))
    lines = [json.loads(x) for x in export(tmp_path, "jsonl").splitlines()]
    assert {r["kind"] for r in rows} == {str(k) for k in RecordKind}  # every kind
    commands = {r["what"] for r in rows if r["kind"] == "command"}
    assert {"bet", "cancel", "roll", "void", "correct", "confirm", "surrender"} <= commands
    assert "reader_hello" in commands
    no_json(rows)

    # each row is its JSONL line (record, chain), and says what that line's payload says
    assert [(int(r["record"]), r["hash"], r["prev_hash"]) for r in rows] == [
        (x["record"], x["hash"], x["prev_hash"]) for x in lines
    ]
    for row, line in zip(rows, lines, strict=True):
        assert (row["at"], row["actor"], row["kind"]) == (line["at"], line["actor"], line["kind"])
        assert row["snapshot"] == (line["snapshot"] or "")
        says_what_the_payload_says(row, line["payload"])

    # the figures, as a reviewer reads them
    def plain(row: dict[str, str]) -> tuple[str, ...]:
        return tuple(row[k] for k in ("what", *COLUMNS))

    said = [plain(r) for r in rows]
    assert ("bet", "", "", "1", "5", "") in said
    assert ("cancel", "", "", "4", "", "") in said
    assert ("correct", "1", "4", "", "", "") in said
    (reader_roll,) = [r for r in rows if r["what"] == "roll" and "seq=17" in r["detail"]]
    assert (reader_roll["d1"], reader_roll["d2"], reader_roll["detail"]) == ("2", "2", "seq=17")
    (manual,) = [r for r in rows if "source=manual" in r["detail"]]
    assert (manual["actor"], manual["d1"], manual["d2"]) == ("dealer-7", "3", "4")
    (confirm,) = [r for r in rows if r["what"] == "confirm"]
    assert confirm["hand"] != "" and int(confirm["hand"]) >= 1
    assert "by=sam" in confirm["detail"].split("; ")
    hello = next(r for r in rows if r["what"] == "reader_hello")
    assert {"model=DR-7", "firmware=2.1.0"} <= set(hello["detail"].split("; "))
    changed = [r for r in rows if r["kind"] == "rules" and "changed." in r["detail"]]
    assert changed and "changed.firebet.pays.was.4=24" in changed[-1]["detail"].split("; ")
    assert [r["detail"] for r in rows if r["kind"] == "mode"] == [
        "diagnostics=true",
        "diagnostics=false",
    ]
    (halt,) = [r for r in rows if r["kind"] == "halt"]
    assert halt["detail"].startswith("reason=self-check failed: marker lamp 6 dark")
    (cleared,) = [r for r in rows if r["kind"] == "clear_halt"]
    assert "note=lamp replaced" in cleared["detail"].split("; ")


def test_a_record_that_is_not_json_is_named_unreadable_not_copied_as_a_cell() -> None:
    """A damaged body (not JSON), a body that is not an object, and a column's name holding
    an object or a list: still no cell that starts as JSON."""
    damaged = plain_columns("command", '{"command":"bet","posit')
    assert damaged == ["command", "", "", "", "", "", 'unreadable={"command":"bet","posit']
    assert plain_columns("command", "[4,2]") == ["command", "", "", "", "", "", "payload=4 2"]
    odd = plain_columns("command", '{"command":"roll","d1":{"x":1},"hand":[2,3],"d2":5}')
    assert odd == ["roll", "", "5", "", "", "", "d1.x=1; hand=2,3"]
    assert plain_columns("rules", '{"command":{"a":1}}') == [
        "rules", "", "", "", "", "", "command.a=1",
    ]  # fmt: skip


def test_a_tampered_record_s_text_is_never_a_formula_in_the_spreadsheet(tmp_path: Path) -> None:
    """Someone who edits the journal file cannot plant a formula in the auditor's
    spreadsheet: a cell (or a part of it after ``;``, ``,``, ``|`` or a space) that would
    start with ``=``, ``+``, ``-`` or ``@`` starts with ``'``; honest cells are unchanged."""
    table = TableJournal(tmp_path / "journal.db", config=load_config(None))
    try:
        table.do("bet 1 5", "4 2")
    finally:
        table.close()
    with sqlite3.connect(tmp_path / "journal.db") as db:
        (bet,) = db.execute("SELECT record FROM records WHERE body LIKE '%\"bet\"%'").fetchone()
        db.execute(
            "UPDATE records SET actor = '@SUM(1)', body = replace(body, '\"command\":\"bet\"',"
            ' \'"command":"=HYPERLINK(1)","note":"x;-2+3"\') WHERE record = ?',
            (bet,),
        )
    db.close()
    done = run_firebet("export", "--format", "csv", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    (edited,) = [r for r in rows if r["record"] == str(bet)]
    assert edited["verified"] == "no"  # the seal broke: the export says so
    assert edited["actor"] == "'@SUM(1)" and edited["what"] == "'=HYPERLINK(1)"
    assert "note=x;'-2+3" in edited["detail"]
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "-", "@")), row
    (roll,) = [r for r in rows if r["what"] == "roll"]
    assert (roll["d1"], roll["d2"]) == ("4", "2")  # honest cells as they were
