"""A hand keeps the rules it opened under (issue 30; SPEC section 2, settled questions),
through the real service on a real journal: a ``rules`` record journaled while wagers
ride (a restart on a new config) takes effect at the next hand whose betting opens; the
hand in progress settles under its own pay table, limits and options. ``status`` and
the log say a change is pending and why; recovery, the full check and the journal's
replay agree."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from controller.cli.doctor import Doctor
from controller.core.config import load_config
from tests.integration.test_rules_change import config_file, recall
from tests.support import DICE, RunningTable, run_firebet, table_running, wait_for

pytestmark = pytest.mark.slow

NO_POINTS = {4: 24, 5: 249, 6: 999}


def restarted(table: RunningTable) -> None:
    """The new device's power-up HELLO may have gone before the port was open: again,
    so its numbering is not taken for copies of the last run's rolls."""
    table.device.hello()
    wait_for(lambda: table.controller.state.reader_seq is None, what="the reader's HELLO")
    wait_for(lambda: table.status()["journal_check"] == "ok", what="the full check")


def seven_out(table: RunningTable) -> None:
    """A point (the 4, made before or not), then the loser 7."""
    table.throw(*DICE[4])
    table.throw(3, 4)


def pending(table: RunningTable) -> dict[str, Any] | None:
    rules = table.status()["rules"]
    assert rules is not None
    found: dict[str, Any] | None = rules.get("pending")
    return found


def start_twice(tmp_path: Path, changes: dict[str, str]) -> tuple[Path, Path, Any, Any]:
    state, sock = tmp_path / "state", tmp_path / "control.sock"
    before = load_config(config_file(tmp_path / "before.toml", {}, snapshot_every=5))
    after = load_config(config_file(tmp_path / "after.toml", changes, snapshot_every=5))
    return state, sock, before, after


def test_a_bet_taken_at_999_to_1_is_paid_at_999_to_1_after_a_restart_on_99999(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # issue 30: a $5 bet taken at 999 to 1, a restart on 99,999 to 1 while it rode: it
    # was paid $499,995; it is paid $4,995, and the next hand is paid at 99,999 to 1
    state, sock, before, after = start_twice(
        tmp_path, {"firebet.pays": "{ 4 = 24, 5 = 249, 6 = 99999 }"}
    )
    with table_running(state, sock, before) as table:
        assert table.ask("bet", position=3, amount=5)["ok"]
        table.make(4, 5, 6)
    caplog.set_level(logging.WARNING)
    with table_running(state, sock, after) as table:
        restarted(table)
        waiting = pending(table)
        assert waiting is not None and waiting["hand"] == 1, table.status()["rules"]
        assert "hand 1 keeps the rules it opened under" in waiting["why"]
        assert any("a rules change is pending" in r.getMessage() for r in caplog.records)
        table.make(8, 9, 10)
        seven_out(table)
        assert table.status()["last_settlement"]["payouts"] == {"3": 4995}
        assert pending(table) is None  # hand 2 opens under the new pay table
        assert any("are in force from hand 2" in r.getMessage() for r in caplog.records)
        assert table.controller.table is not None
        assert table.controller.table.replay.rules == after.firebet
        assert table.ask("bet", position=3, amount=1)["ok"]
        table.make(4, 5, 6, 8, 9, 10)
        seven_out(table)
        assert table.status()["last_settlement"]["payouts"] == {"3": 99999}
        hands = {h["hand"]: h for h in recall(table, 10)}
        assert hands[1]["payouts"] == {"3": 4995} and hands[2]["payouts"] == {"3": 99999}
        rules_at = [a["record"] for a in hands[1]["actions"] if a["action"] == "rules"]
        (new,) = rules_at
        # history: which rules record decided each hand (the first start's for hand 1)
        assert hands[1]["decided_under"] is not None and hands[1]["decided_under"] < new
        assert hands[2]["decided_under"] == new
    # the export gives each record the rules record it was decided under
    done = run_firebet(
        *("export", "--format", "jsonl"),
        *("--state-dir", str(state), "--config", str(tmp_path / "after.toml")),
    )
    assert done.returncode == 0, done.stderr
    exported = [json.loads(line) for line in done.stdout.splitlines()]
    assert any(r["kind"] == "rules" for r in exported), sorted({r["kind"] for r in exported})
    first_rules = min(r["record"] for r in exported if r["kind"] == "rules")
    commands = [
        r for r in exported if r["kind"] == "command" and r["payload"].get("command") == "roll"
    ]
    before_new = [r["decided_under"] for r in commands if r["record"] < new]
    after_new = [r["decided_under"] for r in commands if r["record"] > new]
    assert set(before_new) == {first_rules}
    # hand 1's rolls after the restart still under the first rules, then the new ones
    assert after_new[0] == first_rules and after_new[-1] == new
    assert set(after_new) == {first_rules, new}
    # and a third start (recovery from the snapshots, the full check) reads it the same
    with table_running(state, sock, after) as table:
        restarted(table)
        assert table.status()["meters"]["paid"] == {"6": {"count": 2, "amount": 4995 + 99999}}
        paid = {h["hand"]: h["payouts"] for h in recall(table, 10)}
        assert paid[1] == {"3": 4995} and paid[2] == {"3": 99999}


def test_the_hand_keeps_its_limits(tmp_path: Path) -> None:
    state, sock, before, after = start_twice(tmp_path, {"firebet.max_wager": "10"})
    with table_running(state, sock, before) as table:
        assert table.ask("bet", position=3, amount=5)["ok"]  # betting still open
    with table_running(state, sock, after) as table:
        restarted(table)
        assert pending(table) is not None
        refused = table.ask("bet", position=3, amount=5)  # $10 under the new limit
        assert not refused["ok"] and "5" in refused["error"], refused
        assert table.ask("bet", position=4, amount=5)["ok"]
        table.make(4)
        seven_out(table)
        assert pending(table) is None
        assert table.ask("bet", position=3, amount=10)["ok"]  # the next hand's limits


def test_the_hand_keeps_pay_six_immediately_off(tmp_path: Path) -> None:
    state, sock, before, after = start_twice(tmp_path, {"firebet.pay_six_immediately": "true"})
    with table_running(state, sock, before) as table:
        assert table.ask("bet", position=3, amount=5)["ok"]
        table.make(4, 5, 6, 8, 9)
    with table_running(state, sock, after) as table:
        restarted(table)
        table.make(10)  # the 6th point: not paid at once under the hand's own rules
        assert table.status()["bets"] == {"3": 5}, table.status()["bets"]
        seven_out(table)
        settled = table.status()["last_settlement"]
        assert settled["payouts"] == {"3": 4995} and not settled["immediate"]


def test_the_hand_keeps_its_surrender_option(tmp_path: Path) -> None:
    state, sock, before, after = start_twice(
        tmp_path, {"firebet.surrender_carries_points": "false"}
    )
    with table_running(state, sock, before) as table:
        assert table.ask("bet", position=3, amount=5)["ok"]
        table.make(4, 5, 6, 8)
    with table_running(state, sock, after) as table:
        restarted(table)
        assert table.ask("surrender")["ok"]
        assert table.status()["points"] == [4, 5, 6, 8]  # carried, as the hand opened
        table.throw(*DICE[9])
        table.throw(3, 4)  # the successor's loser 7: four points, 24 to 1
        assert table.status()["last_settlement"]["payouts"] == {"3": 120}
        assert pending(table) is None


def test_doctor_warns_of_a_pending_rules_change_and_still_exits_0(tmp_path: Path) -> None:
    state, sock, before, after = start_twice(tmp_path, {"firebet.max_wager": "10"})
    with table_running(state, sock, before) as table:
        assert table.ask("bet", position=3, amount=5)["ok"]
    with table_running(state, sock, after) as table:
        restarted(table)
        check = Doctor(argparse.Namespace(serial=None))
        check.config, check.service = after, table.status()
        check.check_rules()
        (rules,) = check.checks
        assert rules.ok and rules.warning and rules.mark == "!"  # a warning: exit 0 alone
        assert "a rules change is pending" in rules.detail and "hand 1 keeps" in rules.detail
        table.make(4)
        seven_out(table)
        check = Doctor(argparse.Namespace(serial=None))
        check.config, check.service = after, table.status()
        check.check_rules()
        (rules,) = check.checks
        assert rules.warning and "the rules changed at the last start" in rules.detail


def test_a_second_restart_while_the_hand_rides_keeps_holding_its_rules(tmp_path: Path) -> None:
    # recovery from a snapshot taken after the rules record finds the hand's own rules
    # through the record's "previous"; a restart on the same file again changes nothing
    state, sock, before, after = start_twice(
        tmp_path, {"firebet.pays": "{ 4 = 30, 5 = 300, 6 = 1000 }"}
    )
    with table_running(state, sock, before) as table:
        assert table.ask("bet", position=3, amount=5)["ok"]
        table.make(4, 5, 6)
    with table_running(state, sock, after) as table:
        restarted(table)
        table.throw(*DICE[8])
        for _ in range(6):
            table.throw(5, 6)  # no decision: records past the rules record, snapshots
    with table_running(state, sock, after) as table:
        restarted(table)
        waiting = pending(table)
        assert waiting is not None and waiting["hand"] == 1, table.status()["rules"]
        table.throw(*DICE[8])  # the 8 made: four points
        seven_out(table)
        assert table.status()["last_settlement"]["payouts"] == {"3": 120}  # 24 to 1, not 30
        assert pending(table) is None
