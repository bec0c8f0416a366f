"""The records sorted into hands for the console, in the shape of ``history --json``.

Each hand log holds its rolls, its points in order, its wagers, its settlement and
who did what (:func:`new_hand` gives the keys). :func:`sort_event` puts one event
the table recorded into its hand's log, as the walk of
:class:`controller.floor.audit.TableAudit` meets it; what it touched goes into the
:class:`controller.floor.findings.Findings` of that record.
"""

from __future__ import annotations

from typing import Any

from controller.core.events import (
    Acknowledged,
    BetAccepted,
    BetCancelled,
    Event,
    Refused,
    RollAccepted,
    RollVoided,
    Settlement,
    Surrendered,
    SurveillanceAlert,
    SurveillanceConfirmed,
)
from controller.core.state import TableState
from controller.floor.findings import AlertRaised, Confirmed, ConfirmRefused, Findings
from controller.wire.messages import FloorRecord

Hands = dict[int, dict[str, Any]]


def new_hand(number: int, record: int) -> dict[str, Any]:
    """An empty hand log (the keys of ``history --json`` and what the floor adds)."""
    return {
        "hand": number,
        "points": [],
        "unique_points": 0,
        "result": None,
        "odds_to_one": None,
        "payouts": {},
        "wagers": {},
        "rolls": [],
        "actions": [],
        "first_record": record,
        "last_record": record,
        "alert_record": None,
        "problems": [],
    }


def touch(hands: Hands, number: int, record: int, found: Findings) -> dict[str, Any]:
    """Hand ``number``'s log (a new one when it has none), as touched by ``record``."""
    hand = hands.get(number)
    if hand is None:
        hand = hands[number] = new_hand(number, record)
    hand["last_record"] = record
    found.hands[number] = hand
    found.dropped_hands.discard(number)
    return hand


def _action(
    hands: Hands,
    hand: int,
    what: str,
    rec: FloorRecord,
    actor: str,
    found: Findings,
    **detail: Any,
) -> None:
    touch(hands, hand, rec.record, found)["actions"].append(
        {"action": what, **detail, "actor": actor, "at": rec.at, "record": rec.record}
    )


def sort_event(
    hands: Hands,
    rec: FloorRecord,
    actor: str,
    before: TableState,
    e: Event,
    after: TableState,
    found: Findings,
) -> None:
    """Put one recorded event into its hand's log."""
    who = str(getattr(e, "actor", actor))
    if isinstance(e, RollAccepted):
        touch(hands, before.hand, rec.record, found)["rolls"].append([e.d1, e.d2])
    elif isinstance(e, Settlement):
        hand = touch(hands, e.hand, rec.record, found)
        hand.update(e.report())
        hand["wagers"] = {str(p): a for p, a in sorted(e.wagers.items())}
    elif isinstance(e, RollVoided):
        if before.hand != after.hand and before.hand in hands:
            gone = hands.pop(before.hand)  # the voided seven-out's successor hand
            found.hands.pop(before.hand, None)
            found.dropped_hands.add(before.hand)
            touch(hands, after.hand, rec.record, found)["actions"].extend(gone["actions"])
        hand = touch(hands, after.hand, rec.record, found)
        if hand["rolls"]:
            hand["rolls"].pop()
        if e.reversed_settlement is not None:
            hand.update(result=None, odds_to_one=None, payouts={})
        hand["wagers"] = {str(p): a for p, a in sorted(after.bets.items())}
        _action(hands, after.hand, "void", rec, who, found, dice=[e.d1, e.d2])
    elif isinstance(e, BetAccepted | BetCancelled):
        what = "bet" if isinstance(e, BetAccepted) else "cancel"
        _action(hands, before.hand, what, rec, who, found, position=e.position, amount=e.amount)
        touch(hands, before.hand, rec.record, found)["wagers"] = {
            str(p): a for p, a in sorted(after.bets.items())
        }
    elif isinstance(e, Surrendered):
        _action(hands, before.hand, "surrender", rec, who, found, kind=e.surrender,
                     pending=e.pending)  # fmt: skip
    elif isinstance(e, Acknowledged):
        _action(hands, before.hand, "ack", rec, who, found)
    elif isinstance(e, SurveillanceAlert):
        touch(hands, e.hand, rec.record, found)["alert_record"] = rec.record
        found.alerts.append(AlertRaised(rec.record, e.hand, rec.at, e.unique_points))
    elif isinstance(e, Refused) and e.command == "confirm":
        asked = rec.payload
        hand = asked.get("hand")
        ident = asked.get("id")
        found.refusals.append(
            ConfirmRefused(
                rec.record, hand if isinstance(hand, int) else None, e.reason,
                ident if isinstance(ident, str) else None,
            )
        )  # fmt: skip
        _action(hands, before.hand, "refused", rec, actor, found, command=e.command,
                     reason=e.reason)  # fmt: skip
    elif isinstance(e, Refused):
        _action(hands, before.hand, "refused", rec, actor, found, command=e.command,
                     reason=e.reason)  # fmt: skip
    elif isinstance(e, SurveillanceConfirmed):
        found.confirmations.append(Confirmed(rec.record, e.hand, e.by, e.id or None))
        _action(hands, e.hand, "surveillance_confirmed", rec, e.by, found)
    hand = touch(hands, after.hand, rec.record, found)
    hand["points"] = list(after.points)
    if hand["result"] is None:
        hand["unique_points"] = len(after.points)
