"""Tampering is caught by `journal verify` (exit 4) and by recovery (halted, persistent);
`clear-halt` lifts it and is journaled with who (docs/journal.md)."""

from __future__ import annotations

import os
import pwd
import secrets
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.core.commands import Bet, Roll
from controller.core.engine import Engine
from controller.journal import Journal, canonical, recover, verify
from controller.journal.key import read_key
from controller.journal.play import decide
from controller.journal.recipe import GENESIS, seal
from tests.support import run_firebet as firebet

ENGINE = Engine()
OS_ACTOR = f"{pwd.getpwuid(os.getuid()).pw_name}({os.getuid()})"  # who the kernel says we are


def build(state_dir: Path) -> Path:
    """A small journal: bets on 1..3, then rolls (records 2..4 are the bets)."""
    path = state_dir / "journal.db"
    with Journal(path) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        decide(journal, replayed, Bet(1, 5, actor="alice"))
        decide(journal, replayed, Bet(2, 3, actor="alice"))
        decide(journal, replayed, Bet(3, 4, actor="alice"))
        for i, (d1, d2) in enumerate([(2, 2), (3, 3), (2, 2), (5, 3), (4, 4), (6, 1)]):
            decide(journal, replayed, Roll(d1, d2, seq=i))
    return path


def sql(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path)
    try:
        for statement in statements:
            db.execute(statement)
        db.commit()
    finally:
        db.close()


def reseal_from(path: Path, first: int, key: bytes) -> None:
    """What a careful forger does: seal every record again from ``first`` on, with the
    key they have (not the table's: the table's key is readable only by the service)."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT record, at, actor, kind, body, snap FROM records ORDER BY record"
        ).fetchall()
        snaps = dict(db.execute("SELECT record, state FROM snapshots").fetchall())
        prev = GENESIS
        for number, at, actor, kind, body, _snap in rows:
            if number >= first:
                mac = seal(key, prev, number, at, actor, kind, body, snaps.get(number))
                db.execute("UPDATE records SET mac = ? WHERE record = ?", (mac, number))
            prev = db.execute("SELECT mac FROM records WHERE record = ?", (number,)).fetchone()[0]
        db.commit()
    finally:
        db.close()


def flip_payload_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    at = data.index(b'"position":2')
    data[at + len(b'"position":')] ^= 0x01  # 2 -> 3
    path.write_bytes(bytes(data))


def edit_wager(path: Path) -> None:
    sql(
        path,
        "UPDATE records SET body = replace(body, '\"amount\":3', '\"amount\":5') WHERE record = 3",
    )


def forge_wager(path: Path) -> None:
    """An edited wager with the whole chain sealed again, with a key of the forger's own."""
    body = canonical({"amount": 500, "command": "bet", "position": 2})
    sql(path, f"UPDATE records SET body = '{body}' WHERE record = 3")
    reseal_from(path, 3, secrets.token_bytes(32))


def delete_record(path: Path) -> None:
    sql(path, "DELETE FROM records WHERE record = 5")


def reorder_records(path: Path) -> None:
    sql(
        path,
        "UPDATE records SET record = -1 WHERE record = 6",
        "UPDATE records SET record = 6 WHERE record = 7",
        "UPDATE records SET record = 7 WHERE record = -1",
    )


def delete_last_record(path: Path) -> None:
    sql(path, "DELETE FROM records WHERE record = (SELECT MAX(record) FROM records)")


CHAIN_TAMPERS: dict[str, tuple[Callable[[Path], None], int]] = {
    "flipped byte": (flip_payload_byte, 3),
    "edited wager": (edit_wager, 3),
    "forged wager, chain re-hashed": (forge_wager, 3),
    "deleted record": (delete_record, 5),
    "reordered records": (reorder_records, 6),
    "cut tail": (delete_last_record, 10),
}


@pytest.mark.parametrize("name", list(CHAIN_TAMPERS))
def test_tampered_record_is_caught_halts_and_clear_halt_lifts_it(tmp_path: Path, name: str) -> None:
    tamper, bad = CHAIN_TAMPERS[name]
    path = build(tmp_path)
    tamper(path)

    checked = firebet("journal", "verify", "--state-dir", str(tmp_path))
    assert checked.returncode == 4, checked.stdout + checked.stderr
    assert f"record {bad}:" in checked.stderr

    for _ in range(2):  # halted, and still halted after another restart (one halt record)
        with Journal(path) as journal:
            recovered = recover(journal, ENGINE.rules)
            assert recovered.halted is not None and recovered.halted.record == bad
            with pytest.raises(Exception, match="halted"):
                decide(journal, recovered.replay, Roll(1, 2))
            halts = [r for r in journal.records() if r.kind == "halt"]
            if name == "cut tail":  # the chain's end is gone: the halt is kept beside it
                assert not halts and path.with_name("journal.db.halt").exists()
            else:
                assert len(halts) == 1

    cleared = firebet(
        "clear-halt", "--state-dir", str(tmp_path), "--note", "tech-tom checked", "--yes"
    )
    assert cleared.returncode == 0, cleared.stderr
    with Journal(path) as journal:
        recovered = recover(journal, ENGINE.rules)
        assert recovered.halted is None
        last = journal.last()
        assert last is not None and last.kind == "clear_halt" and last.actor == OS_ACTOR
        assert last.data()["note"] == "tech-tom checked"
        assert last.data()["cleared"]["record"] == bad
        decide(journal, recovered.replay, Roll(1, 2, seq=99))  # the game goes on
    checked = firebet("journal", "verify", "--state-dir", str(tmp_path))
    assert checked.returncode == 0, checked.stderr
    assert "set aside by clear-halt" in checked.stdout


def test_edited_snapshot_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    with Journal(path, snapshot_every=4) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        for i in range(6):
            decide(journal, replayed, Roll(2, 2 + i % 3, seq=i))
    sql(
        path,
        "UPDATE snapshots SET state = "
        "replace(state, '\"rolls\":3', '\"rolls\":30') WHERE record = 4",
    )
    checked = firebet("journal", "verify", "--state-dir", str(tmp_path))
    assert checked.returncode == 4 and "record 4:" in checked.stderr
    with Journal(path, snapshot_every=4) as journal:
        halted = recover(journal, ENGINE.rules).halted
        assert halted is not None and halted.record == 4 and "snapshot" in halted.reason


@pytest.mark.parametrize("damage", ["truncated", "garbage header"])
def test_unreadable_file_halts_persistently_even_without_writing(
    tmp_path: Path, damage: str
) -> None:
    path = build(tmp_path)
    if damage == "truncated":
        os.truncate(path, path.stat().st_size // 2)
    else:
        with open(path, "r+b") as f:
            f.write(b"this is not sqlite!!")
    checked = firebet("journal", "verify", "--state-dir", str(tmp_path))
    assert checked.returncode == 4, checked.stderr
    for _ in range(2):
        with Journal(path) as journal:
            halted = recover(journal, ENGINE.rules).halted
            assert halted is not None and halted.record is None
    assert path.with_name("journal.db.halt").exists()
    # clear-halt refuses while the file is still unreadable
    assert (
        firebet("clear-halt", "--state-dir", str(tmp_path), "--note", "x", "--yes").returncode == 4
    )
    # the technician moves the damaged file aside: still halted, never a silent fresh game
    path.rename(tmp_path / "journal.db.damaged")
    with Journal(path) as journal:
        assert recover(journal, ENGINE.rules).halted is not None
    assert not path.exists()
    refused = firebet("clear-halt", "--state-dir", str(tmp_path), "--note", "moved aside", "--yes")
    assert refused.returncode == 4 and "journal init" in refused.stderr, refused.stderr
    done = firebet("journal", "init", "--state-dir", str(tmp_path), "--reason", "disk replaced")
    assert done.returncode == 0, done.stderr
    with Journal(path) as journal:
        recovered = recover(journal, ENGINE.rules)
        assert recovered.halted is None
        records = list(journal.records())
        assert [(r.kind, r.actor) for r in records] == [("start", OS_ACTOR)]
        assert records[0].data()["init"]["reason"] == "disk replaced"


def test_missing_journal_beside_its_wal_is_halted_not_fresh(tmp_path: Path) -> None:
    path = build(tmp_path)
    path.unlink()
    tmp_path.joinpath("journal.db-wal").write_bytes(b"")
    with Journal(path) as journal:
        halted = recover(journal, ENGINE.rules).halted
        assert halted is not None and "missing" in halted.reason
    assert not path.exists()


def test_offline_clear_halt_journals_the_os_user_not_free_text(tmp_path: Path) -> None:
    path = build(tmp_path)
    flip_payload_byte(path)
    assert firebet("journal", "verify", "--state-dir", str(tmp_path)).returncode == 4
    # the old --actor took any text ("alice-the-technician" for root): now refused, exit 2
    forged = firebet("clear-halt", "--state-dir", str(tmp_path), "--actor", "alice-the-tech")
    assert forged.returncode == 2, forged.stderr
    assert "--actor is not taken" in forged.stderr and OS_ACTOR in forged.stderr
    # nor do the environment's names count: only the kernel's user id
    env = dict(os.environ, USER="mallory", LOGNAME="mallory", USERNAME="mallory")
    env.pop("SUDO_UID", None)
    cleared = firebet(
        "clear-halt", "--state-dir", str(tmp_path), "--note", "alice-the-tech: disk swapped",
        "--yes", env=env,
    )  # fmt: skip
    assert cleared.returncode == 0, cleared.stderr
    assert f"halt cleared by {OS_ACTOR}" in cleared.stdout
    with Journal(path) as journal:
        recover(journal, ENGINE.rules)
        last = journal.last()
        assert last is not None and last.kind == "clear_halt"
        assert (last.actor, last.data()["note"]) == (OS_ACTOR, "alice-the-tech: disk swapped")


def test_a_sealed_command_the_rules_cannot_fold_is_damage_at_its_record(tmp_path: Path) -> None:
    """Record 6 re-sealed with the table's key (an insider, or a bug) holds a roll from a
    source the rules cannot take: verify names record 6 (the records before it are folded
    together on the fast path) and still walks every record after it."""
    path = build(tmp_path)
    body = '{"command":"roll","d1":2,"d2":2,"seq":9,"source":[]}'
    sql(path, f"UPDATE records SET body = '{body}' WHERE record = 6")
    reseal_from(path, 6, read_key(tmp_path / "journal.key"))
    with Journal(path, read_only=True) as journal:
        recover(journal, ENGINE.rules)
        report = verify(journal, ENGINE.rules)
        last = journal.last()
    assert last is not None
    assert report.problems[0][0] == 6 and "cannot be decoded" in report.problems[0][1]
    assert report.records == last.record
