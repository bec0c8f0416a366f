"""The durable journal: append, recover, snapshots, history, export, write failures."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.core.commands import Ack, Bet, Cancel, Command, Roll, Surrender, Void
from controller.core.engine import Engine
from controller.core.errors import FirebetError
from controller.core.script import parse_script, replay
from controller.journal import (
    Journal,
    JournalWriteError,
    RecordKind,
    Replay,
    clear_halt,
    recover,
    verify,
)
from controller.journal.files import Head, read_head
from controller.journal.play import decide
from controller.journal.system import diagnostics_body
from tests.support import PROCESS_DEADLINE_S, ROOT, head_syncs, recall

ENGINE = Engine()

SESSION = """
bet 1 5
bet 2 3
bet 3 1
cancel 3
4 2
3 3
2 2
1 3
4 4
5 3
5 4
4 5
6 4
6 1
bet 4 5
2 4
3 4
void
surrender
2 2
1 6
3 3
"""


def session() -> list[Command]:
    return [c for _, c in parse_script(SESSION.splitlines())]


def played(
    path: Path, commands: list[Command], snapshot_every: int = 1000
) -> tuple[Journal, Replay]:
    """A journal in ``path`` with ``commands`` decided and journaled by the service's
    step, and where its replay stands."""
    journal = Journal(path, snapshot_every=snapshot_every, durable=False)
    replayed = recover(journal, ENGINE.rules).replay
    for command in commands:
        decide(journal, replayed, command)
    return journal, replayed


def filled(path: Path, commands: list[Command], snapshot_every: int = 1000) -> Journal:
    """:func:`played`, the journal alone."""
    return played(path, commands, snapshot_every)[0]


def test_fresh_directory_gets_a_fresh_journal_and_state_survives_restart(tmp_path: Path) -> None:
    commands = session()
    expected = replay(ENGINE, enumerate(commands)).state
    path = tmp_path / "state" / "journal.db"
    journal, replayed = played(path, commands, snapshot_every=4)
    with journal:
        assert replayed.state.to_dict() == expected.to_dict()
        first = next(journal.records())
        assert (first.record, first.kind, first.prev_hash) == (1, "start", "0" * 64)
    with Journal(path, snapshot_every=4) as journal:
        recovered = recover(journal, ENGINE.rules)
    assert recovered.halted is None
    assert recovered.last_record == len(commands) + 1
    assert recovered.state.to_dict() == expected.to_dict()  # meters, undo, reader_seq too
    meters = recovered.state.meters
    assert (meters.bets_taken, meters.voids, meters.surrenders, meters.hands) == (4, 1, 1, 2)
    assert meters.paid[4].count == 2 and meters.reversed.count == 1


def test_the_head_is_written_before_append_returns_and_synced_off_the_roll_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One sync a roll on the engine's thread (the commit's): the head file is rewritten
    before the append returns and made durable by the head's own thread."""
    path = tmp_path / "state" / "journal.db"
    with Journal(path) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        head = journal._head
        assert head is not None
        synced_on = head_syncs(monkeypatch, head)
        for command in session()[:8]:
            decide(journal, replayed, command)
            found = read_head(path.with_name("journal.db.head"), journal._key)
            assert isinstance(found, Head) and found.record == journal.last_record
        assert head.wait_synced(timeout=30)
        assert synced_on and set(synced_on) == {"journal head"}


def test_history_matches_replay_and_lists_actions(tmp_path: Path) -> None:
    commands = session()
    result = replay(ENGINE, enumerate(commands))
    with filled(tmp_path / "journal.db", commands, snapshot_every=3) as journal:
        lines = recall(journal, 10)
        assert recall(journal, 1) == lines[-1:]
    settled = [s.report() for s in result.settlements]
    done = [{k: h[k] for k in settled[0]} for h in lines if h["result"] is not None]
    assert done == settled
    current = lines[-1]
    assert current["result"] is None and current["hand"] == result.state.hand
    assert [h["hand"] for h in lines] == [1, 2, 3]
    first, second = lines[0], lines[1]
    assert first["result"] == "win" and first["payouts"] == {"1": 120, "2": 72}
    assert first["rolls"] == [
        [4, 2],
        [3, 3],
        [2, 2],
        [1, 3],
        [4, 4],
        [5, 3],
        [5, 4],
        [4, 5],
        [6, 4],
        [6, 1],
    ]
    assert [a["action"] for a in first["actions"]] == ["bet", "bet", "bet", "cancel"]
    assert first["actions"][0]["actor"] == "script" and first["actions"][0]["at"]
    assert second["result"] == "lose" and second["rolls"] == [[2, 4], [2, 2], [1, 6]]
    assert [a["action"] for a in second["actions"]] == ["bet", "void", "surrender"]
    assert current["rolls"] == [[3, 3]]


def test_refusals_are_kept_duplicate_rolls_are_not(tmp_path: Path) -> None:
    journal, replayed = played(tmp_path / "journal.db", [Roll(3, 3, seq=7)])
    with journal:
        copy = decide(journal, replayed, Roll(3, 3, seq=7))
        assert copy.record is None and copy.outcome.state == replayed.state
        before = replayed.state
        refused = decide(journal, replayed, Bet(1, 50)).record
        assert refused is not None and refused.data()["command"] == "bet"
        assert ENGINE.apply(before, refused.command()).refused is not None
        assert replayed.state.rolls == 1


def test_second_writer_is_refused(tmp_path: Path) -> None:
    with filled(tmp_path / "journal.db", []):
        other = Journal(tmp_path / "journal.db")
        with pytest.raises(FirebetError, match="in use"):
            recover(other, ENGINE.rules)
        other.close()
        with Journal(tmp_path / "journal.db", read_only=True) as reader:  # readers never block
            assert recover(reader, ENGINE.rules).halted is None


def test_read_only_journal_refuses_writes_and_keeps_reading(tmp_path: Path) -> None:
    filled(tmp_path / "journal.db", session()).close()
    with Journal(tmp_path / "journal.db", read_only=True) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        with pytest.raises(JournalWriteError, match="read-only"):
            decide(journal, replayed, Roll(1, 1))
        assert recall(journal, 2)
    with Journal(tmp_path / "journal.db") as journal:  # the database refuses the write itself
        replayed = recover(journal, ENGINE.rules).replay
        last = journal.last_record
        assert journal._db is not None
        journal._db.execute("PRAGMA query_only = ON")
        with pytest.raises(JournalWriteError, match="readonly") as caught:
            decide(journal, replayed, Roll(1, 1))
        assert isinstance(caught.value, OSError) and str(journal.path) in str(caught.value)
        assert journal.last_record == last and verify(journal, ENGINE.rules).ok


DISK_FULL = """
import resource, signal, sys
from controller.core.commands import Roll
from controller.core.engine import Engine
from controller.journal import JournalWriteError
from controller.journal import Journal, recover, verify
from controller.journal.history import history
from controller.journal.play import decide
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
engine = Engine()
journal = Journal(sys.argv[1])
replayed = recover(journal, engine.rules).replay
resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, 40_000))
ok = 0
try:
    for i in range(10_000):
        decide(journal, replayed, Roll(1 + i % 6, 1 + i % 5, seq=i % 65536))
        ok += 1
except JournalWriteError as exc:
    with journal.view() as db:
        hands = len(history(db, engine.rules, 3))
    print(json.dumps({"ok": ok, "error": str(exc), "verify": verify(journal, engine.rules).ok,
                      "history": hands, "last": journal.last_record}))
journal.close()
""".replace("import resource", "import json, resource")


def test_disk_full_raises_journal_write_error_and_leaves_a_sound_journal(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    filled(path, session()).close()
    done = subprocess.run(
        [sys.executable, "-c", DISK_FULL, str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "cannot write the journal" in report["error"] and str(path) in report["error"]
    assert report["verify"] and report["history"] >= 1 and report["ok"] > 0
    with Journal(path) as journal:
        recovered = recover(journal, ENGINE.rules)
        assert recovered.halted is None and recovered.last_record == report["last"]
        assert verify(journal, ENGINE.rules).ok
        expected = session() + [
            Roll(1 + i % 6, 1 + i % 5, seq=i % 65536) for i in range(report["ok"])
        ]
        assert recovered.state.to_dict() == replay(ENGINE, enumerate(expected)).state.to_dict()


def _firebet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_export_can_be_reverified_with_the_documented_recipe(tmp_path: Path) -> None:
    filled(tmp_path / "journal.db", session(), snapshot_every=5).close()

    def canonical(x: object) -> str:
        return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=True)

    done = _firebet("export", "--format", "jsonl", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    key = bytes.fromhex((tmp_path / "journal.key").read_text())
    prev = "0" * 64
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    for n, row in enumerate(rows, start=1):
        snap = row["snapshot"]
        text = (
            f"{row['record']}\n{row['at']}\n{row['actor']}\n{row['kind']}\n{int(bool(snap))}\n"
            + canonical(row["payload"])
        )
        message = bytes.fromhex(prev) + text.encode()
        if snap:
            message += b"\nsnapshot " + bytes.fromhex(snap)
        assert row["record"] == n and row["prev_hash"] == prev
        assert hmac.new(key, message, hashlib.sha256).hexdigest() == row["hash"]
        prev = row["hash"]
    assert len(rows) == len(session()) + 1
    assert sum(1 for row in rows if row["snapshot"]) == len(rows) // 5

    done = _firebet("export", "--format", "csv", "--state-dir", str(tmp_path))
    table = list(csv.DictReader(io.StringIO(done.stdout)))
    assert [int(r["record"]) for r in table] == list(range(1, len(rows) + 1))
    assert [(r["hash"], r["prev_hash"]) for r in table] == [
        (r["hash"], r["prev_hash"]) for r in rows
    ]  # each row matches its JSONL line, which carries the sealed payload
    assert [r["snapshot"] for r in table] == [r["snapshot"] or "" for r in rows]
    # plain columns only (#33, contract 2: a spreadsheet had JSON in a cell)
    assert "payload" not in (csv.DictReader(io.StringIO(done.stdout)).fieldnames or [])
    bet, roll = table[1], table[5]  # record 1 is the journal's start
    assert (bet["what"], bet["position"], bet["amount"], bet["d1"]) == ("bet", "1", "5", "")
    assert (roll["what"], roll["d1"], roll["d2"], roll["position"]) == ("roll", "4", "2", "")
    assert (table[0]["what"], table[0]["detail"]) == ("start", "format=3")
    assert all("{" not in cell for r in table for cell in r.values())
    # the count, on standard error (#33: none before), so standard output stays the data
    assert done.stderr.strip().endswith(f"exported {len(rows)} records (records 1 to {len(rows)})")
    since = _firebet(
        "export", "--format", "csv", "--since", "2999-01-01", "--state-dir", str(tmp_path)
    )
    assert since.returncode == 0 and since.stdout.strip() == ",".join(
        csv.DictReader(io.StringIO(done.stdout)).fieldnames or []
    )
    assert "exported 0 records since 2999-01-01" in since.stderr
    assert (
        _firebet(
            "export", "--format", "csv", "--since", "soon", "--state-dir", str(tmp_path)
        ).returncode
        == 2
    )


def test_cli_history_and_verify(tmp_path: Path) -> None:
    filled(tmp_path / "journal.db", session()).close()
    done = _firebet("history", "--json", "--hands", "2", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 2 and lines[-1]["result"] is None
    assert {
        "hand",
        "points",
        "unique_points",
        "result",
        "odds_to_one",
        "payouts",
        "rolls",
        "actions",
    } <= set(lines[0])
    table = _firebet("history", "--state-dir", str(tmp_path))
    assert table.returncode == 0 and "in play" in table.stdout
    ok = _firebet("journal", "verify", "--state-dir", str(tmp_path))
    assert ok.returncode == 0 and ok.stdout.startswith("journal OK")
    assert _firebet("journal", "verify", "--state-dir", str(tmp_path / "none")).returncode == 1


def test_halt_refuses_game_commands_until_cleared(tmp_path: Path) -> None:
    journal, replayed = played(tmp_path / "journal.db", session())
    with journal:
        journal.halt(None, "self-check failed: marker lamp 6 dark")
        with pytest.raises(FirebetError, match="halted"):
            decide(journal, replayed, Roll(1, 1))
        journal.append_system(  # a system record is taken while halted
            RecordKind.MODE, actor="tech-tom", state=replayed.state, payload=diagnostics_body(True)
        )
    with Journal(tmp_path / "journal.db") as journal:
        recovered = recover(journal, ENGINE.rules)
        halted = recovered.halted
        assert halted is not None and "lamp 6" in halted.reason
        before = recovered.state
        done = clear_halt(journal, ENGINE.rules, "tech-tom")
        assert done is not None and done[1].actor == "tech-tom"
        replayed = done[0]
        assert journal.halted is None and replayed.state.to_dict() == before.to_dict()
        assert clear_halt(journal, ENGINE.rules, "tech-tom") is None
        decide(journal, replayed, Roll(1, 1))
        assert verify(journal, ENGINE.rules).ok


COMMANDS = st.one_of(
    st.builds(lambda a, b: Roll(a, b), st.integers(1, 6), st.integers(1, 6)),
    st.builds(lambda p, a: Bet(p, a), st.integers(1, 3), st.integers(1, 6)),
    st.builds(Cancel, st.integers(1, 3)),
    st.just(Void()),
    st.just(Surrender()),
    st.just(Ack()),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    commands=st.lists(COMMANDS, max_size=40),
    cut=st.integers(0, 40),
    every=st.integers(1, 5),
)
def test_recovery_of_any_prefix_equals_its_fold_with_or_without_snapshots(
    commands: list[Command], cut: int, every: int
) -> None:
    prefix = commands[: min(cut, len(commands))]
    expected = ENGINE.run(prefix)
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for name, snapshot_every in (("snap", every), ("plain", 10**9)):
            path = Path(tmp) / name / "journal.db"
            filled(path, prefix, snapshot_every).close()
            with Journal(path, snapshot_every=snapshot_every) as journal:
                recovered = recover(journal, ENGINE.rules)
                assert recovered.halted is None
                assert verify(journal, ENGINE.rules).ok
                lines = recall(journal, 5)
                for line in lines:
                    for action in line["actions"]:
                        action.pop("at")  # the journal's clock
                results.append((recovered.state.to_dict(), lines))
    assert results[0][0] == expected.to_dict()
    assert results[0] == results[1]


def test_a_reader_verifies_while_the_service_appends(tmp_path: Path) -> None:
    """A read-only check running beside a writer never reports a record as missing.

    Regression: the walk and the cut check read at different moments, so a record
    appended in between looked "missing" and the service halted a healthy table.
    """

    engine = Engine()
    writer = Journal(tmp_path / "journal.db", snapshot_every=7)
    writer_replay = recover(writer, engine.rules).replay
    stop = threading.Event()

    def append() -> None:
        rolls = [(2, 2), (3, 4), (5, 6), (1, 3), (6, 6)]
        i = 0
        while not stop.is_set():
            decide(writer, writer_replay, Roll(*rolls[i % len(rolls)], source="sim"))
            i += 1

    thread = threading.Thread(target=append, daemon=True)
    thread.start()
    try:
        for _ in range(40):
            with Journal(tmp_path / "journal.db", read_only=True) as reader:
                assert recover(reader, engine.rules).halted is None
                report = verify(reader, engine.rules)
                assert report.ok, report.problems
    finally:
        stop.set()
        thread.join(timeout=PROCESS_DEADLINE_S)
        assert not thread.is_alive(), "the appending thread did not stop"
        writer.close()


def test_batch_reads_a_bounded_slice_with_the_chain(tmp_path: Path) -> None:
    with filled(tmp_path / "journal.db", session(), snapshot_every=4) as journal:
        everything = list(journal.records())
        assert journal.batch(2, 5) == everything[2:7]
        assert journal.batch(len(everything), 5) == []
        assert any(r.snapshot for r in journal.batch(0, 10))


def test_verify_on_every_core_agrees_with_one_core(tmp_path: Path) -> None:
    commands = session() * 20
    with filled(tmp_path / "journal.db", commands, snapshot_every=7) as journal:
        one = verify(journal, ENGINE.rules)
        many = verify(journal, ENGINE.rules, processes=2)
        assert one.ok and many.ok
        assert (many.records, many.snapshots, many.last_hash) == (
            one.records,
            one.snapshots,
            one.last_hash,
        )
        assert journal._db is not None
        journal._db.execute("DELETE FROM records WHERE record = 100")  # damage: one core says
    with Journal(tmp_path / "journal.db", snapshot_every=7) as journal:
        recover(journal, ENGINE.rules)
        many = verify(journal, ENGINE.rules, processes=2)
        assert many.problems[0] == (100, "record 100 is missing")


def test_every_request_the_journal_holds_is_in_its_index(tmp_path: Path) -> None:
    """The ``requests`` index is written with the command record (one transaction) and
    finds a request however far back it is: never a window of the newest records."""
    tag = '1001:0123456789abcdef:"dealer-7"'
    commands = [Bet(2, 1, actor="dana(1001)", request=tag), *session() * 30]
    journal = filled(tmp_path / "journal.db", commands)
    index = journal.requests()
    try:
        last = journal.last()
        assert last is not None and last.record > 500
        assert index.find(1001, "dealer-7") == ("0123456789abcdef", 2)  # record 2, kept
        assert index.find(1001, "dealer-8") is None and index.find(1002, "dealer-7") is None
        assert '"request"' not in last.payload  # a command without a request stays lean
    finally:
        index.close()
        journal.close()
