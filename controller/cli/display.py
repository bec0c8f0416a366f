"""The table drawn in the terminal with rich, from a ``status --json`` object.

Used by ``firebet status`` (drawn once) and ``firebet sim`` (drawn live).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
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
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def money(dollars: int) -> str:
    """``$4,995``: whole dollars with a thousands separator, as a cage writes them."""
    return f"-${-dollars:,}" if dollars < 0 else f"${dollars:,}"


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
            parts.append(f"#{pos} wins {money(won)}")
        else:
            stake = wagers.get(pos)
            parts.append(f"#{pos} lost {money(stake)}" if stake else f"#{pos} lost")
    return ", ".join(parts) or "no wagers"


def unverified_status(status: dict[str, Any]) -> str:
    """A halted table whose figures rest on records past the break: say so, and give the
    last verified figures (``status --json`` ``last_verified``) beside them."""
    at = status.get("break")
    where = f"the break at record {at}" if at is not None else "the break (no record proven)"
    text = (
        f"UNVERIFIED: the hand, wagers, settlements and meters shown rest on records past "
        f"{where}, which the chain does not prove"
    )
    last = status.get("last_verified")
    if not last:
        return text + "; no verified figures to show"
    bets = ", ".join(f"#{p} {money(a)}" for p, a in last["bets"].items()) or "none"
    paid = sum(t.get("amount", 0) for t in last["meters"].get("paid", {}).values())
    return (
        f"{text}; last verified (record {last['record']}): hand {last['hand']}, "
        f"{count(last['unique_points'], 'different point')}, fire bets {bets}, "
        f"{count(last['rolls'], 'roll')}, paid {money(paid)} in all"
    )


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
HELD_SHOWN = 3  # held rolls named on their line; the rest are counted


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


def held_line(held: Sequence[dict[str, Any]], how: str) -> str:
    """``HELD READER ROLLS (3): 1: 4 4, 2: 5 6, 3: 2 1 - how``: at most
    :data:`HELD_SHOWN` named, the rest counted, so the line never grows with the list."""
    named = ", ".join(f"{h['number']}: {h['dice'][0]} {h['dice'][1]}" for h in held[:HELD_SHOWN])
    more = f" and {len(held) - HELD_SHOWN:,} more" if len(held) > HELD_SHOWN else ""
    return f"HELD READER ROLLS ({len(held):,}): {named}{more} - {how}"


def betting_window(status: dict[str, Any]) -> str:
    """Whether fire bets are taken now, in the table's words (never "open" while the
    table cannot take a bet: halted, storage fault)."""
    mode = status.get("mode")
    if mode == "halted":
        return "betting closed: the table is halted"
    if mode == "storage_fault":
        return "betting closed: the journal cannot be written"
    if status.get("surrender_pending"):
        return "betting closed: a surrendered hand is pending"
    return "betting open" if status.get("betting_open") else "betting closed"


def reader_identity(reader: dict[str, Any]) -> str:
    """`` (DR-7, firmware 2.1.0)``: what the reader's last HELLO said; when that HELLO was
    not heard since the service started, ``as of record 812, before this start``: the
    reader may have restarted unheard since, with other firmware."""
    if not reader.get("model") and not reader.get("firmware"):
        return ""
    said = f"{reader.get('model') or '?'}, firmware {reader.get('firmware') or '?'}"
    if reader.get("firmware_seen") == "journal":
        record = reader.get("firmware_record")
        said += f", as of {f'record {record}' if record else 'the journal'}, before this start"
    return f" ({said})"


def reader_answers(reader: dict[str, Any]) -> str:
    """``; stale copies 2, NAKs 1``: copies not applied and NAKs sent, when any."""
    stale = reader.get("copies", {}).get("stale", 0)
    naks = sum(n for reason, n in reader.get("naks", {}).items() if reason != "withheld")
    words = [f"stale copies {stale:,}"] if stale else []
    if naks:
        words.append(f"NAKs {naks:,}")
    return "; " + ", ".join(words) if words else ""


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
