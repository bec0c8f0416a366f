"""Words on the screen (issue 14.9, 14.13): counts agree with their noun, a lost wager
shows what was lost, the betting window reads as English, doctor prints no Python."""

from __future__ import annotations

import pytest
from rich.console import Console

from controller.cli import doctor
from controller.cli.display import render_status
from controller.cli.wording import count, hand_line, paid_line


def screen(status: dict) -> str:  # type: ignore[type-arg]
    console = Console(width=100, record=True, color_system=None)
    console.print(render_status(status))
    return console.export_text()


def test_counts_agree_with_their_noun() -> None:
    assert count(1, "different point") == "1 different point"
    assert count(0, "different point") == "0 different points"
    assert count(2, "roll") == "2 rolls"


def test_a_hand_reads_the_same_in_replay_history_and_on_the_table() -> None:
    assert (
        hand_line(7, 3, [4, 5, 9], "win", 24)
        == "hand 7: 3 different points (4, 5, 9) - WIN 24 to 1"
    )
    assert hand_line(1, 1, (6,), "lose", 0) == "hand 1: 1 different point (6) - lose"
    assert hand_line(2, 0, [], None, 0) == "hand 2: 0 different points (none) - in play"
    table = screen(
        {
            "last_settlement": {
                "hand": 7, "points": [4, 5, 9], "unique_points": 3, "result": "win",
                "odds_to_one": 24, "payouts": {"3": 120}, "wagers": {"3": 5},
            }
        }
    )  # fmt: skip
    assert "settled hand 7: 3 different points (4, 5, 9) - WIN 24 to 1 - #3 wins $120" in table


def test_a_lost_wager_shows_the_amount_lost() -> None:
    settlement = {"payouts": {"3": 120, "5": 0}, "wagers": {"3": 5, "5": 2}}
    assert paid_line(settlement) == "#3 wins $120, #5 lost $2"
    assert paid_line({"payouts": {}, "wagers": {}}) == "no wagers"


def test_the_table_reads_as_english() -> None:
    text = screen(
        {
            "mode": "running", "table": "T1", "phase": "point", "point": 6, "hand": 2,
            "shooter": 3, "unique_points": 1, "rolls": 1, "betting_open": False,
            "surrender_pending": True, "bets": {"4": 5},
            "last_settlement": {
                "hand": 1, "points": [4], "unique_points": 1, "result": "lose",
                "odds_to_one": 0, "payouts": {"5": 0}, "wagers": {"5": 3},
            },
        }
    )  # fmt: skip
    assert "1 different point" in text and "1 roll; last: none" in text
    assert "fire bets: #4: $5 (betting closed: a surrendered hand is pending)" in text
    assert "settled hand 1: 1 different point (4) - lose - #5 lost $3" in text
    assert "((" not in text and "$0" not in text


def test_doctor_prints_reader_counters_as_words() -> None:
    assert doctor._frames({"ok": 107, "bad_checksum": 2, "overlong": 0}) == (
        "ok 107, bad 2 (bad_checksum 2)"
    )


def test_doctor_asks_root_to_add_the_service_user_to_a_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(doctor.os, "geteuid", lambda: 0)
    assert doctor._group_fix("gpio") == "sudo usermod -aG gpio firebet"


def test_the_sim_footer_names_the_keys_once() -> None:
    from types import SimpleNamespace

    from controller.cli.sim import footer
    from controller.cli.sim_bench import HELP

    bench = SimpleNamespace(manual=None, paused=None)
    assert footer(bench, HELP) == HELP  # an unknown key answers with the keys: once
    bench.paused = "thrower waits: reader fault (key the rolls with m)"
    assert footer(bench, "dice thrown").splitlines() == [
        bench.paused,
        "dice thrown",
        *HELP.splitlines(),
    ]
    assert all(len(row) <= 76 for row in HELP.splitlines())  # inside the border on 80


def test_money_has_a_thousands_separator() -> None:
    from controller.cli.wording import money

    assert money(4995) == "$4,995" and money(7992) == "$7,992" and money(5) == "$5"
    settlement = {"payouts": {"3": 4995}, "wagers": {"3": 5}}
    assert paid_line(settlement) == "#3 wins $4,995"


def test_a_halted_table_never_shows_betting_open() -> None:
    text = screen(
        {"mode": "halted", "halted": "record 13 does not match its seal", "betting_open": True}
    )
    assert "betting open" not in text and "betting closed: the table is halted" in text


def test_status_names_the_readers_model_firmware_stale_copies_and_naks() -> None:
    reader = {
        "port": "/dev/ttyUSB0", "connected": True, "fault": None, "counters": {"ok": 9},
        "model": "DR-7", "firmware": "2.1.0", "copies": {"repeated": 3, "stale": 2},
        "naks": {"BAD_HELLO": 1, "PROTOCOL": 0, "withheld": 5},
    }  # fmt: skip
    table = " ".join(screen({"reader": reader}).replace("│", " ").split())  # lines joined
    assert "reader /dev/ttyUSB0 (DR-7, firmware 2.1.0): connected" in table
    assert "stale copies 2, NAKs 1" in table
    plain = screen({"reader": {"port": "p", "connected": True, "counters": {}}})
    assert "reader p: connected" in plain and "NAK" not in plain
