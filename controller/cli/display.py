"""The table drawn in the terminal with rich, from a ``status --json`` object.

Used by ``firebet status`` (drawn once) and ``firebet sim`` (drawn live); the words it
draws with are :mod:`controller.cli.wording`'s, which need no rich.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from controller.cli.wording import (
    betting_window,
    count,
    hand_line,
    held_line,
    money,
    paid_line,
    reader_answers,
    reader_identity,
    unverified_status,
)
from controller.core.config.model import POINT_NUMBERS

MODE_STYLE = {
    "running": "bold green",
    "reader_fault": "bold yellow",
    "diagnostics": "bold cyan",
    "halted": "bold white on red",
    "storage_fault": "bold white on magenta",
}


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


LEGEND = "markers: ● N = the Nth different point made this hand; ON = the point"


def _header(status: dict[str, Any]) -> Text:
    """One line, short enough for 80 columns in every mode: mode, hand, shooter, point."""
    mode = str(status.get("mode", "?"))
    head = Text()
    head.append(f" {mode.replace('_', ' ').upper()} ", style=MODE_STYLE.get(mode, "bold"))
    phase = str(status.get("phase", "?")).replace("_", " ")
    where = f"point {status['point']}" if status.get("point") else phase
    head.append(
        f"  hand {status.get('hand')}  shooter {status.get('shooter')}  {where}  "
        f"{count(status.get('unique_points', 0), 'different point')}"
    )
    return head


def render_status(
    status: dict[str, Any],
    recent_rolls: Sequence[Sequence[int]] = (),
    settlements: Sequence[dict[str, Any]] = (),
    footer: str = "",
    *,
    held_how: str = "firebet held",
    height: int | None = None,
    width: int = 80,
) -> RenderableType:
    """The whole table: mode, hand, markers, wagers, rolls, settlements, reader, meters.

    ``height``: the terminal's rows; the table is kept within them (and ``width``) by
    leaving out, in this order, the older settlements, the meters, the legend and the
    last settlement, so the border and the footer always show."""
    mode = str(status.get("mode", "?"))
    parts: list[RenderableType] = [_header(status)]
    if status.get("halted"):
        parts.append(Text(f"HALTED: {status['halted']}", style="bold white on red"))
    if status.get("verified") is False:
        parts.append(Text(unverified_status(status), style="bold red"))
    if status.get("storage_fault"):
        parts.append(
            Text(f"JOURNAL CANNOT BE WRITTEN: {status['storage_fault']}", style="bold red")
        )
    pending = status.get("correction_pending")
    if pending:
        parts.append(
            Text(
                f"CORRECTION PENDING: the roll read as {pending[0]} {pending[1]} was voided - "
                "give the dice as they lie: firebet correct D1 D2",
                style="bold yellow",
            )
        )
    held = status.get("held_rolls") or []
    if held:
        parts.append(Text(held_line(held, held_how), style="bold yellow"))
    confirmed = status.get("surveillance_confirmed")
    waiting = [
        a.get("hand") for a in status.get("surveillance_alerts") or [] if not a.get("confirmed_by")
    ]
    if status.get("surveillance_alert") and confirmed and not waiting:
        parts.append(
            Text(
                f" SURVEILLANCE: hand {confirmed['hand']} confirmed by {confirmed['by']} (ack) ",
                style="bold black on yellow",
            )
        )
    elif status.get("surveillance_alert"):
        parts.append(
            Text(
                " SURVEILLANCE: 5 different points - confirm fire bets and payouts"
                + (f" of hands {', '.join(map(str, waiting))}" if len(waiting) > 1 else "")
                + " (ack) ",
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
    legend = Text(LEGEND, style="dim")
    parts.append(legend)

    bets = status.get("bets", {})
    wagers = "  ".join(f"#{p}: {money(a)}" for p, a in bets.items()) or "none"
    unproven = "UNVERIFIED " if status.get("verified") is False else ""
    parts.append(Text(f"{unproven}fire bets: {wagers} ({betting_window(status)})"))
    last = status.get("last_roll")
    rolls = [f"{a}+{b}={a + b}" for a, b in recent_rolls] or (
        [f"{last[0]}+{last[1]}={last[0] + last[1]}"] if last else []
    )
    rolled = count(status.get("rolls", 0), "roll")
    parts.append(Text(f"{rolled}; last: " + ("  ".join(rolls[-8:]) or "none")))

    shown = list(settlements[-3:]) or (
        [status["last_settlement"]] if status.get("last_settlement") else []
    )
    settled: list[Text] = []
    for s in shown:
        hand = hand_line(
            s["hand"], s["unique_points"], s["points"], s["result"], s.get("odds_to_one", 0)
        )
        settled.append(
            Text(
                f"settled {hand} - {paid_line(s)}",
                style="green" if s["result"] == "win" else "",
            )
        )
    parts.extend(settled)

    reader = status.get("reader", {})
    counters = reader.get("counters", {})
    bad = sum(v for k, v in counters.items() if k != "ok")
    health = "connected" if reader.get("connected") else "NOT connected"
    fault = f", fault {reader['fault']}" if reader.get("fault") else ""
    parts.append(
        Text(
            f"reader {reader.get('port', '')}{reader_identity(reader)}: {health}{fault}; "
            f"frames ok {counters.get('ok', 0):,}, bad {bad:,}{reader_answers(reader)}",
            style="yellow" if reader.get("fault") else "dim",
        )
    )
    meters = status.get("meters", {})
    metered: Text | None = None
    if meters:
        taken = meters.get("bets_taken", {})
        paid = sum(t.get("amount", 0) for t in meters.get("paid", {}).values())
        metered = Text(
            f"meters: {count(meters.get('hands', 0), 'hand')}, "
            f"{count(meters.get('rolls', 0), 'roll')}, "
            f"{count(taken.get('count', 0), 'bet')} {money(taken.get('amount', 0))}, "
            f"paid {money(paid)}; {count(meters.get('voids', 0), 'void')}, "
            f"{count(meters.get('surrenders', 0), 'surrender')}, "
            f"{count(meters.get('faults', 0), 'fault')}",
            style="dim",
        )
        parts.append(metered)
    if footer:
        parts.append(Text(footer, style="dim"))
    title = f"firebet {status['table']}" if status.get("table") else "firebet"
    border = MODE_STYLE.get(mode, "white")
    if height is not None:
        # what may go, first to last, while the table is taller than the terminal
        optional: list[RenderableType] = [*settled[:-1], *([metered] if metered else [])]
        optional += [legend, *settled[-1:]]
        while optional and _rows(Panel(Group(*parts), title=title), width) > height:
            gone = optional.pop(0)
            parts = [p for p in parts if p is not gone]
    return Panel(Group(*parts), title=title, border_style=border)


def _rows(renderable: RenderableType, width: int) -> int:
    """How many rows ``renderable`` takes at ``width`` columns."""
    console = Console(width=width, color_system=None, file=io.StringIO())
    return len(console.render_lines(renderable, console.options, pad=False))
