"""Benchmark: rolls per second of the pure rules engine, beside crapssim on the same dice.

    .venv/bin/python bench/engine.py [--rolls 1000000] [--seed 1]

All run the same seeded dice sequence with a $5 fire bet placed for every shooter.
Prints the rolls per second of each way firebet plays them and the ratios:

- as ``firebet replay`` plays a script: the dice as the script's lines (``b"3 4\n"``,
  made inside the clock), runs of them swept by
  ``Engine.sweep`` one hand at a time (the bet for each new shooter goes through
  ``Engine.apply``, as do the rolls the sweep leaves to the full decision);
- as ``journal verify`` plays its records: ``Roll`` commands (made inside the clock),
  runs folded by ``Engine.advance_moves``;
- roll by roll through ``Engine.apply`` (the service's way, one roll at a time).

crapssim's ``fixed_run`` takes the whole sequence too, its player betting for each
shooter. Every firebet way must settle the same hands for the same dollars. Times are CPU
seconds of this process (``time.process_time``), so other jobs on a shared machine do not
skew the ratio. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Iterable

from controller.core.commands import Bet, Roll
from controller.core.engine import Engine
from controller.core.events import Settlement
from controller.core.rolls import DICE_LINES
from controller.core.state import Phase, TableState

LINE_OF = {dice: line for line, dice in DICE_LINES.items() if line.endswith(b"\n")}


def dice_sequence(rolls: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(1, 6), rng.randint(1, 6)) for _ in range(rolls)]


def tally(events: Iterable[object]) -> tuple[int, int]:
    """The hands settled among ``events`` and the dollars their wagers won."""
    paid = [e for e in events if type(e) is Settlement]
    return len(paid), sum(sum(s.payouts.values()) for s in paid)


def run_firebet(dice: list[tuple[int, int]]) -> tuple[float, int, int]:
    engine = Engine()
    apply, new_shooter, wager = engine.apply, Phase.NEW_SHOOTER, Bet(1, 5)
    state = TableState()
    won = hands = 0
    start = time.process_time()
    for d1, d2 in dice:
        if state.phase is new_shooter and state.betting_open and not state.bets:
            state = apply(state, wager).state
        state, events = apply(state, Roll(d1, d2, "sim"))
        if len(events) > 1:  # only a decision adds events to the roll's own
            settled, dollars = tally(events)
            hands, won = hands + settled, won + dollars
    return time.process_time() - start, hands, won


def run_firebet_runs(dice: list[tuple[int, int]]) -> tuple[float, int, int]:
    """The same play, the dice taken as ``journal verify`` takes its records: ``Roll``
    commands (made inside the clock), runs folded by ``Engine.advance_moves``."""
    engine = Engine()
    apply, moves = engine.apply, engine.advance_moves
    new_shooter, wager = Phase.NEW_SHOOTER, Bet(1, 5)
    state = TableState()
    won = hands = 0
    start = time.process_time()
    rolls = [Roll(d1, d2, "sim") for d1, d2 in dice]
    i, count = 0, len(rolls)
    while i < count:
        if state.phase is new_shooter and state.betting_open and not state.bets:
            state = apply(state, wager).state
        state, end = moves(state, rolls, i)
        if end > i:
            i = end
            settled, dollars = tally([state.last_settlement])  # a seven-out ended the run
            hands, won = hands + settled, won + dollars
            continue
        state, events = apply(state, rolls[i])
        i += 1
        if len(events) > 1:  # only a decision adds events to the roll's own
            settled, dollars = tally(events)
            hands, won = hands + settled, won + dollars
    return time.process_time() - start, hands, won


def run_firebet_lines(dice: list[tuple[int, int]]) -> tuple[float, int, int]:
    """The same play, the dice taken as ``firebet replay`` takes a script's roll lines:
    swept one hand at a time (``Engine.sweep``), the bet for each new shooter and the
    rolls the sweep declines through ``Engine.apply``."""
    engine = Engine()
    apply, sweep = engine.apply, engine.sweep
    new_shooter, wager = Phase.NEW_SHOOTER, Bet(1, 5)
    state = TableState()
    won = hands = 0
    start = time.process_time()
    lines = [LINE_OF[d] for d in dice]  # the script's lines, as replay reads them
    i, count = 0, len(lines)
    while i < count:
        if state.phase is new_shooter and state.betting_open and not state.bets:
            state = apply(state, wager).state
        state, end, paid = sweep(state, lines, i, one_hand=True)
        if end > i:
            i = end
            settled, dollars = tally(settlement for _, settlement in paid)
            hands, won = hands + settled, won + dollars
            continue
        d1, d2 = DICE_LINES[lines[i]]
        state, events = apply(state, Roll(d1, d2, "sim"))
        i += 1
        if len(events) > 1:  # only a decision adds events to the roll's own
            settled, dollars = tally(events)
            hands, won = hands + settled, won + dollars
    return time.process_time() - start, hands, won


def run_crapssim(dice: list[tuple[int, int]]) -> float | None:
    try:
        import crapssim  # type: ignore[import-untyped]
        from crapssim.strategy.single_bet import BetFire  # type: ignore[import-untyped]
    except ImportError:
        return None
    table = crapssim.Table(seed=0)
    table.add_player(bankroll=float("inf"), strategy=BetFire(5))
    start = time.process_time()
    table.fixed_run(dice, verbose=False)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rolls", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    dice = dice_sequence(args.rolls, args.seed)
    # the bench's own million dice are not the engines' garbage: without this every full
    # collection walks them (firebet's replay streams its script and holds no such list)
    gc.freeze()
    lines, hands, won = run_firebet_lines(dice)
    runs, *runs_result = run_firebet_runs(dice)
    ours, *by_roll = run_firebet(dice)
    for name, result in (("as verify plays", runs_result), ("roll by roll", by_roll)):
        if result != [hands, won]:
            raise SystemExit(
                f"{name} differs from as replay plays: {result[0]} / {hands} hands, "
                f"${result[1]} / ${won}"
            )
    print(
        f"dice: {args.rolls:,} seeded rolls (seed {args.seed}); {hands:,} fire-bet hands, "
        f"${won:,} won by the $5 wagers"
    )
    print(
        f"firebet replay : {args.rolls / lines:>12,.0f} rolls/s  ({lines:.2f} s CPU) "
        "as replay plays a script's lines"
    )
    print(
        f"firebet verify : {args.rolls / runs:>12,.0f} rolls/s  ({runs:.2f} s CPU) "
        "as journal verify plays Roll commands"
    )
    print(f"firebet apply  : {args.rolls / ours:>12,.0f} rolls/s  ({ours:.2f} s CPU) roll by roll")
    theirs = run_crapssim(dice)
    if theirs is None:
        print("crapssim       : not installed (pip install crapssim) - no comparison")
        return
    print(f"crapssim 0.4   : {args.rolls / theirs:>12,.0f} rolls/s  ({theirs:.2f} s CPU)")
    print(
        f"ratio          : firebet is {theirs / lines:.2f}x the speed of crapssim as replay "
        f"plays ({theirs / runs:.2f}x as verify plays, {theirs / ours:.2f}x roll by roll)"
    )


if __name__ == "__main__":
    main()
