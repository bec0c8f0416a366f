"""The alert queue as surveillance reads it: most severe first, newest first, floods grouped.

Red (integrity: a history rewritten; audit: the second opinion differs or could not
check) above yellow (a surveillance alert: the 5th different point) above grey
(offline). Every open surveillance alert is its own item; the other kinds are grouped per
table and kind, so a flood (250 unreadable records from one table) is one item with its
count and never pushes another table's surveillance alert off the queue. A flood sorts
after the surveillance alerts; a single red alert before them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controller.floor.store import Alert, AlertGroup, Store

SHOWN = 100  # items on one page of the queue
# every open 5th-point alert first, each on its own (SPEC: a surveillance alert is never
# hidden by others, docs/floor.md), then the single red ones, floods, the grey ones
RANK_SURVEILLANCE, RANK_RED, RANK_FLOOD, RANK_GREY = 0, 1, 2, 3
RED = ("integrity", "audit", "quarantine")

KIND_WORDS = {
    "integrity": "history rewritten",
    "audit": "payout check",
    "surveillance": "5th point",
    "offline": "table offline",
    "quarantine": "table quarantined",
}
"""What each kind of alert is, in the words of the floor."""

WHAT_WORDS = {
    "unreadable": "unreadable record",
    "unchecked": "record not checked",
    "settlement": "payout differs",
    "markers": "markers differ",
    "alert": "5th-point alert differs",
    "rules": "rules changed",
    "events": "decision differs",
}
"""What an audit alert found, in the words of the floor."""


@dataclass(frozen=True)
class Item:
    """One line of the queue: an alert, or a flood of one kind at one table."""

    alert: Alert  # the newest
    count: int = 1
    first_record: int | None = None
    last_record: int | None = None
    whats: dict[str, int] = field(default_factory=dict)

    @property
    def flood(self) -> bool:
        return self.count > 1

    @property
    def rank(self) -> int:
        if self.alert.kind == "surveillance":
            return RANK_SURVEILLANCE
        if self.flood:
            return RANK_FLOOD
        return RANK_RED if self.alert.kind in RED else RANK_GREY

    @property
    def colour(self) -> str:
        """red, yellow or grey."""
        kind = self.alert.kind
        return "red" if kind in RED else "yellow" if kind == "surveillance" else "grey"


def _group(g: AlertGroup) -> Item:
    return Item(g.newest, g.count, g.first_record, g.last_record, g.whats)


def queue(store: Store, *, table: str | None = None) -> list[Item]:
    """Every open item, in the order surveillance should read them (``table``: its only)."""
    items = [Item(a) for a in store.open_surveillance()]
    items += [_group(g) for g in store.open_groups()]
    if table is not None:
        items = [i for i in items if i.alert.table == table]
    return sorted(items, key=lambda i: (i.rank, -i.alert.id))


def counts(items: list[Item]) -> dict[str, int]:
    """Open alerts by kind (a flood counts every alert in it)."""
    out: dict[str, int] = {}
    for i in items:
        out[i.alert.kind] = out.get(i.alert.kind, 0) + i.count
    return out


def confirm_problem(alert: Alert, summary: dict[str, Any] | None) -> str | None:
    """Why the table would refuse to confirm ``alert`` now (None: it would take it).

    The table takes a confirmation only for the hand of its newest alert, once
    (``controller.core.wagers.confirm``); ``summary`` is the table as the floor has
    folded it (:func:`controller.floor.summary.table_summary`).
    """
    if alert.kind != "surveillance":
        return "only a surveillance alert is confirmed"
    if alert.status == "confirmed":
        return f"hand {alert.hand} is confirmed already"
    alert_hand = summary.get("alert_hand") if summary else None
    if alert_hand != alert.hand:
        if alert_hand is None:
            return "the table has no surveillance alert to confirm"
        return (
            f"the table's alert is now for hand {alert_hand}: the table takes a "
            "confirmation only for its newest alert"
        )
    by = summary.get("confirmed_by") if summary else None
    if by:
        return f"hand {alert.hand} was already confirmed at the table by {by}"
    return None
