"""The floor link's fold: the events the table's engine decided for each record it publishes,
from the newest snapshot before the first one, with the rules the table runs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from controller.core.commands import Bet, Roll
from controller.core.config import FireBetRules, load_config, rules_settings
from controller.core.engine import Engine
from controller.core.script import parse_line
from controller.core.state import TableState
from controller.journal import Journal, Record, RecordKind, Replay, recover
from controller.journal.play import decide, journal_rules
from controller.journal.system import start_body
from controller.link.fold import LinkFold
from controller.wire.messages import event_message
from tests.floor_support import make_points


def play(journal: Journal, replayed: Replay, lines: list[str]) -> None:
    for line in lines:
        command = parse_line(line)
        assert command is not None
        decide(journal, replayed, command)


def truth(journal: Journal, engine: Engine) -> dict[int, list[dict[str, Any]]]:
    """Each command record's events, folded from genesis (what the engine thread decided),
    a void's with the record of the roll it undid."""
    state, out, last_roll = TableState(), {}, None
    for rec in journal.records():
        if rec.kind == "command":
            outcome = engine.apply(state, rec.command())
            state = outcome.state
            out[rec.record] = [e.to_dict() for e in outcome.events]
            for e in out[rec.record]:
                if e["event"] == "void":
                    e["record"] = last_roll
            if any(e["event"] == "roll" for e in out[rec.record]):
                last_roll = rec.record
    return out


STARTED: dict[str, Any] = {"config": None, "started_by": "test"}
LINES = ["bet 1 5", "bet 2 3", *make_points(4, 5, 6, 8, 9), "4 4", "3 4", "bet 3 2", "2 2",
         "void", "3 4", "bet 4 1", *make_points(10), "5 2", "4 4", "5 2", "void"]  # fmt: skip


def test_every_command_record_gets_the_events_its_engine_decided(tmp_path: Path) -> None:
    engine = Engine()
    with Journal(tmp_path / "j.db", durable=False, snapshot_every=4) as journal:
        replayed = recover(journal, engine.rules).replay
        play(journal, replayed, LINES)
        expected = truth(journal, engine)
        records = list(journal.records())
        assert sum(1 for r in records if r.snapshot) >= 5  # the fold starts from them
        fold = LinkFold(engine.rules)
        got = {r.record: fold.events(journal, r) for r in records}
        assert fold.rebuilds == 1  # from genesis, then forward
        assert {n: e for n, e in got.items() if e is not None} == expected  # as to_dict()
        voided = [e for e in got[records[-1].record] or [] if e["event"] == "void"]
        assert voided and voided[0]["reversed_settlement"]["hand"] == 2  # a nested event
        # the void names the record of the roll it undid (the seven-out just before it)
        undone = records[voided[0]["record"] - 1]
        rolled = undone.command()
        assert isinstance(rolled, Roll) and (rolled.d1, rolled.d2) == (5, 2)
        assert voided[0]["record"] == records[-2].record
        assert all(got[r.record] is None for r in records if r.kind != "command")
        # a fresh fold from the middle (a restart with a backlog), and a resend going back
        for start in (7, 13, 2, len(records)):
            fold = LinkFold(engine.rules)
            for rec in records[start - 1 :]:
                assert fold.events(journal, rec) == expected.get(rec.record), (start, rec.record)
        fold = LinkFold(engine.rules)
        assert fold.events(journal, records[20]) == expected.get(21)
        assert fold.events(journal, records[5]) == expected.get(6)  # back: rebuilt
        assert fold.events(journal, records[6]) == expected.get(7)  # and on from there
        assert fold.rebuilds == 2


def test_the_message_keeps_the_stored_payload_and_adds_the_events(tmp_path: Path) -> None:
    engine = Engine()
    with Journal(tmp_path / "j.db", durable=False) as journal:
        replayed = recover(journal, engine.rules).replay
        rec = decide(journal, replayed, Bet(position=3, amount=5)).record
        assert rec is not None
        events = LinkFold(engine.rules).events(journal, rec)
    message = json.loads(event_message("CR-07", rec, events))
    assert message["payload"] == json.loads(rec.payload)  # the sealed body, as stored
    assert message["events"] == [
        {"event": "bet", "position": 3, "amount": 5, "total": 5, "actor": "dealer",
         "at": message["events"][0]["at"]}
    ]  # fmt: skip
    assert "events" not in json.loads(event_message("CR-07", rec))


def test_each_run_is_replayed_with_the_rules_its_start_journaled(tmp_path: Path) -> None:
    house = tmp_path / "house.toml"
    house.write_text("[firebet]\npays = { 4 = 30, 5 = 300, 6 = 1000 }\n")
    config = load_config(house)
    other = tmp_path / "other.toml"
    other.write_text('[firebet]\npreset = "custom"\npays = { 4 = 7, 5 = 70, 6 = 700 }\n')
    later = load_config(other)
    earlier, now = Engine(config.firebet), Engine(later.firebet)
    five = ["bet 1 5", *make_points(4, 5, 6, 8, 9), "4 4", "3 4"]
    with Journal(tmp_path / "j.db", durable=False) as journal:
        replayed = recover(journal, earlier.rules).replay
        journal_rules(journal, replayed, config.firebet, rules_settings(config), **STARTED)
        play(journal, replayed, five)
        journal.append_system(  # a restart under other rules
            RecordKind.START, actor="service", state=replayed.state, payload=start_body(1, {})
        )
        journal_rules(journal, replayed, later.firebet, rules_settings(later), **STARTED)
        assert replayed.engine.rules == now.rules
        play(journal, replayed, five)
        fold = LinkFold(FireBetRules())
        paid = []
        for rec in journal.records():
            for e in fold.events(journal, rec) or []:
                if e["event"] == "settlement":
                    paid.append(e["payouts"])
    assert paid == [{1: 1500}, {1: 350}]  # each run's own pay table


def damage(path: Path, record: int) -> None:
    db = sqlite3.connect(path)
    db.execute('UPDATE records SET body = \'{"command":"nonsense"}\' WHERE record = ?', (record,))
    db.commit()
    db.close()


def test_a_record_that_cannot_be_folded_has_no_events_until_a_snapshot(tmp_path: Path) -> None:
    engine = Engine()
    path = tmp_path / "j.db"
    with Journal(path, durable=False, snapshot_every=10) as journal:
        replayed = recover(journal, engine.rules).replay
        for i in range(25):
            decide(journal, replayed, Roll(1 + i % 6, 1 + (i * 5) % 6, seq=i + 1))
        expected = truth(journal, engine)
    damage(path, 5)
    with Journal(path, read_only=True) as reader:
        reader.attach()
        fold = LinkFold(engine.rules)
        got = {r.record: fold.events(reader, r) for r in reader.records()}
    assert [n for n, e in got.items() if e is None] == [1, *range(5, 11)]
    assert {n: got[n] for n in range(11, 26)} == {n: expected[n] for n in range(11, 26)}
    assert {n: got[n] for n in range(2, 5)} == {n: expected[n] for n in range(2, 5)}


def test_a_record_from_a_journal_the_fold_cannot_read_is_not_guessed(tmp_path: Path) -> None:
    rec = Record(3, "not a time", "dealer", "command", '{"command":"bet"}', "0" * 64, "1" * 64)
    fold = LinkFold(FireBetRules())
    fold._at = 2  # already folded up to it
    assert fold.events(None, rec) is None  # type: ignore[arg-type]
