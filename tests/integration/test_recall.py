"""Game recall off the engine thread, at the cost of what was asked; engine jobs that
miss their deadline are never applied; a dealer's retry is applied once (#9)."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.control.client import ControlClient
from controller.core.commands import Ack, Bet, Command, Roll, Surrender, Void
from controller.core.engine import Engine
from controller.journal import Journal, recover
from controller.journal import replay as replay_module
from controller.journal.history import MAX_HANDS, HistoryTooLong, Recall, connect_read_only
from controller.journal.play import decide
from controller.service import recall as recall_module
from tests.integration.test_control_attacks import Line
from tests.support import RunningTable, recall, table_running, wait_for

ENGINE = Engine()


def journal_with(path: Path, commands: list[Command], snapshot_every: int = 1000) -> None:
    with Journal(path, snapshot_every=snapshot_every, durable=False) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        for command in commands:
            decide(journal, replayed, command)


def rolls(n: int, seed: int = 7) -> list[Command]:
    """``n`` rolls of a fixed pseudo-random sequence (about one seven-out in eight)."""
    out: list[Command] = []
    x = seed
    for i in range(n):
        x = (x * 1103515245 + 12345) % 2**31
        out.append(Roll(1 + x % 6, 1 + (x // 6) % 6, seq=i % 65536))
    return out


def test_a_request_reads_the_new_records_and_the_hands_asked_not_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "journal.db"
    journal_with(path, rolls(6000))
    decoded: list[int] = []
    real = replay_module.decode_body  # a command replayed: a record read
    monkeypatch.setattr(
        replay_module, "decode_body", lambda *args: decoded.append(1) or real(*args)
    )
    db = connect_read_only(path)
    following = Recall(ENGINE.rules)
    first = following.history(db, 3)
    assert len(first) == 3
    assert len(decoded) < 2100  # from the newest snapshot: at most two snapshot spans
    with Journal(path, durable=False) as journal:  # the table plays on: 10 more rolls
        replayed = recover(journal, ENGINE.rules).replay
        seq = replayed.state.reader_seq or 0
        for i in range(10):
            decide(journal, replayed, Roll(1 + i % 6, 1 + i * 5 % 6, seq=(seq + 1 + i) % 65536))
    decoded.clear()
    again = following.history(db, 3)
    # the 10 new records, then only the last 3 hands' records: never a snapshot span again
    assert len(decoded) < 10 + 3 * 60, len(decoded)
    assert again == Recall(ENGINE.rules).history(db, 3)  # the same as a fresh walk
    db.close()


def test_too_many_hands_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    journal_with(path, rolls(20))
    db = connect_read_only(path)
    with pytest.raises(ValueError, match=f"from 1 to {MAX_HANDS}"):
        Recall(ENGINE.rules).history(db, MAX_HANDS + 1)
    with pytest.raises(HistoryTooLong, match="deadline"):
        Recall(ENGINE.rules).history(db, 5, deadline=0.0)  # past already: bounded in time too
    db.close()


def _command(kind: str, a: int, b: int) -> Command:
    if kind == "roll":
        return Roll(a, b, source="manual")
    if kind == "bet":
        return Bet(a, b)
    if kind == "void":
        return Void()
    if kind == "surrender":
        return Surrender(kind="voluntary")
    return Ack()


SCRIPT = st.lists(
    st.tuples(
        st.sampled_from(["roll"] * 8 + ["bet", "void", "void", "surrender", "ack"]),
        st.integers(1, 6),
        st.integers(1, 6),
    ),
    max_size=120,
)


@settings(max_examples=40, deadline=None)
@given(SCRIPT, st.integers(1, 6), st.integers(1, 12))
def test_a_following_recall_says_what_a_fresh_walk_says(
    tmp_path_factory: pytest.TempPathFactory, script: list[Any], every: int, hands: int
) -> None:
    path = tmp_path_factory.mktemp("recall") / "journal.db"
    following = Recall(ENGINE.rules)
    with Journal(path, snapshot_every=every, durable=False) as journal:
        replayed = recover(journal, ENGINE.rules).replay
        db = connect_read_only(path)
        try:
            for i, (kind, a, b) in enumerate(script):
                decide(journal, replayed, _command(kind, a, b))
                if i % 7 == 0:
                    assert following.history(db, hands) == Recall(ENGINE.rules).history(db, hands)
            assert following.history(db, hands) == Recall(ENGINE.rules).history(db, hands)
            assert following.history(db, hands) == recall(journal, hands)
        finally:
            db.close()


# the running service ---------------------------------------------------------------------


def test_history_is_answered_while_the_engine_thread_is_stuck(
    running_table: RunningTable,
) -> None:
    t = running_table
    t.make(6)
    t.throw(2, 2)
    t.throw(3, 4)  # seven-out: hand 2 begins
    journal = t.controller.journal
    assert journal is not None
    with journal._mutex:  # the engine can neither write nor read its journal now
        # a stuck engine would leave it unanswered: a busy machine still answers in 10 s
        with ControlClient(t.socket, timeout=10.0) as client:
            reply = client.request("history", hands=2)
        assert reply["ok"] is True, reply
        assert [h["hand"] for h in reply["hands"]] == [1, 2]
        assert reply["hands"][0]["rolls"] == [[3, 3], [3, 3], [2, 2], [3, 4]]


def test_a_dealer_command_past_its_deadline_is_never_applied(
    running_table: RunningTable,
) -> None:
    t = running_table
    journal = t.controller.journal
    assert journal is not None
    # the background full check posts its report on the queue when it ends: let it end
    # first, so the one item queued behind the blocked engine is the bet
    wait_for(lambda: t.status()["journal_check"] == "ok", what="the full check")
    hold, late = Line(t.socket), Line(t.socket)
    try:
        with journal._mutex:
            hold.send(b'{"op":"ack","id":"hold"}\n')  # the engine blocks on the journal
            wait_for(lambda: t.controller.queue.qsize() == 0, what="the engine to take it")
            late.send(
                b'{"op":"bet","args":{"position":3,"amount":1},"id":"b1","deadline_ms":200}\n'
            )
            wait_for(lambda: t.controller.queue.qsize() == 1, what="the bet to be queued")
            queued = time.monotonic()
            wait_for(lambda: time.monotonic() - queued > 0.25, what="its deadline to pass")
        assert hold.reply()["id"] == "hold"
        told = late.reply()
        assert told["ok"] is False and told["expired"] is True, told
        assert t.status()["bets"] == {}  # told it failed: never applied
        # the dealer retries with the same id: applied now, once, however often repeated
        bet = {"op": "bet", "args": {"position": 3, "amount": 1}, "id": "b1"}
        assert late.ask(bet)["ok"] is True
        assert late.ask(bet)["ok"] is True
        assert t.status()["bets"] == {"3": 1}
        assert t.status()["meters"]["bets_taken"] == {"count": 1, "amount": 1}
    finally:
        hold.close()
        late.close()


def test_history_is_folded_in_the_recall_process_not_on_the_service_s_threads(
    running_table: RunningTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recall holds the interpreter lock while it folds: never in the table's process."""

    def on_a_service_thread(*args: object, **kwargs: object) -> None:
        raise AssertionError("a recall ran on one of the service's threads")

    monkeypatch.setattr(Recall, "history", on_a_service_thread)
    running_table.make(4)
    running_table.throw(3, 4)
    reply = running_table.ask("history", hands=2)
    assert reply["ok"], reply
    assert reply["hands"][0]["points"] == [4]
    worker = running_table.controller.recall.worker_pid
    assert worker is not None and worker != os.getpid()
    assert os.getpriority(os.PRIO_PROCESS, worker) >= min(19, os.nice(0) + 5)


def test_a_recall_process_that_dies_is_started_again(running_table: RunningTable) -> None:
    running_table.make(5)
    assert running_table.ask("history", hands=1)["ok"]
    worker = running_table.controller.recall.worker_pid
    assert worker is not None
    os.kill(worker, signal.SIGKILL)
    wait_for(lambda: not Path(f"/proc/{worker}/cmdline").read_bytes(), what="the worker to die")
    first = running_table.ask("history", hands=1)
    if not first["ok"]:  # the request that found it dead says so; nothing else breaks
        assert "history reader stopped" in first["error"], first
    again = running_table.ask("history", hands=1)
    assert again["ok"] and again["hands"][-1]["points"] == [5], again
    assert running_table.controller.recall.restarts <= 1


def damaged_before_the_last_snapshot(state: Path) -> None:
    """A journal whose record 3 was edited, with snapshots after it (so recovery, which
    reads only the tail after the newest snapshot, does not see it)."""
    path = state / "journal.db"
    journal_with(path, rolls(40), snapshot_every=5)
    db = sqlite3.connect(path)
    body = db.execute("SELECT body FROM records WHERE record = 3").fetchone()[0]
    db.execute("UPDATE records SET body = ? WHERE record = 3", (body.replace("1", "2", 1),))
    db.commit()
    db.close()


def test_the_full_check_after_ready_finds_older_damage_and_halts(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    damaged_before_the_last_snapshot(state)
    with table_running(state, tmp_path / "control.sock") as table:
        wait_for(lambda: table.status()["mode"] == "halted", what="the full check's halt")
        # (the journal watch may name it first, in the same words: the check still reports)
        wait_for(lambda: table.status()["journal_check"] != "running", what="the full check")
        status = table.status()
        assert status["journal_check"].startswith("record 3: "), status["journal_check"]
        assert "record 3" in status["halted"]


def test_the_full_check_runs_in_a_process_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A walk of the whole journal holds the interpreter lock: never in the table's
    process, whose engine thread must answer the reader meanwhile."""

    def in_the_service(*args: object, **kwargs: object) -> None:
        raise AssertionError("the full check ran in the service's process")

    monkeypatch.setattr(recall_module, "verify", in_the_service)  # what the check runs
    state = tmp_path / "state"
    state.mkdir()
    journal_with(state / "journal.db", rolls(40), snapshot_every=5)
    with table_running(state, tmp_path / "control.sock") as table:
        wait_for(lambda: table.status()["journal_check"] == "ok", what="the full check")
        assert table.status()["mode"] == "running"


def test_the_recall_process_runs_the_service_s_code_never_the_working_directory_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service's working directory (``/run/firebet`` under systemd) is not where its
    code comes from: a ``controller`` package planted there is never imported."""
    planted = tmp_path / "cwd" / "controller"
    planted.mkdir(parents=True)
    (planted / "__init__.py").write_text('raise SystemExit("planted code ran")\n')
    monkeypatch.chdir(planted.parent)
    with table_running(tmp_path / "state", tmp_path / "control.sock") as table:
        table.make(6)
        reply = table.ask("history", hands=1)
        assert reply["ok"] and reply["hands"][-1]["points"] == [6], reply
        wait_for(lambda: table.status()["journal_check"] == "ok", what="the full check")
