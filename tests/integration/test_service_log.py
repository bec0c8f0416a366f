"""What the service log says (issue 25): each surveillance alert, settlement (every
wager's payout), void (and the settlement it reversed) and surrender, in words."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from controller.core.events import Settlement
from controller.service.jobs import settlement_text
from tests.support import PROCESS_DEADLINE_S, ROOT, RunningTable, wait_for


def _logged(caplog: pytest.LogCaptureFixture, text: str) -> None:
    wait_for(
        lambda: any(text in r.getMessage() for r in caplog.records),
        what=f"{text!r} in the service log",
    )


def test_the_log_tells_each_alert_settlement_void_and_surrender(
    running_table: RunningTable, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="firebet.service")
    t = running_table
    assert t.ask("bet", position=3, amount=5)["ok"]
    assert t.ask("bet", position=5, amount=2)["ok"]
    t.make(4, 5, 6, 8, 9)  # five different points: the alert
    _logged(caplog, "SURVEILLANCE ALERT: hand 1 made its 5 different points")
    assert t.ask("ack")["ok"]
    _logged(caplog, "surveillance alert acknowledged by")
    t.throw(2, 2)  # point 4
    t.throw(3, 4)  # seven-out: 249 to 1
    _logged(caplog, "hand 1 settled: 5 different points (4, 5, 6, 8, 9), win 249 to 1; ")
    _logged(caplog, "#3 wins $1,245, #5 wins $498")
    assert t.ask("void")["ok"]
    _logged(caplog, "roll 3 4 voided by")
    t.throw(2, 2)  # point made: no decision for the fire bets
    _logged(caplog, "settlement of hand 1 reversed by the void: the hand is back in play")
    assert t.ask("surrender")["ok"]
    _logged(caplog, "voluntary surrender by")
    _logged(caplog, "the fire bets stay pending for the successor's loser 7")


def test_a_lost_wager_is_logged_with_what_was_lost() -> None:
    lost = Settlement(1, (4,), 1, "lose", 0, 0, payouts={3: 0}, wagers={3: 5})
    assert settlement_text(lost) == "hand 1 settled: 1 different point (4), lose; #3 lost $5"


def start_up_log(state: Path, log: Path, *more: str) -> str:
    """``firebet run`` (simulated reader, mock pins) on ``state`` as a real process: its log
    once the start-up line ("ready in ..." or "HALTED in ...: table ...") is written; the
    service is then stopped. ``more``: further arguments (a ``--config``)."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "controller", "run", "--simulated-reader",
             "--pin-factory", "mock", "--state-dir", str(state), *more],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        wait_for(lambda: "s: table " in log.read_text(), what="the start-up line")
        return log.read_text()
    finally:
        proc.terminate()
        proc.wait(timeout=PROCESS_DEADLINE_S)


@pytest.mark.slow
def test_a_service_that_starts_halted_says_halted_not_ready(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "journal.db").write_bytes(b"this is not a database" * 100)
    text = start_up_log(state, tmp_path / "service.log")
    assert "ERROR firebet: HALTED in" in text
    assert "ready in" not in text and "firebet clear-halt" in text


@pytest.mark.slow
def test_the_ready_line_says_the_record_and_hand_the_table_resumed_at(tmp_path: Path) -> None:
    """#33: the ready line named the table and the socket, not where the game stood."""
    from controller.cli.run import resumed_at
    from controller.core.commands import Bet, Roll
    from controller.core.engine import Engine
    from controller.journal import Journal, recover
    from controller.journal.play import decide

    state = tmp_path / "state"
    state.mkdir()
    with Journal(state / "journal.db") as journal:
        replayed = recover(journal, Engine().rules).replay
        for command in (Bet(1, 5), Roll(3, 4), Roll(4, 3), Roll(6, 6), Roll(2, 4)):
            decide(journal, replayed, command)  # two naturals, craps, then the point 6
        assert (replayed.state.hand, replayed.state.point) == (1, 6)
        last = journal.last_record
    assert resumed_at(0, replayed.state).startswith("a new journal")
    (line,) = [x for x in start_up_log(state, tmp_path / "service.log").splitlines()
               if "s: table " in x]  # fmt: skip
    assert "ready in " in line and f"resumed at record {last}, hand 1, point 6," in line


@pytest.mark.slow
@pytest.mark.parametrize("protocol", [1, 2, 3])
def test_the_start_says_once_what_the_reader_s_protocol_cannot_protect_against(
    tmp_path: Path, protocol: int
) -> None:
    """Issue 29: a protocol-1 or -2 reader's risks are said once, at start, before READY,
    with the way out; a protocol-3 reader has none to say."""
    config = tmp_path / "firebet.toml"
    config.write_text(f"[reader]\nprotocol = {protocol}\n")
    text = start_up_log(tmp_path / "state", tmp_path / "service.log", "--config", str(config))
    said = [line for line in text.splitlines() if "cannot protect the table against" in line]
    if protocol == 3:
        assert said == [], said
        return
    (line,) = said
    assert f"WARNING firebet.service: reader protocol {protocol} (" in line, line
    assert "set [reader] protocol = 3 for a reader that speaks it" in line
    assert text.index(line) < text.index("ready in")
