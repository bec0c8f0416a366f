"""The floor as the console draws it: where each table stands, and each table's tile.

A table stands where ``[tables.<id>] position = [row, col]`` in ``floor.toml`` puts it;
the tables without a position fill the free places row by row after them, in the order
of their names, on a grid about 3 columns to 2 rows (a wall screen's shape). A tile is
the table's layout in small: the six point numbers with the markers lit and their
ordinals, the point, the wagers riding, the mode and its alert as a colour and words.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from controller.floor.findings import money
from controller.floor.vocabulary import AlertKind, AlertStatus

POINT_NUMBERS = (4, 5, 6, 8, 9, 10)


@dataclass(frozen=True)
class FloorMap:
    """Rows and columns of the floor map, and where each table stands (row, col from 1)."""

    rows: int
    cols: int
    spots: dict[str, tuple[int, int]]


def place(tables: Iterable[str], positions: Mapping[str, tuple[int, int]]) -> FloorMap:
    """Where each of ``tables`` stands: its configured position, else the next free place."""
    names = sorted(tables)
    spots = {t: positions[t] for t in names if t in positions}
    rest = [t for t in names if t not in spots]
    cols = max([c for _, c in spots.values()] + [math.ceil(math.sqrt(len(names) * 1.5)) or 1])
    taken = set(spots.values())
    spot = 0
    for name in rest:
        while (spot // cols + 1, spot % cols + 1) in taken:
            spot += 1
        spots[name] = (spot // cols + 1, spot % cols + 1)
        spot += 1
    rows = max([r for r, _ in spots.values()] + [1])
    return FloorMap(rows, cols, spots)


def boxes(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The six point numbers of a table's layout: lit (with the marker's ordinal) or not,
    and which one is the point."""
    made = list(summary.get("points") or [])
    return [
        {
            "number": n,
            "lit": n in made,
            "ordinal": made.index(n) + 1 if n in made else None,
            "point": summary.get("point") == n,
        }
        for n in POINT_NUMBERS
    ]


def tile_alert(summary: Mapping[str, Any], zone: tzinfo | None = None) -> tuple[str, str]:
    """The tile's colour (red, yellow, grey, blue, green or ok) and its words (a
    confirmation's time in ``zone``, the floor's)."""
    alerts: Mapping[str, int] = summary.get("alerts") or {}
    if alerts.get(AlertKind.INTEGRITY):
        return AlertKind.INTEGRITY.colour, f"{AlertKind.INTEGRITY.words}: see the alert"
    if alerts.get(AlertKind.AUDIT):
        n = alerts[AlertKind.AUDIT]
        return AlertKind.AUDIT.colour, f"{AlertKind.AUDIT.words}: {n} alert{'s' if n != 1 else ''}"
    if alerts.get(AlertKind.SURVEILLANCE):
        return surveillance_words(summary, alerts[AlertKind.SURVEILLANCE])
    if summary.get("quarantined"):
        return "red", "quarantined: it keeps sending bad messages"
    if summary.get("online") is False:
        return "grey", "OFFLINE"
    if summary.get("missing"):
        first, last = summary["missing"]
        span = f"{first}" if first == last else f"{first}–{last}"
        asked = summary.get("resend_from")
        return "blue", f"records {span} missing" + (f": asked again from {asked}" if asked else "")
    surveillance = summary.get("surveillance")
    if surveillance and surveillance.get("status") == AlertStatus.CONFIRMED:
        at = clock(surveillance.get("at"), zone)  # when the table journaled it
        by = f"hand {summary.get('hand')} confirmed by {surveillance.get('by')}"
        return "green", by + (f" at {at}" if at else "")
    return "ok", ""


def surveillance_words(summary: Mapping[str, Any], count: int) -> tuple[str, str]:
    """A tile's open 5th points: yellow while one waits for surveillance, the confirmed
    look (green) at once when every one is confirmed and only the table's record of it
    is awaited."""
    shown = summary.get("waiting") or []
    waiting = [w for w in shown if w.get("status") != AlertStatus.SENT]
    more = f" (+{count - 1} more)" if count > 1 else ""
    if shown and not waiting:
        hands = ", ".join(str(w.get("hand")) for w in shown)
        return "green", f"hand {hands} confirmed: the table is recording it" + more
    hand = waiting[0].get("hand") if waiting else summary.get("alert_hand")
    return AlertKind.SURVEILLANCE.colour, f"5th point: hand {hand}" + more


def wagers_words(summary: Mapping[str, Any]) -> str:
    """``$15 on 3 positions`` or ``no fire bets``."""
    n = int(summary.get("positions") or 0)
    if not n:
        return "no fire bets"
    return f"{money(int(summary.get('wagers') or 0))} on {n} position{'s' if n != 1 else ''}"


def clock(value: str | None, zone: tzinfo | None, today: datetime | None = None) -> str:
    """An ISO time in the floor's time zone, to the second: ``14:03:07`` today, else
    ``2026-12-01 14:03:07``; an empty string for none, the text itself when unreadable."""
    if not value:
        return ""
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return value
    local = when.astimezone(zone)
    now = (today or datetime.now(local.tzinfo)).astimezone(local.tzinfo)
    if local.date() == now.date():
        return local.strftime("%H:%M:%S")
    return local.strftime("%Y-%m-%d %H:%M:%S")


ROLL_SOURCES = {"reader": "dice reader", "manual": "dealer (by hand)", "sim": "simulator"}


def timeline(hand: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A hand's rolls and actions in record order: ``{"at", "who", "what", ...}`` rows,
    ``what`` being ``roll`` (with ``dice``) or the action's name. A roll the dealer
    entered by hand is one row, with the dealer's name."""
    by_hand = {a["record"]: a for a in hand.get("actions", []) if a.get("action") == "manual_roll"}
    rows: list[tuple[int, int, dict[str, Any]]] = []
    for roll in hand.get("roll_log", []):
        manual = by_hand.get(roll.get("record"))
        who = (
            manual.get("actor")
            if manual
            else ROLL_SOURCES.get(roll.get("source"), roll.get("source"))
        )
        rows.append(
            (roll.get("record", 0), 0,
             {"what": "roll", "at": roll.get("at"), "who": who or "", "dice": roll.get("dice"),
              "manual": manual is not None, "record": roll.get("record")})
        )  # fmt: skip
    for n, act in enumerate(hand.get("actions", [])):
        if act.get("action") == "manual_roll":
            continue
        rows.append(
            (act.get("record", 0), 1 + n,
             {**act, "what": act.get("action"), "who": act.get("actor", "")})
        )  # fmt: skip
    return [r for _, _, r in sorted(rows, key=lambda x: (x[0], x[1]))]
