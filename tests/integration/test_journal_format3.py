"""Format 3: a reader roll's body stored as one integer, everything else as format 2
(docs/journal.md, "Files"); a format-2 journal plays on as it is, and ``firebet journal
migrate`` packs it (issue 31).

``tests/data/format2/`` is a real format-2 journal: written by ``firebet sim --seed 7
--rolls 160`` (bets, reader rolls, the service's start and rules records, a snapshot
every 40 records) by the code before format 3, with its key and head file.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from controller.clock import now_ms
from controller.core.commands import Roll
from controller.core.engine import Engine
from controller.core.times import iso
from controller.journal import Journal, recover
from controller.journal import verify as verify_journal
from controller.journal.play import decide
from controller.journal.recipe import BODY_SQL, FORMAT, pack_body
from tests.support import ROOT
from tests.support import run_firebet as firebet

ENGINE = Engine()
FORMAT_2 = ROOT / "tests" / "data" / "format2"
SEAL_WORDS = "does not match its seal"


def format_2_state(tmp_path: Path) -> Path:
    """A state directory holding a copy of the format-2 journal."""
    state = tmp_path / "state"
    shutil.copytree(FORMAT_2, state)
    (state / "journal.key").chmod(0o600)
    return state


def sql(path: Path, query: str, *args: object) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        found = db.execute(query, args).fetchall()
        db.commit()
        return found
    finally:
        db.close()


def reader_roll(d1: int, d2: int, seq: int) -> Roll:
    """A roll as the reader's driver hands it over: numbered, timed now."""
    return Roll(d1, d2, seq=seq, actor="reader", at=iso(now_ms()))


def exported(state: Path) -> list[dict[str, object]]:
    done = firebet("export", "--format", "jsonl", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_format_2_journal_migrates_to_format_3_the_same_records_packed(
    tmp_path: Path,
) -> None:
    state = format_2_state(tmp_path)
    path = state / "journal.db"
    assert sql(path, "SELECT value FROM meta WHERE key = 'format'") == [("2",)]
    assert firebet("journal", "verify", "--state-dir", str(state)).returncode == 0
    before = exported(state)
    size_before = path.stat().st_size
    bodies = [body for (body,) in sql(path, "SELECT body FROM records")]
    rolls = sum(1 for body in bodies if isinstance(pack_body(str(body)), int))
    assert rolls > 100  # the reader's rolls (not its HELLO, nor the bets)

    done = firebet("journal", "migrate", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert f"migrated {len(before)} records to format 3" in done.stdout
    aside = list(state.glob("journal-aside-*"))
    assert len(aside) == 1 and (aside[0] / "journal.db").exists()  # the old file, kept whole
    assert not list(state.glob("journal.db.migrating*"))

    assert sql(path, "SELECT value FROM meta WHERE key = 'format'") == [(str(FORMAT),)]
    packed = sql(path, "SELECT count(*) FROM records WHERE typeof(body) = 'integer'")[0][0]
    assert packed == rolls  # every reader roll's body, and nothing else
    assert path.stat().st_size < size_before
    after = exported(state)
    assert after[: len(before)] == before  # the very records, texts and chain
    migration = after[-1]
    assert migration["kind"] == "start" and migration["prev_hash"] == before[-1]["hash"]
    payload = migration["payload"]
    assert isinstance(payload, dict) and payload["format"] == FORMAT
    assert payload["migrated"]["from_format"] == 2
    assert payload["migrated"]["records"] == len(before)
    assert payload["migrated"]["aside"] == aside[0].name
    verified = firebet("journal", "verify", "--state-dir", str(state))
    assert verified.returncode == 0, verified.stderr
    with Journal(path) as journal:  # and it plays on: a reader roll journaled packed
        replayed = recover(journal, ENGINE.rules).replay
        seq = (replayed.state.reader_seq or 0) + 1
        decide(journal, replayed, reader_roll(3, 4, seq))
        last = journal.last_record
        assert verify_journal(journal, ENGINE.rules).ok
    assert sql(path, "SELECT typeof(body) FROM records WHERE record = ?", last) == [("integer",)]


def test_a_format_2_journal_plays_on_as_it_is(tmp_path: Path) -> None:
    """A table upgraded without the migration keeps its journal's format: a roll is
    journaled as text (a format-2 ``body`` column is TEXT, which would keep an integer
    as its digits), and the journal verifies."""
    state = format_2_state(tmp_path)
    path = state / "journal.db"
    with Journal(path) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        seq = (replayed.state.reader_seq or 0) + 1
        decide(journal, replayed, reader_roll(2, 5, seq))
        last = journal.last_record
        assert verify_journal(journal, ENGINE.rules).ok
    assert sql(path, "SELECT typeof(body), body FROM records WHERE record = ?", last) == [
        ("text", f'{{"command":"roll","d1":2,"d2":5,"seq":{seq}}}')
    ]
    assert sql(path, "SELECT value FROM meta WHERE key = 'format'") == [("2",)]


def test_migrate_refuses_a_format_2_journal_that_does_not_verify(tmp_path: Path) -> None:
    state = format_2_state(tmp_path)
    path = state / "journal.db"
    (record,) = sql(path, "SELECT min(record) FROM records WHERE actor = 'sim-player'")[0]
    sql(
        path,
        "UPDATE records SET body = replace(body, '\"amount\":', '\"amount\":9') WHERE record = ?",
        record,
    )
    old = path.read_bytes()
    done = firebet("journal", "migrate", "--state-dir", str(state))
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"record {record} {SEAL_WORDS}" in done.stderr and "not migrated" in done.stderr
    assert not list(state.glob("journal-aside-*"))
    assert not list(state.glob("journal.db.migrating*"))
    assert path.read_bytes() == old  # left as it was
    assert sql(path, "SELECT value FROM meta WHERE key = 'format'") == [("2",)]


def packed_journal(state: Path, rolls: int) -> Path:
    path = state / "journal.db"
    with Journal(path) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        for i in range(rolls):
            decide(journal, replayed, reader_roll(1 + i % 6, 1 + i * 5 % 6, i + 1))
    return path


def test_a_packed_roll_edited_is_caught_by_its_seal(tmp_path: Path) -> None:
    """The integer is the roll: one more seq (body + 36) or other dice (body + 1) is a
    plausible roll that its seal refuses; the same roll written back as its text is the
    same record."""
    for edit in ("body + 36", "body + 1", "body - 36"):
        state = tmp_path / edit.replace(" ", "")
        path = packed_journal(state, 12)
        assert sql(path, "SELECT typeof(body) FROM records WHERE record = 6") == [("integer",)]
        sql(path, f"UPDATE records SET body = {edit} WHERE record = 6")
        done = firebet("journal", "verify", "--state-dir", str(state))
        assert done.returncode == 4 and f"record 6 {SEAL_WORDS}" in done.stderr, done.stderr
    state = tmp_path / "as text"
    path = packed_journal(state, 12)
    sql(path, f"UPDATE records SET body = {BODY_SQL} WHERE record = 6")
    assert sql(path, "SELECT typeof(body) FROM records WHERE record = 6") == [("text",)]
    assert firebet("journal", "verify", "--state-dir", str(state)).returncode == 0


def test_migrate_json_says_which_format_the_journal_was_in(tmp_path: Path) -> None:
    """``journal migrate --json`` names the format it moved from (cli-journal-migrate)."""
    state = format_2_state(tmp_path)
    records = len(exported(state))
    done = firebet("journal", "migrate", "--json", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert (said["ok"], said["from_format"], said["records"]) == (True, 2, records)
    assert Path(said["aside"]).name.startswith("journal-aside-")
