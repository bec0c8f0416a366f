"""One table as the floor console shows it, and what a wager would be paid.

Read on the ingest thread after each change; the console reads the result
(:attr:`controller.floor.ingest.Ingest.summaries`).
"""

from __future__ import annotations

from typing import Any

from controller.floor.findings import money
from controller.floor.live import TableLive
from controller.floor.store import Store

TILE_ALERTS = 3
"""A table's newest open 5th-point alerts its tile shows (the rest: on its page)."""


def pays_at(pays: dict[str, int], wagers: dict[str, int]) -> dict[str, dict[str, int]]:
    """What each wager would be paid at 4, 5 and 6 different points."""
    table = {int(k): v for k, v in pays.items()}
    out: dict[str, dict[str, int]] = {}
    for points in (4, 5, 6):
        odds = 0
        for tier, value in sorted(table.items()):
            if points >= tier:
                odds = value
        out[str(points)] = {pos: amount * odds for pos, amount in wagers.items()}
    return out


def table_summary(store: Store, live: TableLive) -> dict[str, Any]:
    """One table as the console shows it: the hand in play, its alerts, its records."""
    table = live.row.table
    state = live.audit.state
    status = live.row.state or {}
    open_alerts, surveillance = store.table_alerts(table, state.hand)
    waiting = [
        {"id": a.id, "hand": a.hand, "status": a.status, "raised_at": a.raised_at}
        for a in store.open_surveillance(table=table, limit=TILE_ALERTS)
    ]
    missing = live.missing
    kept = state.alerts()
    confirmed = store.confirmed_at(
        table, [h for h, by in kept if by is not None] + ([state.hand] if surveillance else [])
    )
    newest = None  # the newest alert of the hand in play: its status, by whom, when confirmed
    if surveillance is not None:
        when = confirmed.get(surveillance.hand) if surveillance.hand is not None else None
        newest = {"status": surveillance.status, "by": surveillance.status_by, "at": when}
    return {
        "table": table,
        "online": live.row.online,
        "mode": status.get("mode") if isinstance(status.get("mode"), str) else None,
        "phase": state.phase.value,
        "point": state.point,
        "hand": state.hand,
        "points": list(state.points),
        "wagers": sum(state.bets.values()),
        "wagers_text": money(sum(state.bets.values())) if state.bets else "",
        "positions": len(state.bets),
        "surveillance_alert": state.surveillance_alert,
        "alert_hand": state.alert_hand,  # the table's newest alert
        "confirmed_by": state.confirmed_by,
        # every hand whose alert the table keeps (it takes a confirm for each open one),
        # oldest first, with who confirmed it (None: open) and when (the table's record)
        "table_alerts": [[hand, by, confirmed.get(hand)] for hand, by in kept],
        "surveillance": newest,
        "alerts": open_alerts,
        "waiting": waiting,  # its newest open 5th points (the tile's, with their Confirm)
        "record": live.row.contiguous,
        "head": live.head,
        "missing": list(missing) if missing else None,
        "resend_from": live.resend_from if missing else None,
        "resends": live.resends,
        "checked_hand": live.audit.checked_hand,
        "folded_hand": live.audit.folded_hand,
        "unchecked_hands": list(live.audit.unchecked_hands),
        "unchecked_records": live.audit.unchecked_records,
        "checked_record": live.audit.record,
        "rules_record": live.audit.rules_record,
        "program": live.row.program,
        "bad": live.row.bad,
        "last_bad": live.row.last_bad,
        "quarantined": live.row.quarantined,
    }
