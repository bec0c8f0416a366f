"""Benchmark: rolls per second of the pure rules engine, beside crapssim on the same dice.

    .venv/bin/python bench/engine.py [--rolls 1000000] [--seed 1]

Both run the same seeded dice sequence with a $5 fire bet riding on every shooter.
Prints the rolls per second of each and the ratio: for firebet played the way
``firebet replay`` and ``journal verify`` play commands (each run of rolls that only move
the hand, and the seven-out that ends it, folded at once by ``Engine.advance_moves``,
every other roll through ``Engine.apply``), and roll by roll through ``Engine.apply``
(the service's way, one roll at a time). crapssim's ``fixed_run`` takes the whole
sequence too. Both firebet ways must settle the same hands for the same dollars. Times
are CPU seconds of this process (``time.process_time``), so other jobs on a shared
machine do not skew the ratio. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import random
import time

from controller.core.commands import Bet, Roll
from controller.core.engine import Engine
from controller.core.events import Settlement
from controller.core.state import Phase, TableState


def dice_sequence(rolls: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(1, 6), rng.randint(1, 6)) for _ in range(rolls)]


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
            for event in events:
                if type(event) is Settlement:
                    hands += 1
                    won += sum(event.payouts.values())
    return time.process_time() - start, hands, won


def run_firebet_runs(
    dice: list[tuple[int, int]], *, prebuilt: bool = False
) -> tuple[float, int, int]:
    """The same play, the dice taken as ``firebet replay`` takes a script's rolls. With
    ``prebuilt`` the ``Roll`` commands are made before the clock starts, as crapssim is
    handed its list of dice: the rules alone are timed."""
    engine = Engine()
    apply, moves = engine.apply, engine.advance_moves
    new_shooter, wager = Phase.NEW_SHOOTER, Bet(1, 5)
    state = TableState()
    won = hands = 0
    if prebuilt:
        rolls = [Roll(d1, d2, "sim") for d1, d2 in dice]
    start = time.process_time()
    if not prebuilt:
        rolls = [Roll(d1, d2, "sim") for d1, d2 in dice]
    i, count = 0, len(rolls)
    while i < count:
        if state.phase is new_shooter and state.betting_open and not state.bets:
            state = apply(state, wager).state
        state, end = moves(state, rolls, i)
        if end > i:
            i = end
            paid = state.last_settlement  # a run ended by a seven-out: its settlement
            if paid is not None:
                hands += 1
                won += sum(paid.payouts.values())
            continue
        state, events = apply(state, rolls[i])
        i += 1
        if len(events) > 1:
            for event in events:
                if type(event) is Settlement:
                    hands += 1
                    won += sum(event.payouts.values())
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
    runs, hands, won = run_firebet_runs(dice)
    rules_only, *_ = run_firebet_runs(dice, prebuilt=True)
    ours, by_roll_hands, by_roll_won = run_firebet(dice)
    if (hands, won) != (by_roll_hands, by_roll_won):
        raise SystemExit(
            f"the two ways differ: {hands} / {by_roll_hands} hands, ${won} / ${by_roll_won}"
        )
    print(
        f"dice: {args.rolls:,} seeded rolls (seed {args.seed}); {hands:,} fire-bet hands, "
        f"${won:,} won by the $5 wagers"
    )
    print(
        f"firebet engine : {args.rolls / runs:>12,.0f} rolls/s  ({runs:.2f} s CPU) as replay plays"
    )
    print(
        f"firebet rules  : {args.rolls / rules_only:>12,.0f} rolls/s  ({rules_only:.2f} s CPU) "
        "as replay plays, the Roll commands made before the clock (crapssim's dice are too)"
    )
    print(f"firebet apply  : {args.rolls / ours:>12,.0f} rolls/s  ({ours:.2f} s CPU) roll by roll")
    theirs = run_crapssim(dice)
    if theirs is None:
        print("crapssim       : not installed (pip install crapssim) - no comparison")
        return
    print(f"crapssim 0.4   : {args.rolls / theirs:>12,.0f} rolls/s  ({theirs:.2f} s CPU)")
    print(
        f"ratio          : firebet is {theirs / runs:.2f}x the speed of crapssim "
        f"({theirs / rules_only:.2f}x the rules alone, {theirs / ours:.2f}x roll by roll)"
    )


if __name__ == "__main__":
    main()
