"""The journal's part of the roll path: one SQLite call a record, and the head file synced
after the roll (settle), not between its commit and its ACK."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.journal import files as F
from controller.journal import store
from controller.journal.files import Head, HeadWriter, read_head
from tests.support import RunningTable, head_syncs, wait_for

KEY = b"k" * 32
MAC = bytes(range(32))


def test_writes_wait_for_settle_then_one_sync_covers_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = HeadWriter(tmp_path / "journal.db.head", clock=lambda: 100.0)  # never a burst
    try:
        synced = head_syncs(monkeypatch, writer)
        for record in (1, 2, 3):
            writer.write(KEY, record, MAC)
        found = read_head(tmp_path / "journal.db.head", KEY)
        assert isinstance(found, Head) and found.record == 3  # written before any sync
        assert not writer._asked  # nobody woke the syncer: nothing between commit and ACK
        writer.settle()
        wait_for(lambda: writer._synced == 3, what="the settled head to be synced")
        assert synced == ["journal head"]  # one sync, on the head's own thread
        writer.settle()  # nothing new: no sync
        writer.write(KEY, 4, MAC)
        assert writer.wait_synced(timeout=30)
        assert synced == ["journal head", "journal head"]
    finally:
        writer.close()


def test_a_burst_without_settle_is_synced_every_head_sync_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    writer = HeadWriter(tmp_path / "journal.db.head", clock=lambda: now[0])
    try:
        synced = head_syncs(monkeypatch, writer)
        writer.write(KEY, 1, MAC)
        now[0] += F.HEAD_SYNC_S / 2
        writer.write(KEY, 2, MAC)
        assert not writer._asked
        now[0] += F.HEAD_SYNC_S
        writer.write(KEY, 3, MAC)  # the oldest unsynced write is over HEAD_SYNC_S old
        wait_for(lambda: writer._synced == 3, what="the burst's head to be synced")
        assert synced == ["journal head"]
    finally:
        writer.close()


def _windowed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    window_s: float,
    clock: Callable[[], float] = lambda: 100.0,
) -> tuple[HeadWriter, list[str]]:
    """A head writer whose HEAD_SYNC_S is ``window_s`` (its clock standing still unless
    ``clock`` moves), and the names of the threads that sync its file."""
    monkeypatch.setattr(F, "HEAD_SYNC_S", window_s)
    writer = HeadWriter(tmp_path / "journal.db.head", clock=clock)
    return writer, head_syncs(monkeypatch, writer)


def _second_roll_inside_the_window(writer: HeadWriter) -> None:
    """Roll 1 written and settled (nothing synced before it: synced at once), then roll 2
    written and settled inside HEAD_SYNC_S of that sync (the writer's clock stands still)."""
    writer.write(KEY, 1, MAC)
    writer.settle()
    wait_for(lambda: writer._synced == 1, what="the first roll's head to be synced")
    writer.write(KEY, 2, MAC)
    writer.settle()


def test_rolls_inside_head_sync_s_of_the_last_sync_share_one_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Back-to-back rolls (each settled after its ACK) wake the syncer once, not once each:
    it waits out the rest of HEAD_SYNC_S after the last sync, then one sync covers them."""
    writer, synced = _windowed(tmp_path, monkeypatch, 600.0)  # cannot end by itself here
    try:
        _second_roll_inside_the_window(writer)
        wait_for(lambda: writer._cooling, what="the syncer to wait out HEAD_SYNC_S")
        for record in (3, 4, 5):
            writer.write(KEY, record, MAC)
            writer.settle()
        assert writer._synced == 1 and synced == ["journal head"]  # no sync per roll
        assert writer.wait_synced(timeout=30)  # a clean stop does not wait the window out
        assert writer._synced == 5 and synced == ["journal head", "journal head"]
        found = read_head(tmp_path / "journal.db.head", KEY)
        assert isinstance(found, Head) and found.record == 5
    finally:
        writer.close()


def test_the_shared_sync_comes_by_itself_when_head_sync_s_has_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody hurries it: the head of a roll inside the window is synced when it ends."""
    writer, synced = _windowed(tmp_path, monkeypatch, 0.2)
    try:
        _second_roll_inside_the_window(writer)
        wait_for(lambda: writer._synced == 2, what="the window to end and the head to be synced")
        assert synced == ["journal head", "journal head"]
    finally:
        writer.close()


def test_a_roll_after_head_sync_s_of_quiet_is_synced_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a table's pace (rolls seconds apart) every roll's head is synced right after it."""
    now = [100.0]  # waiting 600 s out would time the test out
    writer, synced = _windowed(tmp_path, monkeypatch, 600.0, clock=lambda: now[0])
    try:
        for record in (1, 2, 3):
            writer.write(KEY, record, MAC)
            writer.settle()
            wait_for(lambda r=record: writer._synced == r, what=f"roll {record}'s head synced")
            assert not writer._cooling
            now[0] += 601.0  # the next roll comes after the window
        assert synced == ["journal head"] * 3
    finally:
        writer.close()


def test_close_during_the_window_syncs_what_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, synced = _windowed(tmp_path, monkeypatch, 600.0)
    _second_roll_inside_the_window(writer)
    wait_for(lambda: writer._cooling, what="the syncer to wait out HEAD_SYNC_S")
    writer.close()  # at once, not after the window
    assert synced == ["journal head", "MainThread"]  # the syncer's, then close's own


def test_close_syncs_what_was_never_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = HeadWriter(tmp_path / "journal.db.head")
    synced = head_syncs(monkeypatch, writer)
    writer.write(KEY, 7, MAC)
    writer.close()
    assert len(synced) == 1  # close's own sync; the syncer was never asked


def test_the_service_settles_the_head_after_each_roll(running_table: RunningTable) -> None:
    """Without the engine thread's settle, a table's head file would wait for a burst."""
    journal = running_table.controller.journal
    assert journal is not None and journal._head is not None
    head = journal._head
    for _ in range(3):
        running_table.throw(3, 4)
        wait_for(lambda: head._synced == head._written, what="the head synced after the roll")


def test_a_record_is_one_autocommitted_statement_and_never_joins_an_open_transaction(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.db"
    store.create(path, KEY, 1, "test", "{}")
    db = store.connect(path, read_only=False)
    try:
        row = store.Row(2, 2, "dealer", "command", "{}", 0, MAC)
        store.insert(db, row, None)
        assert not db.in_transaction  # committed by the statement itself
        db.execute("BEGIN")  # a reader's view left open on the writer's connection
        later = store.Row(3, 3, "dealer", "command", "{}", 0, MAC)
        with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
            store.insert(db, later, None)  # refused, never a record that is not committed
        db.execute("ROLLBACK")
    finally:
        db.close()
    with sqlite3.connect(path) as other:  # another connection sees record 2 and only it
        assert [n for (n,) in other.execute("SELECT record FROM records")] == [1, 2]
