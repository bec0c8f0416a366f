"""The floor's second opinion: records folded through the rules engine, differences flagged."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

from controller.core.commands import Confirm
from controller.core.config import load_config
from controller.floor.audit import NOT_SENT, TableAudit
from controller.wire.messages import FloorRecord
from tests.floor_support import TableJournal, make_points

FIVE = ["bet 1 5", "bet 2 3", *make_points(4, 5, 6, 8, 9), "4 4", "3 4"]


def everything(tmp_path: Path, *lines: str) -> list[FloorRecord]:
    """The records with the table's events, as the table's floor link publishes them."""
    table = TableJournal(tmp_path / "j.db")
    table.do(*lines)
    return table.records()


def walk(records: list[FloorRecord], audit: TableAudit | None = None):  # type: ignore[no-untyped-def]
    audit = audit or TableAudit()
    found = []
    for rec in records:
        found.append(audit.step(rec))
    return audit, found


def test_an_honest_table_checks_clean_and_raises_the_alert_at_the_fifth_point(
    tmp_path: Path,
) -> None:
    table = TableJournal(tmp_path / "j.db")
    table.do(*FIVE, "bet 3 2", "2 2", "void", "3 4")
    records = table.records()
    assert all(r.events for r in records if r.kind == "command")  # the table's answer
    audit, found = walk(records)
    assert [d for f in found for d in f.discrepancies] == []
    alerts = [a for f in found for a in f.alerts]
    assert [(a.hand, a.unique_points) for a in alerts] == [(1, 5)]
    assert audit.checked_hand == 1 and audit.record == records[-1].record
    assert audit.unchecked_records == 0 and audit.unchecked_hands == []
    hand1 = audit.hands[1]
    assert hand1["points"] == [4, 5, 6, 8, 9]
    assert hand1["result"] == "win" and hand1["odds_to_one"] == 249
    assert hand1["payouts"] == {"1": 1245, "2": 747}
    assert hand1["wagers"] == {"1": 5, "2": 3}
    assert [a["action"] for a in hand1["actions"]] == ["bet", "bet"]
    # the floor's hands are the table's own game recall
    history = table.history(2)
    for line in history:
        mine = audit.hands[line["hand"]]
        for key in ("points", "unique_points", "result", "odds_to_one", "payouts", "rolls"):
            assert mine[key] == line[key], key


def test_a_settlement_the_rules_do_not_give_is_flagged_once(tmp_path: Path) -> None:
    records = everything(tmp_path, *FIVE)
    bad = copy.deepcopy(records)
    seven = bad[-1]
    for event in seven.events:
        if event["event"] == "settlement":
            event["payouts"] = {"1": 5000, "2": 747}
    _, found = walk(bad)
    differences = [d for f in found for d in f.discrepancies]
    assert len(differences) == 1
    d = differences[0]
    assert (d.record, d.hand, d.what) == (seven.record, 1, "settlement")
    assert "$5,000" in d.detail and "$1,245" in d.detail
    assert audit_problems(bad) == [f"record {seven.record}: {d.detail}"]


def audit_problems(records: list[FloorRecord]) -> list[str]:
    audit, _ = walk(records)
    return [p for hand in audit.hands.values() for p in hand["problems"]]


def test_a_record_without_the_table_s_events_is_folded_and_not_checked(tmp_path: Path) -> None:
    table = TableJournal(tmp_path / "j.db")
    table.do(*FIVE, "bet 3 2", *make_points(4), "4 4", "3 4", *make_points(6))
    records = table.records()
    hand2 = next(r for r in records if r.kind == "command" and r.payload.get("position") == 3)
    bare = [replace(r, events=None) if r is hand2 else r for r in records]
    audit, found = walk(bare)
    # nothing to compare, but a hand that cannot be vouched for is an alert (once a hand)
    (unchecked,) = [d for f in found for d in f.discrepancies]
    assert (unchecked.record, unchecked.hand, unchecked.what) == (hand2.record, 2, "unchecked")
    assert "hand 2 is not checked" in unchecked.detail
    assert audit.folded_hand == 2 and audit.state.points == (6,)  # folded all the same
    assert audit.checked_hand == 1  # does not pass hand 2
    assert audit.unchecked_hands == [2] and audit.unchecked_records == 1
    assert audit.hands[2]["payouts"] == {"3": 0} and audit.hands[2]["unique_points"] == 1
    assert audit.hands[2]["problems"] == [f"record {hand2.record}: {NOT_SENT}"]
    again = TableAudit.from_dict(audit.to_dict())
    assert (again.checked_hand, again.unchecked_hands) == (1, [2])
    # events the floor cannot read: a difference, and not checked either
    garbled = [replace(r, events=[{"event": "jackpot"}]) if r is hand2 else r for r in records]
    audit, found = walk(garbled)
    assert [d.what for f in found for d in f.discrepancies] == ["unreadable"]
    assert audit.checked_hand == 1 and audit.folded_hand == 2


def test_a_marker_out_of_order_is_flagged(tmp_path: Path) -> None:
    records = everything(tmp_path, *make_points(4, 5))
    bad = copy.deepcopy(records)
    for rec in bad:
        for event in rec.events or []:
            if event["event"] == "new_point" and event["point"] == 5:
                event["ordinal"] = 3
    _, found = walk(bad)
    differences = [d for f in found for d in f.discrepancies]
    assert [d.what for d in differences] == ["markers"]
    assert "5 as point 3" in differences[0].detail and "5 as point 2" in differences[0].detail


def test_the_rules_journaled_at_start_are_the_rules_checked(tmp_path: Path) -> None:
    house = tmp_path / "house.toml"
    house.write_text('[firebet]\npreset = "nv-25-250-1000"\npays = { 4 = 30, 5 = 300, 6 = 1000 }\n')
    config = load_config(house)
    table = TableJournal(tmp_path / "j.db", config=config)
    table.do(*FIVE)
    records = table.records()
    assert records[1].kind == "rules"
    audit, found = walk(records)
    assert [d for f in found for d in f.discrepancies] == []
    assert audit.hands[1]["payouts"] == {"1": 1500, "2": 900}
    assert audit.rules_record == 2 and audit.program == "test-program"
    assert audit.rules == config.firebet
    # without the rules record the same records pay more than the NJ defaults give
    _, found = walk(
        [r for r in records if r.kind != "rules"][:1]
        + [replace(r, record=r.record - 1) for r in records[2:]]
    )
    assert [d.what for f in found for d in f.discrepancies] == ["settlement"]
    # a rules record that cannot be read is flagged, and the rules before it stay
    broken = replace(records[1], payload={"table": {}})
    _, found = walk([records[0], broken])
    assert [d.what for f in found for d in f.discrepancies] == ["unreadable"]


def test_a_confirmation_and_a_refusal_are_found(tmp_path: Path) -> None:
    table = TableJournal(tmp_path / "j.db")
    table.do(*FIVE[:-2])
    table.apply(Confirm(hand=2, by="bob", id="x", actor="floor:bob"))
    table.apply(Confirm(hand=1, by="alice", id="y", actor="floor:alice"))
    audit, found = walk(table.records())
    refusals = [r for f in found for r in f.refusals]
    assert [(r.hand, r.command_id) for r in refusals] == [(2, "x")]
    assert "the alert is for hand 1" in refusals[0].reason
    confirmations = [c for f in found for c in f.confirmations]
    assert [(c.hand, c.by, c.command_id) for c in confirmations] == [(1, "alice", "y")]
    assert [d for f in found for d in f.discrepancies] == []
    assert audit.hands[1]["actions"][-1]["action"] == "surveillance_confirmed"


def test_a_voided_seven_out_gives_the_hand_back(tmp_path: Path) -> None:
    records = everything(tmp_path, "bet 1 5", *make_points(4), "3 3", "3 4", "void")
    audit, found = walk(records)
    assert [d for f in found for d in f.discrepancies] == []
    assert 2 in {n for f in found for n in f.dropped_hands}
    assert sorted(audit.hands) == [1]
    assert audit.hands[1]["result"] is None and audit.hands[1]["wagers"] == {"1": 5}
    assert audit.state.hand == 1


def test_the_audit_resumes_from_its_saved_form(tmp_path: Path) -> None:
    table = TableJournal(tmp_path / "j.db")
    table.do("bet 1 5", *make_points(4, 5))
    first = table.records()
    audit, _ = walk(first)
    again = TableAudit.from_dict(audit.to_dict())
    rest = table.do(*make_points(6, 8, 9), "4 4", "3 4")
    resumed, found = walk(rest, again)
    assert [d for f in found for d in f.discrepancies] == []
    assert [(a.hand, a.unique_points) for f in found for a in f.alerts] == [(1, 5)]
    assert resumed.hands[1]["payouts"] == {"1": 1245}
