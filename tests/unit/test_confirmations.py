"""Every 5-point hand confirmable, in any order, while its alert is open (issue #32).

The table keeps the alerts of the newest ``confirmable_alerts`` hands (16 by default) and
takes surveillance's confirmation for any of them once; the surveillance lamp blinks
while any is open and unconfirmed and is steady once all are confirmed. A journal whose
rules records predate the key (1: only the newest) decides exactly as it did.
"""

from __future__ import annotations

import json
from pathlib import Path

from controller.core.commands import Confirm
from controller.core.config import load_config, rules_from_settings, rules_settings
from controller.core.errors import Refusal
from controller.core.events import Refused, SurveillanceAlert, SurveillanceConfirmed
from controller.core.lamps import Effect, Mode, desired_outputs, view_from_state
from controller.core.script import parse_line
from controller.core.table import TableState
from controller.journal import Journal, recover, verify
from controller.journal.play import decide, journal_rules
from tests.floor_support import TableJournal
from tests.floor_support import make_points as point_lines
from tests.support import Table, make_points

FIVE_POINT_HAND = ("bet 3 5", make_points(4, 5, 6, 8, 9), "4 4", "3 4")  # alert, seven-out


def relay(state: TableState) -> Effect:
    """What the surveillance lamp does for ``state``."""
    return desired_outputs(view_from_state(state, Mode.RUNNING)).surveillance


def confirm(t: Table, hand: int, by: str, ident: str = "") -> list[object]:
    """Surveillance's confirm of ``hand`` from the floor; the events it gave."""
    t.last = t.engine.apply(t.state, Confirm(hand, by, ident or f"id-{hand}", actor="floor"))
    t.state = t.last.state
    return list(t.last.events)


def test_three_five_point_hands_are_confirmed_in_reverse_and_the_lamp_follows() -> None:
    t = Table()
    for _ in range(3):
        t.do(*FIVE_POINT_HAND)
    assert t.state.hand == 4 and t.state.alerts() == ((1, None), (2, None), (3, None))
    assert relay(t.state) is Effect.BLINK

    (event,) = confirm(t, 3, "carol")
    assert event == SurveillanceConfirmed(3, "carol", "id-3", actor="floor")
    assert t.state.open_alerts() == (1, 2) and relay(t.state) is Effect.BLINK
    (event,) = confirm(t, 2, "bob")
    assert isinstance(event, SurveillanceConfirmed) and event.hand == 2
    assert t.state.open_alerts() == (1,) and relay(t.state) is Effect.BLINK
    (event,) = confirm(t, 1, "alice")
    assert isinstance(event, SurveillanceConfirmed) and event.hand == 1
    assert t.state.open_alerts() == () and relay(t.state) is Effect.ON
    assert t.state.alerts() == ((1, "alice"), (2, "bob"), (3, "carol"))
    # the state reads back as it was written (a snapshot, a clear_halt)
    assert TableState.from_dict(t.state.to_dict()).alerts() == t.state.alerts()

    before = t.state
    (again,) = confirm(t, 2, "dave", "id-2")  # a repeat: answered, nothing changes
    assert isinstance(again, Refused) and again.code == Refusal.ALREADY_CONFIRMED
    assert again.reason == "hand 2 was already confirmed by bob" and t.state == before
    (never,) = confirm(t, 4, "alice")  # hand 4 is in play: it raised no alert
    assert isinstance(never, Refused) and never.code == Refusal.NO_ALERT
    assert never.reason == (
        "hand 4 has no surveillance alert to confirm (the alerts are for hands 1, 2, 3)"
    )


def test_an_acknowledged_alert_puts_the_lamp_out_and_is_still_confirmable() -> None:
    t = Table()
    t.do(*FIVE_POINT_HAND, *FIVE_POINT_HAND, "ack")
    assert relay(t.state) is Effect.OFF and t.state.open_alerts() == (1, 2)
    assert isinstance(confirm(t, 1, "alice")[0], SurveillanceConfirmed)
    t.do(*FIVE_POINT_HAND)  # a third alert lights it again: hand 2's still waits
    assert relay(t.state) is Effect.BLINK and t.state.open_alerts() == (2, 3)


def test_a_void_takes_back_neither_a_confirmation_nor_an_acknowledgement() -> None:
    t = Table()
    t.do(*FIVE_POINT_HAND, "bet 3 5", make_points(4, 5, 6, 8, 9))  # hand 2's alert roll last
    assert t.state.alerts() == ((1, None), (2, None))
    assert isinstance(confirm(t, 1, "alice")[0], SurveillanceConfirmed)
    t.do("ack", "void")  # the roll that raised hand 2's alert is voided
    assert t.refusal() is None and t.state.points == (4, 5, 6, 8)
    assert t.state.alerts() == ((1, "alice"),) and not t.state.surveillance_alert
    t.do("4 5", "4 5")  # made again: hand 2's alert again, hand 1 stays confirmed
    assert t.state.alerts() == ((1, "alice"), (2, None)) and relay(t.state) is Effect.BLINK


def test_past_the_bound_the_oldest_confirmed_go_first_then_the_oldest_open() -> None:
    t = Table(confirmable_alerts=3)
    t.do(*FIVE_POINT_HAND, *FIVE_POINT_HAND, *FIVE_POINT_HAND)
    confirm(t, 2, "bob")
    t.do(*FIVE_POINT_HAND)  # hand 4: hand 2 (confirmed) makes room
    assert t.state.alerts() == ((1, None), (3, None), (4, None))
    t.do(*FIVE_POINT_HAND)  # hand 5: all open, the oldest (hand 1) goes
    assert t.state.alerts() == ((3, None), (4, None), (5, None))
    assert len(t.state.to_dict()["earlier_alerts"]) == 2  # never more than the bound
    (refused,) = confirm(t, 1, "alice")
    assert isinstance(refused, Refused) and refused.code == Refusal.NO_ALERT
    assert "it keeps the alerts of hands 3, 4, 5" in refused.reason
    assert "clear an older one on the floor with a note" in refused.reason


def test_rules_from_before_the_key_keep_only_the_newest_alert_as_the_table_did() -> None:
    t = Table(confirmable_alerts=1)
    t.do(*FIVE_POINT_HAND, *FIVE_POINT_HAND)
    assert t.state.alerts() == ((2, None),)
    assert "earlier_alerts" not in t.state.to_dict()  # the old snapshot text exactly
    alerts = [e for e in t.events if isinstance(e, SurveillanceAlert)]
    assert [e.to_dict() for e in alerts] == [
        {"event": "surveillance_alert", "hand": h, "unique_points": 5} for h in (1, 2)
    ]
    (refused,) = confirm(t, 1, "alice")
    assert isinstance(refused, Refused)
    assert refused.reason == "hand 1 has no surveillance alert to confirm (the alert is for hand 2)"


def test_the_table_journals_each_confirmation_once(tmp_path: Path) -> None:
    journal = TableJournal(tmp_path / "t.db", table="CR-07")
    hand = ("bet 3 5", *point_lines(4, 5, 6, 8, 9), "4 4", "3 4")
    journal.do(*hand, *hand)
    first = journal.apply(Confirm(1, "alice", "id-1", actor="floor:alice"))
    assert [r.kind for r in first] == ["command"] and "surveillance_confirmed" in json.dumps(
        first[0].events
    )
    assert journal.apply(Confirm(1, "alice", "id-1", actor="floor:alice")) == []  # a repeat
    assert journal.apply(Confirm(1, "bob", "id-9", actor="floor:bob")) == []  # a 2nd console
    refused = journal.apply(Confirm(7, "bob", "id-7", actor="floor:bob"))
    assert len(refused) == 1 and "no_alert" in json.dumps(refused[0].events)  # on record, with why
    assert journal.replay.state.alerts() == ((1, "alice"), (2, None))


def test_a_journal_from_before_the_key_verifies_and_keeps_newer_hands_after_a_start(
    tmp_path: Path,
) -> None:
    """Rules records without ``confirmable_alerts`` (as every table journaled them before
    #32) decide as written, a snapshot at every record matching; the next start's rules
    record (with the key, a change) keeps the hands from then on."""
    key = tmp_path / "journal.key"
    (tmp_path / "t.toml").write_text(
        f'[table]\nid = "CR-07"\n[journal]\nkey_file = "{key}"\nsnapshot_every = 1\n'
    )
    config = load_config(tmp_path / "t.toml")
    journal = Journal(tmp_path / "journal.db", snapshot_every=1, durable=False)
    replay = recover(journal, config.firebet).replay
    old = rules_settings(config)
    del old["firebet"]["confirmable_alerts"]
    journal_rules(journal, replay, rules_from_settings(old), old, config=None, started_by="t")
    hand = ("bet 3 5", *point_lines(4, 5, 6, 8, 9), "4 4", "3 4")
    for line in (*hand, *hand):
        decide(journal, replay, parse_line(line))
    assert replay.state.alerts() == ((2, None),)  # hand 1's is gone, as it was
    assert "earlier_alerts" not in replay.state.to_dict()
    _, changed = journal_rules(
        journal, replay, config.firebet, rules_settings(config), config=None, started_by="t"
    )
    assert changed == {"firebet.confirmable_alerts": {"was": None, "now": 16}}
    for line in (*hand, *hand):
        decide(journal, replay, parse_line(line))
    assert replay.state.open_alerts() == (2, 3, 4)
    refused = decide(journal, replay, Confirm(1, "alice", "u-1", actor="floor:alice"))
    assert refused.outcome.refused is not None and "hands 2, 3, 4" in refused.outcome.refused.reason
    assert isinstance(
        decide(journal, replay, Confirm(2, "alice", "u-2", actor="floor:alice")).outcome.events[0],
        SurveillanceConfirmed,
    )
    report = verify(journal, config.firebet)
    assert report.ok and report.snapshots == report.records - 1, report  # genesis has none
    assert recover(journal, config.firebet).replay.state == replay.state
    journal.close()
