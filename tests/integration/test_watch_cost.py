"""The journal watch at idle (issue 31, SPEC section 7: at most 1 ms of CPU a second): a
record is screened when new and again each sweep (issue 30), not at every tick."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from controller.core.commands import Roll
from controller.core.engine import Engine
from controller.journal import Journal, recover
from controller.journal.play import decide
from controller.journal.replay import Replay
from controller.service import health
from controller.service.health import RecordWatch

ENGINE = Engine()
SEAL_WORDS = "does not match its seal (edited, torn, or written without the table's key)"


@pytest.fixture
def small_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "WATCH_TAIL", 10)
    monkeypatch.setattr(health, "WATCH_CHUNK", 4)


def _played(path: Path, rolls: int) -> tuple[Journal, Replay]:
    journal = Journal(path)
    replayed = recover(journal, ENGINE.rules).replay
    for i in range(rolls):
        decide(journal, replayed, Roll(1 + i % 6, 1 + (i // 6) % 6, seq=i))
    return journal, replayed


@pytest.mark.usefixtures("small_rounds")
def test_an_idle_tick_screens_only_its_slice_of_the_sweep(tmp_path: Path) -> None:
    # before issue 31, every tick screened the newest WATCH_TAIL records again, new or not:
    # an idle table paid for them every tick. Since issue 30 an idle tick screens its slice
    # of the sweep alone: the tick's time times the journal's length over the bound.
    path = tmp_path / "journal.db"
    journal, _ = _played(path, 60)
    with journal:
        watch = RecordWatch(journal, ENGINE.rules, lambda halt: None, threading.Event())
        db, key = journal.checker_view()
        n = journal.last_record
        slice_ = n / health.sweep_seconds(n) * health.WATCH_S  # records a tick owes
        try:  # the first time: the newest 10 and a slice
            assert watch.tick(db, key, elapsed=health.WATCH_S) is None
            assert watch.screened == 10 + int(slice_)
            for _ in range(5):
                before = watch.screened
                assert watch.tick(db, key, elapsed=health.WATCH_S) is None
                assert watch.screened - before in (int(slice_), int(slice_) + 1)  # the slice
        finally:
            db.close()


@pytest.mark.usefixtures("small_rounds")
def test_a_new_record_is_screened_when_new(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    journal, replayed = _played(path, 30)
    with journal:
        watch = RecordWatch(journal, ENGINE.rules, lambda halt: None, threading.Event())
        db, key = journal.checker_view()
        try:
            assert watch.tick(db, key) is None
            decide(journal, replayed, Roll(3, 4, seq=100))
            newest = journal.last_record
            edit = sqlite3.connect(path)  # the newest record edited before the next tick
            edit.execute("UPDATE records SET body = replace(body, '\"d1\":3', '\"d1\":5') "
                         "WHERE record = ?", (newest,))  # fmt: skip
            edit.commit()
            edit.close()
            assert watch.tick(db, key) == (newest, f"record {newest} {SEAL_WORDS}")
        finally:
            db.close()


class _Sleeps(threading.Event):
    """The watch's ``stopping``: never set; each sleep asked of it noted, not slept."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.asked.append(timeout or 0.0)
        return False


@pytest.mark.usefixtures("small_rounds")
def test_the_watch_sleeps_once_a_burst_not_once_a_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each sleep's wake-up cost more CPU than the 64 records screened before it (0.5 ms
    # here after 0.2 s asleep; the watch was 3.1-3.2 ms/s on a million records, issue 31):
    # chunks now run back to back (the interpreter lock yielded after each) until a
    # burst's CPU is spent, and the tick's spread is slept in one piece after a burst
    journal, _ = _played(tmp_path / "journal.db", 200)
    screens: list[int] = []  # each chunk screened: its first record
    original = health.screen_seals

    def screen(db: sqlite3.Connection, key: bytes, first: int, last: int) -> int | None:
        screens.append(first)
        return original(db, key, first, last)

    monkeypatch.setattr(health, "screen_seals", screen)
    with journal:
        sleeps = _Sleeps()
        watch = RecordWatch(journal, ENGINE.rules, lambda halt: None, sleeps)
        db, key = journal.checker_view()
        try:
            watch.burst_s = 60.0  # a burst longer than any tick: one sleep, the whole spread
            assert watch.tick(db, key, spread_s=5.0, elapsed=60.0) is None
            assert len(screens) >= 5, screens  # (the tick had chunks to spread)
            assert len(sleeps.asked) == 1 and sum(sleeps.asked) == pytest.approx(5.0)
            watch.burst_s = 0.0  # every chunk a burst of its own: a sleep after each
            sleeps.asked.clear()
            screens.clear()
            assert watch.tick(db, key, spread_s=5.0, elapsed=60.0) is None
            assert len(screens) >= 5 and len(sleeps.asked) == len(screens)
            assert sum(sleeps.asked) == pytest.approx(5.0)  # the spread kept either way
        finally:
            db.close()


def test_a_burst_leaves_a_cpu_quota_to_the_rolls() -> None:
    assert health.burst_seconds(None) == health.WATCH_BURST_S == 0.004  # no quota
    assert health.burst_seconds(0.1) == pytest.approx(0.0025)  # 10%: a quarter of 10 ms
    assert health.burst_seconds(2.0) == health.WATCH_BURST_S  # a generous quota: no more
