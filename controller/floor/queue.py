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
from controller.floor.vocabulary import AlertKind, AlertStatus, Colour

SHOWN = 100  # items on one page of the queue
# every open 5th-point alert first, each on its own (SPEC: a surveillance alert is never
# hidden by others, docs/floor.md), then the single red ones, floods, the grey ones
RANK_SURVEILLANCE, RANK_RED, RANK_FLOOD, RANK_GREY = 0, 1, 2, 3


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
        if self.alert.kind is AlertKind.SURVEILLANCE:
            return RANK_SURVEILLANCE
        if self.flood:
            return RANK_FLOOD
        return RANK_RED if self.alert.kind.colour is Colour.RED else RANK_GREY

    @property
    def colour(self) -> Colour:
        return self.alert.kind.colour


def _group(g: AlertGroup) -> Item:
    return Item(g.newest, g.count, g.first_record, g.last_record, g.whats)


@dataclass(frozen=True)
class QueuePage:
    """One page of the queue, with the counts of everything open (every alert counted,
    however many: nothing past a page is out of reach or out of the tally)."""

    items: list[Item]
    counts: dict[AlertKind, int]
    total: int  # items on every page
    page: int
    pages: int

    @property
    def open(self) -> int:
        return sum(self.counts.values())


def queue_page(
    store: Store, *, table: str | None = None, page: int = 1, size: int = SHOWN
) -> QueuePage:
    """Page ``page`` (from 1; past the end: the last) of the open items in the order
    surveillance reads them: every open 5th point newest first, then the groups. The
    5th points are paged in the store, so a table raising thousands of them pushes
    none of another's off the queue: each is on some page, and counted."""
    counts = store.open_counts(table=table)
    surveillance = counts.get(AlertKind.SURVEILLANCE, 0)
    groups = [_group(g) for g in store.open_groups()]
    if table is not None:
        groups = [i for i in groups if i.alert.table == table]
    groups.sort(key=lambda i: (i.rank, -i.alert.id))
    total = surveillance + len(groups)
    pages = max(1, -(-total // size))
    page = min(max(page, 1), pages)
    first = (page - 1) * size
    items: list[Item] = []
    if first < surveillance:
        items = [Item(a) for a in store.open_surveillance(limit=size, offset=first, table=table)]
    rest = size - len(items)
    start = max(0, first - surveillance)
    items += groups[start : start + rest]
    return QueuePage(items, counts, total, page, pages)


def queue(store: Store, *, table: str | None = None) -> list[Item]:
    """Every open item, in the order surveillance should read them (``table``: its only)."""
    found = queue_page(store, table=table, size=2**62)
    return found.items


def confirm_problem(alert: Alert, summary: dict[str, Any] | None) -> str | None:
    """Why the table would refuse to confirm ``alert`` now (None: it would take it).

    The table takes a confirmation for any hand whose alert it keeps open, once
    (``controller.core.wagers.confirm``): its ``table_alerts``, as the floor has folded
    the table (:func:`controller.floor.summary.table_summary`).
    """
    if alert.kind is not AlertKind.SURVEILLANCE:
        return "only a surveillance alert is confirmed"
    if alert.status is AlertStatus.CONFIRMED:
        return f"hand {alert.hand} is confirmed already"
    kept = {int(h[0]): h[1] for h in (summary.get("table_alerts") or [])} if summary else {}
    if alert.hand not in kept:
        if not kept:
            return "the table has no surveillance alert to confirm"
        hands = ", ".join(str(h) for h in kept)
        return (
            f"the table keeps the alerts of hands {hands} (the newest {len(kept)}), not "
            f"hand {alert.hand}'s"
        )
    by = kept[alert.hand]
    if by:
        return f"hand {alert.hand} was already confirmed at the table by {by}"
    return None
