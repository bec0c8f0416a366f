"""What the second opinion finds, and the words for a difference (docs/floor.md).

The walk (:class:`controller.floor.audit.TableAudit`) gives :class:`Findings`:
the differences between what the table recorded and what the rules give
(:class:`Discrepancy`, worded by :func:`describe`), the alerts the table raised,
surveillance's confirmations and their refusals, and the hands the records touched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from controller.core.events import (
    Event,
    NewDifferentPoint,
    Settlement,
    SurveillanceAlert,
)
from controller.floor.vocabulary import Finding


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def money(amount: int) -> str:
    """An amount as the console shows it: ``$1,234`` (``-$120`` below nothing)."""
    return f"-${-amount:,}" if amount < 0 else f"${amount:,}"


def _settlement_text(settlements: list[Settlement]) -> str:
    if not settlements:
        return "no settlement"
    parts = []
    for s in settlements:
        pays = ", ".join(f"position {p} {money(a)}" for p, a in sorted(s.payouts.items()))
        head = f"hand {s.hand}: {s.unique_points} points, {s.result}"
        if s.odds_to_one:
            head += f" {s.odds_to_one} to 1"
        parts.append(head + (f" ({pays})" if pays else ""))
    return "; ".join(parts)


def _points_text(points: list[tuple[int, int]]) -> str:
    return ", ".join(f"{p} as point {n}" for p, n in points) or "no new point"


def _alerts_text(alerts: list[SurveillanceAlert]) -> str:
    return ", ".join(f"at {a.unique_points} points" for a in alerts) or "no alert"


def describe(expected: list[Event], recorded: list[Event]) -> list[tuple[Finding, str]]:
    """What differs between the events the rules give and those the table recorded.

    ``(what, words)`` pairs; ``what`` is settlement, markers, alert or events.
    """
    found: list[tuple[Finding, str]] = []
    es = [e for e in expected if isinstance(e, Settlement)]
    rs = [e for e in recorded if isinstance(e, Settlement)]
    if [_canonical(e.to_dict()) for e in es] != [_canonical(e.to_dict()) for e in rs]:
        found.append(
            (Finding.SETTLEMENT, f"the table settled {_settlement_text(rs)}; "
             f"the rules give {_settlement_text(es)}")
        )  # fmt: skip
    ep = [(e.point, e.ordinal) for e in expected if isinstance(e, NewDifferentPoint)]
    rp = [(e.point, e.ordinal) for e in recorded if isinstance(e, NewDifferentPoint)]
    if ep != rp:
        found.append(
            (
                Finding.MARKERS,
                f"the table marked {_points_text(rp)}; the rules give {_points_text(ep)}",
            )
        )
    ea = [e for e in expected if isinstance(e, SurveillanceAlert)]
    ra = [e for e in recorded if isinstance(e, SurveillanceAlert)]
    if [e.to_dict() for e in ea] != [e.to_dict() for e in ra]:
        found.append(
            (
                Finding.ALERT,
                f"the table raised {_alerts_text(ra)}; the rules give {_alerts_text(ea)}",
            )
        )
    if not found:
        found.append(
            (Finding.EVENTS, "the table recorded "
             + (", ".join(e.name for e in recorded) or "nothing")
             + "; the rules give " + (", ".join(e.name for e in expected) or "nothing"))
        )  # fmt: skip
    return found


@dataclass(frozen=True)
class Discrepancy:
    """The table recorded something the rules do not give (or a record it could not have)."""

    record: int
    hand: int
    what: Finding
    detail: str
    facts: dict[str, Any] | None = None  # figures beside the words (both amounts, ...)


@dataclass(frozen=True)
class AlertRaised:
    """The table's surveillance alert (the 5th different point, by default) for ``hand``."""

    record: int
    hand: int
    at: str
    unique_points: int


@dataclass(frozen=True)
class Confirmed:
    """The table journaled surveillance's confirmation of ``hand``."""

    record: int
    hand: int
    by: str
    command_id: str | None
    at: str = ""  # the record's time: when the table journaled the confirmation


@dataclass(frozen=True)
class ConfirmRefused:
    """The table refused surveillance's ``confirm`` of ``hand`` (the reason in its words)."""

    record: int
    hand: int | None
    reason: str
    command_id: str | None


@dataclass
class Findings:
    """What one or more records gave: differences, alerts, confirmations, hands touched."""

    discrepancies: list[Discrepancy] = field(default_factory=list)
    alerts: list[AlertRaised] = field(default_factory=list)
    confirmations: list[Confirmed] = field(default_factory=list)
    refusals: list[ConfirmRefused] = field(default_factory=list)
    hands: dict[int, dict[str, Any]] = field(default_factory=dict)
    dropped_hands: set[int] = field(default_factory=set)

    def merge(self, other: Findings) -> None:
        self.discrepancies += other.discrepancies
        self.alerts += other.alerts
        self.confirmations += other.confirmations
        self.refusals += other.refusals
        for number in other.dropped_hands:
            self.hands.pop(number, None)
        self.dropped_hands |= other.dropped_hands
        for number, hand in other.hands.items():
            self.hands[number] = hand
            self.dropped_hands.discard(number)
