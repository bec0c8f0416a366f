"""The table's words as plain text: counts, money, a hand, a settlement's payouts, the
reader's identity, held rolls, the betting window.

Every command that prints the table's figures uses them (``replay``, ``journal``,
``doctor``, the dealer's commands); only drawing the table needs rich
(:mod:`controller.cli.display`), so a command that prints words never loads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


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


HELD_SHOWN = 3  # held rolls named on their line; the rest are counted


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
