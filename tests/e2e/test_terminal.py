"""Terminal programs as a person sees them: an 80x24 tmux pane, read back as text."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import RunningTable, Tmux, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


@pytest.fixture
def terminal() -> Iterator[list[Tmux]]:
    opened: list[Tmux] = []
    try:
        yield opened
    finally:
        for t in opened:
            t.close()


def test_status_watch_draws_the_table_live_and_ends_on_ctrl_c(
    running_table: RunningTable, terminal: list[Tmux]
) -> None:
    cmd = f"{sys.executable} -m controller status --watch 0.2 --socket {running_table.socket}"
    tty = Tmux("watch", cmd)
    terminal.append(tty)
    # each expectation is waited for: a capture may fall between two rows of a redraw
    tty.wait("Ctrl-C to stop")
    tty.wait("RUNNING")
    first = tty.wait("0 rolls; last: none")
    assert all(len(row) <= 80 for row in first.splitlines())
    running_table.throw(2, 2)
    tty.wait("point 4")
    tty.wait("1 roll; last: 2+2=4")
    running_table.throw(2, 2)
    tty.wait("1 different point")
    tty.wait("● 1")  # the marker of 4 lit with its ordinal
    tty.keys("C-c")
    assert "EXIT=0" in tty.wait("EXIT=")
    assert "Traceback" not in tty.screen()


def test_status_watch_says_when_the_service_is_gone(terminal: list[Tmux], tmp_path) -> None:  # type: ignore[no-untyped-def]
    cmd = f"{sys.executable} -m controller status --watch 0.2 --socket {tmp_path / 'none.sock'}"
    tty = Tmux("gone", cmd)
    terminal.append(tty)
    tty.wait("retrying")
    tty.wait("firebet service is not running")
    tty.keys("C-c")
    assert "EXIT=0" in tty.wait("EXIT=")


def test_sim_keys_manual_roll_prompt_and_fault_toggle(terminal: list[Tmux], tmp_path) -> None:  # type: ignore[no-untyped-def]
    cmd = (
        f"{sys.executable} -m controller sim --seed 3 --interval 3600 --no-bets "
        f"--state-dir {tmp_path / 'var'}"
    )
    tty = Tmux("sim", cmd)
    terminal.append(tty)
    screen = tty.wait("[q]uit")
    rows = screen.splitlines()
    assert len(rows) <= 24 and all(len(row) <= 80 for row in rows)
    tty.wait("RUNNING")

    tty.keys("f")
    tty.wait("READER FAULT")
    tty.keys("m")  # a prompt at once, and the table still drawn under it
    tty.wait("manual roll (Esc cancels), type the two dice:")
    tty.wait("READER FAULT")
    tty.keys("3", " ", "5")  # a space between the dice is fine
    tty.wait("manual roll 3 5 entered")
    tty.wait("1 roll; last: 3+5=8")
    tty.wait("point 8")
    tty.keys("m", "7")
    tty.wait("(dice show 1 to 6, not '7')")
    tty.keys("Escape")
    tty.wait("manual roll cancelled")

    # fault, unplug, replug: the reader is well again, so f raises a fault (not clears one)
    tty.keys("f")
    tty.wait("reader fault cleared")
    tty.wait("RUNNING")
    tty.keys("f")
    tty.wait("reader fault injected")
    tty.keys("u")
    tty.wait("reader unplugged")
    tty.keys("u")
    tty.wait("reader plugged back in")
    tty.wait("RUNNING")
    tty.keys("f")
    tty.wait("reader fault injected")
    tty.wait("READER FAULT")

    tty.keys("q")
    screen = tty.wait("EXIT=")
    assert "EXIT=0" in screen and "firebet sim: seed 3" in screen
    assert "Traceback" not in screen


def test_diag_buttons_on_mock_pins_are_pressed_from_the_keyboard(terminal: list[Tmux]) -> None:
    tty = Tmux("buttons", f"{sys.executable} -m controller diag buttons --pin-factory mock")
    terminal.append(tty)
    tty.wait("keys v, s, a press void, surrender, ack")
    tty.keys("v")
    tty.wait("void      BCM 17  held  (confirmed: would post)")
    tty.wait("void      BCM 17  released")
    tty.keys("a")
    tty.wait("ack       BCM 22  released")
    tty.keys("C-c")
    screen = tty.wait("EXIT=")
    assert "summary: void 1 pressed, 1 held, surrender 0 pressed, 0 held, ack 1 pressed" in screen
    assert "EXIT=0" in screen


def _flat(screen: str) -> str:
    """The screen's words as one line: the border gone, a row's wrap a space (a long state
    directory wraps the reader's line where it will)."""
    return " ".join(screen.replace("│", " ").split())


def _frames_ok(screen: str) -> int:
    found = re.search(r"frames ok ([\d,]+)", _flat(screen))
    return int(found.group(1).replace(",", "")) if found else -1


def _rolls(screen: str) -> int:
    found = re.search(r"([\d,]+) rolls?; last:", _flat(screen))
    return int(found.group(1).replace(",", "")) if found else -1


def _fits(screen: str) -> None:
    rows = screen.rstrip("\n").splitlines()
    assert len(rows) <= 24 and all(len(row) <= 80 for row in rows)
    drawn = [row for row in rows if row.strip()]
    assert drawn[0].startswith("╭") and drawn[-1].startswith("╰"), screen  # the whole border
    assert sum("keys:" in row for row in rows) == 1, screen  # the keys drawn once


def test_sim_thrower_waits_in_a_fault_and_held_rolls_go_at_once(
    terminal: list[Tmux], tmp_path: Path
) -> None:
    cmd = (
        f"{sys.executable} -m controller sim --seed 5 --interval 0.2 --no-bets "
        f"--state-dir {tmp_path / 'var'}"
    )
    tty = Tmux("simheld", cmd)
    terminal.append(tty)
    wait_for(lambda: _rolls(tty.screen()) >= 3, what="the thrower throwing")
    tty.keys("f")
    tty.wait("thrower waits: reader fault")
    rolls = _rolls(tty.wait("READER FAULT"))
    # the reader keeps talking (heartbeats every 0.5 s): 8 more frames is seconds in which
    # a thrower at 0.2 s would have thrown many times
    frames = _frames_ok(tty.screen())
    assert frames >= 0, tty.screen()
    wait_for(lambda: _frames_ok(tty.screen()) >= frames + 8, what="the reader's heartbeats")
    assert _rolls(tty.screen()) == rolls and "HELD" not in tty.screen()
    tty.keys("m", "2", "2")
    tty.wait("manual roll 2 2 entered")
    tty.keys("f")  # the reader well again: its next throw is held (a roll was keyed)
    tty.wait("reader fault cleared")
    tty.wait("HELD READER ROLLS (1)")
    tty.wait("thrower waits: 1 held roll to decide")
    for n in range(2, 31):  # the dealer's own throws, held too: the list stays one row
        tty.keys("t")
        tty.wait(f"HELD READER ROLLS ({n})", timeout=60)
    screen = tty.screen()
    _fits(screen)
    assert "and 27 more" in screen and screen.count("HELD READER ROLLS") == 1
    tty.keys("X")
    tty.wait("30 held rolls discarded", timeout=60)
    wait_for(lambda: _rolls(tty.screen()) > rolls + 1, what="the thrower throwing again")
    screen = tty.screen()
    assert "HELD" not in screen and "thrower waits" not in screen
    _fits(screen)
    tty.keys("q")
    assert "EXIT=0" in tty.wait("EXIT=")
