"""The table drawn in the terminal with rich, from a ``status --json`` object.

Used by ``firebet status`` (drawn once) and ``firebet sim`` (drawn live).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from controller.core.config.model import POINT_NUMBERS

MODE_STYLE = {
    "running": "bold green",
    "reader_fault": "bold yellow",
    "diagnostics": "bold cyan",
    "halted": "bold white on red",
    "storage_fault": "bold white on magenta",
}


def count(n: int, noun: str) -> str:
    """``1 different point``, ``2 different points``: a number with its noun agreeing."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def hand_line(
    hand: int, unique_points: int, points: Iterable[int], result: str | None, odds_to_one: int
) -> str:
    """``hand 7: 3 different points (4, 5, 9) - WIN 24 to 1`` (or ``lose``, or ``in play``
    while ``result`` is None): one hand as ``replay``, ``history`` and the table show it."""
    made = ", ".join(map(str, points)) or "none"
    if result is None:
        verdict = "in play"
    elif result == "win":
        verdict = f"WIN {odds_to_one} to 1"
    else:
        verdict = "lose"
    return f"hand {hand}: {count(unique_points, 'different point')} ({made}) - {verdict}"


def paid_line(settlement: dict[str, Any]) -> str:
    """Each wager of a settlement: ``#3 wins $120, #5 lost $2`` (``no wagers`` without)."""
    wagers: dict[str, int] = settlement.get("wagers", {})
    parts = []
    for pos, won in settlement["payouts"].items():
        if won:
            parts.append(f"#{pos} wins ${won}")
        else:
            stake = wagers.get(pos)
            parts.append(f"#{pos} lost ${stake}" if stake else f"#{pos} lost")
    return ", ".join(parts) or "no wagers"


def _marker(point: int, status: dict[str, Any]) -> RenderableType:
    marker = status.get("markers", {}).get(str(point), {})
    ordinal = marker.get("ordinal")
    puck = status.get("point") == point
    lines = Text(justify="center")
    lines.append(f"{point}\n", style="bold")
    if marker.get("lit") and ordinal:
        lines.append(f" ● {ordinal} ", style="bold black on yellow")
    else:
        lines.append("  ·  ", style="dim")
    lines.append("\n")
    lines.append(" ON " if puck else "    ", style="bold white on black" if puck else "")
    border = "yellow" if marker.get("lit") else "grey37"
    return Panel(lines, border_style=border, width=9, padding=0)


def render_markers(status: dict[str, Any]) -> RenderableType:
    """The six point boxes of the layout: lit markers with ordinals, the point puck."""
    row = Table.grid(padding=(0, 1))
    for _ in POINT_NUMBERS:
        row.add_column()
    row.add_row(*(_marker(p, status) for p in POINT_NUMBERS))
    return row


def render_status(
    status: dict[str, Any],
    recent_rolls: Sequence[Sequence[int]] = (),
    settlements: Sequence[dict[str, Any]] = (),
    footer: str = "",
) -> RenderableType:
    """The whole table: mode, hand, markers, wagers, rolls, settlements, reader, meters."""
    mode = str(status.get("mode", "?"))
    head = Text()
    head.append(f"table {status.get('table', '?')} ", style="bold")
    head.append(f" {mode.replace('_', ' ').upper()} ", style=MODE_STYLE.get(mode, "bold"))
    phase = str(status.get("phase", "?")).replace("_", " ")
    where = f"point {status['point']}" if status.get("point") else phase
    head.append(
        f"  hand {status.get('hand')}  shooter {status.get('shooter')}  {where}  "
        f"{count(status.get('unique_points', 0), 'different point')}"
    )
    parts: list[RenderableType] = [head]
    if status.get("halted"):
        parts.append(Text(f"HALTED: {status['halted']}", style="bold white on red"))
    if status.get("storage_fault"):
        parts.append(
            Text(f"JOURNAL CANNOT BE WRITTEN: {status['storage_fault']}", style="bold red")
        )
    held = status.get("held_rolls") or []
    if held:
        listed = ", ".join(f"{h['number']}: {h['dice'][0]} {h['dice'][1]}" for h in held)
        parts.append(
            Text(
                f"HELD READER ROLLS (firebet held apply N / discard N): {listed}",
                style="bold yellow",
            )
        )
    confirmed = status.get("surveillance_confirmed")
    if status.get("surveillance_alert") and confirmed:
        parts.append(
            Text(
                f" SURVEILLANCE: hand {confirmed['hand']} confirmed by {confirmed['by']} (ack) ",
                style="bold black on yellow",
            )
        )
    elif status.get("surveillance_alert"):
        parts.append(
            Text(
                " SURVEILLANCE: 5 different points - confirm fire bets and payouts (ack) ",
                style="bold white on red",
            )
        )
    floor = status.get("floor") or {}
    if floor.get("enabled"):
        link = "connected" if floor.get("connected") else "NOT CONNECTED"
        error = f" - {floor['last_error']}" if floor.get("last_error") else ""
        parts.append(
            Text(
                f"floor {floor.get('broker')}: {link}, cursor {floor.get('cursor')}, "
                f"backlog {floor.get('backlog')}{error}",
                style="" if floor.get("connected") else "yellow",
            )
        )
    parts.append(render_markers(status))

    bets = status.get("bets", {})
    window = "betting open" if status.get("betting_open") else "betting closed"
    if status.get("surrender_pending"):
        window = "betting closed: a surrendered hand is pending"
    wagers = "  ".join(f"#{p}: ${a}" for p, a in bets.items()) or "none"
    parts.append(Text(f"fire bets: {wagers} ({window})"))
    last = status.get("last_roll")
    rolls = [f"{a}+{b}={a + b}" for a, b in recent_rolls] or (
        [f"{last[0]}+{last[1]}={last[0] + last[1]}"] if last else []
    )
    rolled = count(status.get("rolls", 0), "roll")
    parts.append(Text(f"{rolled}; last: " + ("  ".join(rolls[-10:]) or "none")))

    shown = list(settlements[-3:]) or (
        [status["last_settlement"]] if status.get("last_settlement") else []
    )
    for s in shown:
        hand = hand_line(
            s["hand"], s["unique_points"], s["points"], s["result"], s.get("odds_to_one", 0)
        )
        parts.append(
            Text(
                f"settled {hand} - {paid_line(s)}",
                style="green" if s["result"] == "win" else "",
            )
        )

    reader = status.get("reader", {})
    counters = reader.get("counters", {})
    bad = sum(v for k, v in counters.items() if k != "ok")
    health = "connected" if reader.get("connected") else "NOT connected"
    fault = f", fault {reader['fault']}" if reader.get("fault") else ""
    parts.append(
        Text(
            f"reader {reader.get('port', '')}: {health}{fault}; frames ok {counters.get('ok', 0)},"
            f" bad {bad}",
            style="yellow" if reader.get("fault") else "dim",
        )
    )
    meters = status.get("meters", {})
    if meters:
        taken = meters.get("bets_taken", {})
        paid = sum(t.get("amount", 0) for t in meters.get("paid", {}).values())
        parts.append(
            Text(
                f"meters: hands {meters.get('hands')}, rolls {meters.get('rolls')}, "
                f"fire bets {taken.get('count', 0)} (${taken.get('amount', 0)}), paid ${paid}, "
                f"voids {meters.get('voids')}, surrenders {meters.get('surrenders')}, "
                f"faults {meters.get('faults')}",
                style="dim",
            )
        )
    if footer:
        parts.append(Text(footer, style="dim"))
    return Panel(Group(*parts), title="firebet", border_style=MODE_STYLE.get(mode, "white"))
