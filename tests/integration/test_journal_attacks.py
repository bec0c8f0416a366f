"""A person with the state directory (and not the key) cannot make the table forget,
start fresh, or adopt a history of their own (docs/journal.md, issue 10).

Each attack: the table halts with a reason naming what is missing or wrong, and
``firebet journal verify`` exits 4. A new journal comes only from ``journal init``.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from controller.core.commands import Bet, Roll
from controller.core.engine import Engine
from controller.core.errors import JournalKeyUnreadable
from controller.journal import Journal, canonical, clear_halt, recover, store
from controller.journal import verify as verify_journal
from controller.journal.key import read_key
from controller.journal.legacy import old_hash
from controller.journal.play import decide
from controller.journal.recipe import GENESIS, seal
from tests.support import ROOT, RunningTable, lines_of, wait_for
from tests.support import run_firebet as firebet

ENGINE = Engine()

WRITER = """
import sys
from pathlib import Path
from controller.core.commands import Roll
from controller.core.engine import Engine
from controller.journal import Journal, recover
from controller.journal.play import decide
engine = Engine()
journal = Journal(Path(sys.argv[1]) / "journal.db")
replayed = recover(journal, engine.rules).replay
for i in range(int(sys.argv[2])):
    decide(journal, replayed, Roll(1 + i % 6, 1 + (i * 5) % 6, seq=i))
    print("ACK", i, flush=True)
print("DONE", flush=True)
sys.stdin.readline()  # stay alive (WAL not checkpointed) until killed
"""


def killed_writer(state: Path, rolls: int) -> int:
    """A writer that ACKs ``rolls`` rolls and is killed with SIGKILL; the ACKs seen."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(state), str(rolls)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acked = 0
    for line in lines_of(proc.stdout, "the killed writer"):
        if line.startswith("ACK"):
            acked += 1
        if line.startswith("DONE"):
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    proc.stdout.close()
    return acked


def build(state: Path, rolls: int = 12, snapshot_every: int = 1000) -> Path:
    path = state / "journal.db"
    with Journal(path, snapshot_every=snapshot_every) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        decide(journal, replayed, Bet(1, 5, actor="alice"))
        for i in range(rolls):
            decide(journal, replayed, Roll(1 + i % 6, 1 + (i * 5) % 6, seq=i))
    return path


def halted(path: Path) -> str:
    """The halt reason at the next start (fails when the journal starts normally)."""
    with Journal(path) as journal:
        recovered = recover(journal, ENGINE.rules)
        assert recovered.halted is not None, "started as if nothing happened"
        return recovered.halted.describe()


def verify(state: Path) -> subprocess.CompletedProcess[str]:
    done = firebet("journal", "verify", "--state-dir", str(state))
    assert done.returncode == 4, done.stdout + done.stderr
    return done


# 1. never a fresh start -------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["removed", "emptied", "truncated", "all journal files removed"])
def test_a_missing_or_cut_journal_file_halts_never_a_fresh_game(
    tmp_path: Path, damage: str
) -> None:
    path = build(tmp_path)
    if damage == "removed":
        path.unlink()
    elif damage == "emptied":
        path.write_bytes(b"")
    elif damage == "truncated":
        os.truncate(path, 4096 * 2)
    else:
        for name in ("journal.db", "journal.db-wal", "journal.db-shm", "journal.db.head"):
            tmp_path.joinpath(name).unlink(missing_ok=True)
    reason = verify(tmp_path).stderr
    assert "journal.db" in reason
    assert "journal.db" in halted(path)
    with Journal(path) as journal:  # and still halted: nothing was replaced by a fresh file
        recovered = recover(journal, ENGINE.rules)
        assert recovered.halted is not None
        assert recovered.state.rolls == 0


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_acked_rolls_never_vanish_with_the_wal_after_sigkill(tmp_path: Path, damage: str) -> None:
    acked = killed_writer(tmp_path, 40)
    assert acked == 40
    wal = tmp_path / "journal.db-wal"
    assert wal.exists() and wal.stat().st_size > 0
    if damage == "deleted":
        wal.unlink()
        tmp_path.joinpath("journal.db-shm").unlink(missing_ok=True)
    else:
        # cut inside the frames the 40 commits wrote (the WAL is written out ahead with zeros)
        os.truncate(wal, store.WAL_HEADER + 20 * (store.FRAME_HEADER + 4096))
    reason = halted(tmp_path / "journal.db")
    assert "acknowledged but gone" in reason and "41" in reason  # record 41 = the 40th roll
    if damage == "deleted":
        assert "journal.db-wal is missing" in reason
    assert "acknowledged but gone" in verify(tmp_path).stderr


def test_a_checkpoint_cut_off_half_way_is_not_a_truncated_file(tmp_path: Path) -> None:
    """A checkpoint writes page 1 (with the new page count) before the pages after it.
    Killed there, the file is shorter than its header says, but every page is still in
    the write-ahead log: the table starts with every record, no "truncated" halt.

    Regression: a check beside a running service read the header during a checkpoint
    and halted a healthy table (CI, 4 Dec 2026).
    """
    state = tmp_path / "state"
    build(state, rolls=12)
    assert killed_writer(state, 200) == 200  # the new records are in the log, not the file
    db = state / "journal.db"
    before = db.read_bytes()
    done = tmp_path / "checkpointed"
    shutil.copytree(state, done)
    copy = sqlite3.connect(done / "journal.db")
    copy.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy.close()
    after = (done / "journal.db").read_bytes()
    assert len(after) > len(before), "the new records did not grow the file"
    with Journal(done / "journal.db") as whole:
        records = recover(whole, ENGINE.rules).last_record
    assert records > 1 + 1 + 12  # start, bet, rolls: and the killed writer's rolls
    db.write_bytes(after[: len(before)])  # pages 1..n written, the file not yet grown
    state.joinpath("journal.db-shm").unlink(missing_ok=True)  # as after a crash

    with Journal(db) as journal:
        recovered = recover(journal, ENGINE.rules)
        assert recovered.halted is None, recovered.halted
        assert recovered.last_record == records
        assert verify_journal(journal, ENGINE.rules).ok


def test_a_file_cut_beside_a_write_ahead_log_still_halts(tmp_path: Path) -> None:
    """With records in the log the file's size is not judged alone, but pages really
    cut from the file are still found: the table halts, never a fresh or short game."""
    state = tmp_path / "state"
    build(state, rolls=300)
    killed_writer(state, 5)
    db = state / "journal.db"
    assert state.joinpath("journal.db-wal").stat().st_size > store.WAL_HEADER
    os.truncate(db, 4096 * 2)
    assert "journal.db" in verify(state).stderr
    halted(db)


def test_a_wal_written_out_ahead_loses_nothing_at_a_sigkill(tmp_path: Path) -> None:
    """The writer writes the WAL out with zeros at start (a commit then rewrites blocks
    already there); after a SIGKILL the zeros past the last frame are not taken for
    records, and every ACKed roll is there."""
    state = tmp_path / "state"
    acked = killed_writer(state, 30)
    wal = state / "journal.db-wal"
    assert wal.stat().st_size >= store.WAL_HEADER + store.CHECKPOINT_PAGES * (
        store.FRAME_HEADER + 4096
    )
    with Journal(state / "journal.db") as journal:
        recovered = recover(journal, ENGINE.rules)
        assert recovered.halted is None
        assert recovered.last_record == 1 + acked  # the start record first
        report = verify_journal(journal, ENGINE.rules)
    assert report.ok, report.problems


def test_a_missing_snapshot_or_head_file_halts(tmp_path: Path) -> None:
    path = build(tmp_path, rolls=12, snapshot_every=5)
    db = sqlite3.connect(path)
    db.execute("DELETE FROM snapshots WHERE record = 10")
    db.commit()
    db.close()
    assert "the snapshot of record 10 is missing" in halted(path)
    assert "snapshot of record 10 is missing" in verify(tmp_path).stderr

    other = tmp_path / "other"
    path = build(other)
    other.joinpath("journal.db.head").unlink()
    assert "journal.db.head is missing" in halted(path)
    verify(other)


def test_files_removed_while_the_table_runs_halt_it(running_table: RunningTable) -> None:
    table = running_table
    table.throw(2, 2)
    state = table.controller.state_dir
    (state / "journal.db-wal").unlink()
    wait_for(lambda: table.status()["mode"] == "halted", what="halted")
    # removed, or already "replaced": a connection the service opens after the unlink (its
    # background full check, started after ready) makes a new, empty WAL; either halts
    assert re.search(r"journal\.db-wal was (removed|replaced)", table.status()["halted"])
    table.throw(3, 3, acked=False)
    assert table.status()["rolls"] == 1  # nothing more was ACKed into the deleted file
    assert (state / "journal.db.halt").exists()


# 2. the keyed chain -----------------------------------------------------------------------------
def reseal(path: Path, first: int, key: bytes) -> None:
    """Seal every record from ``first`` on again, with ``key``."""
    db = sqlite3.connect(path)
    rows = db.execute("SELECT record, at, actor, kind, body FROM records ORDER BY record")
    snaps = dict(db.execute("SELECT record, state FROM snapshots").fetchall())
    prev = GENESIS
    for number, at, actor, kind, body in rows.fetchall():
        if number >= first:
            mac = seal(key, prev, number, at, actor, kind, body, snaps.get(number))
            db.execute("UPDATE records SET mac = ? WHERE record = ?", (mac, number))
        prev = db.execute("SELECT mac FROM records WHERE record = ?", (number,)).fetchone()[0]
    db.commit()
    db.close()


def test_the_whole_chain_rewritten_without_the_key_does_not_verify(tmp_path: Path) -> None:
    path = build(tmp_path)
    db = sqlite3.connect(path)
    body = canonical({"amount": 500, "command": "bet", "position": 1})
    db.execute("UPDATE records SET body = ? WHERE record = 2", (body,))
    db.commit()
    db.close()
    reseal(path, 1, secrets.token_bytes(32))  # every record, genesis too, with a key of their own
    assert "record 1 does not match its seal" in verify(tmp_path).stderr
    tmp_path.joinpath("journal.db.head").unlink()  # and no head to give them away: still caught
    assert "record 1" in verify(tmp_path).stderr


def test_deleting_the_last_records_does_not_verify(tmp_path: Path) -> None:
    path = build(tmp_path)
    db = sqlite3.connect(path)
    db.execute("DELETE FROM records WHERE record > 10")
    db.commit()
    db.close()
    assert "records 11..14 acknowledged but gone" in verify(tmp_path).stderr


def test_the_key_is_made_once_0600_and_a_journal_whose_key_is_gone_halts(tmp_path: Path) -> None:
    path = build(tmp_path)
    key = tmp_path / "journal.key"
    assert key.stat().st_mode & 0o777 == 0o600
    saved = key.read_bytes()
    key.unlink()
    assert "journal key" in halted(path) and "missing" in halted(path)
    assert not key.exists()  # never made again over a journal that had one
    assert "journal key" in verify(tmp_path).stderr
    key.write_text(secrets.token_hex(32) + "\n")
    assert "not the key this journal was made with" in halted(path)
    key.write_bytes(saved)
    os.unlink(tmp_path / "journal.db.halt")
    with Journal(path) as journal:
        assert recover(journal, ENGINE.rules).halted is None


def test_verify_and_export_say_what_they_need_when_the_key_is_unreadable(tmp_path: Path) -> None:
    build(tmp_path)
    key = tmp_path / "journal.key"
    with (
        mock.patch("pathlib.Path.read_text", side_effect=PermissionError(13, "denied")),
        pytest.raises(JournalKeyUnreadable, match=r"not readable by this user.*service's user"),
    ):
        read_key(key)
    key.chmod(0o000)
    if os.geteuid() != 0:  # root reads it anyway: the unit check above covers root
        done = firebet("journal", "verify", "--state-dir", str(tmp_path))
        assert done.returncode == 1 and "service's user" in done.stderr
    key.chmod(0o600)
    key.rename(tmp_path / "elsewhere.key")
    done = firebet("export", "--format", "jsonl", "--state-dir", str(tmp_path))
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 14
    assert "can be checked only with the key" in done.stderr


# 3. clear-halt: the longest prefix that verifies --------------------------------------------
def test_clear_halt_never_adopts_a_forged_snapshot(tmp_path: Path) -> None:
    path = build(tmp_path, rolls=30, snapshot_every=10)
    with Journal(path) as journal:
        recover(journal, ENGINE.rules)
        honest = {r.record: r for r in journal.records()}
    db = sqlite3.connect(path)
    forged = db.execute("SELECT state FROM snapshots WHERE record = 30").fetchone()[0]
    forged = forged.replace('"points":[', '"points":[4,5,6,8,9,').replace('"hand":', '"hand":50')
    db.execute("UPDATE snapshots SET state = ? WHERE record = 30", (forged,))
    db.commit()
    db.close()
    reseal(path, 30, secrets.token_bytes(32))  # re-sealed, but not with the table's key
    assert "record 30" in halted(path)

    done = firebet("clear-halt", "--state-dir", str(tmp_path), "--note", "forged snapshot", "--yes")
    assert done.returncode == 0, done.stderr
    assert "resumed from record 29" in done.stdout
    # 30..32 rolls, 33 the halt: nothing after the proven prefix is part of the game
    assert "records 30..33" in done.stdout and "snapshot(s) at record 30" in done.stdout
    proven = ENGINE.run([Bet(1, 5), *(Roll(1 + i % 6, 1 + (i * 5) % 6, seq=i) for i in range(27))])
    with Journal(path, snapshot_every=10) as journal:
        recovered = recover(journal, ENGINE.rules)
        assert recovered.halted is None
        state = recovered.state  # the state records 1..29 prove, not the forged one
        assert (state.points, state.hand, state.rolls) == (proven.points, proven.hand, 27)
        last = journal.last()
        assert last is not None and last.kind == "clear_halt"
        assert last.data()["resume_from"] == 29
        assert last.data()["set_aside"] == {"records": [30, 33], "snapshots": [30]}
        assert honest[29].hash == next(r for r in journal.records() if r.record == 29).hash
    done = firebet("journal", "verify", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "set aside by clear-halt" in done.stdout


def test_clear_halt_after_a_lost_wal_numbers_on_past_the_lost_records(tmp_path: Path) -> None:
    path = build(tmp_path, rolls=5)
    with Journal(path) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        before = replayed.state
        decide(journal, replayed, Roll(3, 3, seq=50))
        decide(journal, replayed, Roll(4, 4, seq=51))
        assert journal._db is not None
        journal._db.execute("DELETE FROM records WHERE record > 7")  # the lost WAL, in effect
    assert "records 8..9 acknowledged but gone" in halted(path)
    with Journal(path) as journal:
        recover(journal, ENGINE.rules)
        done = clear_halt(journal, ENGINE.rules, "tech-tom", note="SD card swapped")
        assert done is not None
        replayed, record = done
        assert record.record == 10  # 8 and 9 are never reused
        assert record.data()["set_aside"]["records"] == [8, 9]
        assert replayed.state.to_dict() == before.to_dict()


# format 1 ---------------------------------------------------------------------------------------
OLD_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (
    record INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, actor TEXT NOT NULL,
    kind TEXT NOT NULL, payload TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL
);
CREATE TABLE snapshots (
    record INTEGER PRIMARY KEY, chain_hash TEXT NOT NULL, state TEXT NOT NULL, hash TEXT NOT NULL
);
"""


def format_1(path: Path, commands: list[Bet | Roll]) -> None:
    """A journal as format 1 wrote it (plain SHA-256, the events stored)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.executescript(OLD_SCHEMA)
    db.execute("INSERT INTO meta VALUES ('format', '1')")
    prev = "0" * 64
    payloads = [("journal", "start", canonical({"format": 1}))]
    table = Engine().run([])
    for command in commands:
        outcome = ENGINE.apply(table, command)
        table = outcome.state
        events = [json.loads(json.dumps(e.to_dict())) for e in outcome.events]
        payloads.append(
            (command.actor, "command", canonical({"command": command.to_dict(), "events": events}))
        )
    for number, (actor, kind, payload) in enumerate(payloads, start=1):
        at = f"2026-11-01T10:00:{number:02d}.000+00:00"
        digest = old_hash(prev, number, at, actor, kind, payload)
        db.execute(
            "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)",
            (number, at, actor, kind, payload, prev, digest),
        )
        prev = digest
    db.commit()
    db.close()


def test_a_format_1_journal_is_refused_naming_migrate_which_moves_it_forward(
    tmp_path: Path,
) -> None:
    commands: list[Bet | Roll] = [Bet(1, 5, actor="alice")]
    commands += [Roll(1 + i % 6, 1 + (i * 5) % 6, seq=i, actor="reader") for i in range(30)]
    path = tmp_path / "journal.db"
    format_1(path, commands)
    reason = halted(path)
    assert "format-1 journal" in reason and "firebet journal migrate" in reason
    os.unlink(tmp_path / "journal.db.halt")

    done = firebet("journal", "migrate", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "migrated 32 records" in done.stdout
    aside = list(tmp_path.glob("journal-aside-*"))
    assert len(aside) == 1 and (aside[0] / "journal.db").exists()  # the old file, kept whole
    with Journal(path) as journal:
        recovered = recover(journal, ENGINE.rules)
        assert recovered.halted is None and recovered.last_record == 32
        assert recovered.state.to_dict() == ENGINE.run(commands).to_dict()
        first = next(journal.records())
        assert first.data()["migrated"]["by"].startswith(pwd.getpwuid(os.getuid()).pw_name)
        assert first.data()["migrated"]["aside"] == aside[0].name
        assert verify_journal(journal, ENGINE.rules).ok


def test_migrate_refuses_a_format_1_journal_that_does_not_verify(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    format_1(path, [Bet(1, 5, actor="alice"), Roll(2, 2, seq=1)])
    db = sqlite3.connect(path)
    db.execute("UPDATE records SET payload = replace(payload, '5', '4') WHERE record = 2")
    db.commit()
    db.close()
    done = firebet("journal", "migrate", "--state-dir", str(tmp_path))
    assert done.returncode == 4 and "journal init" in done.stderr, done.stderr
    assert not list(tmp_path.glob("journal-aside-*"))
