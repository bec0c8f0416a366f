"""``firebet odds``: the exact odds and house edge of the configured pay table.

The number of different points a shooter makes before the seven-out is a
Markov chain over the set of points already made. From a come-out roll a point
p is established with probability ways(p)/24 among the rolls that decide
anything; then p is made before a 7 with probability ways(p)/(ways(p)+6).
Everything is computed with fractions, so the figures are exact.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from functools import cache
from operator import add
from typing import Any

from controller.core.commands import Roll
from controller.core.config.model import POINT_NUMBERS, FireBetRules
from controller.core.engine import Engine
from controller.core.events import Settlement
from controller.core.state import TableState

WAYS: dict[int, int] = {
    t: 6 - abs(t - 7) for t in range(2, 13)
}  # ways to roll each total of two dice


@cache
def _distribution(made: frozenset[int]) -> tuple[Fraction, ...]:
    """Distribution of the final count of different points, given the points ``made``.

    Making a point already made leaves the chain where it is, so those loops are
    summed geometrically: f(S) = (seven-outs + sum over new p of f(S+p)) / (1 - repeats).
    """
    result = [Fraction(0)] * 7
    deciding = sum(WAYS[p] for p in POINT_NUMBERS)  # 24: only point numbers end a come-out
    repeat = Fraction(0)
    for p in POINT_NUMBERS:
        establish = Fraction(WAYS[p], deciding)
        make = Fraction(WAYS[p], WAYS[p] + WAYS[7])
        result[len(made)] += establish * (1 - make)  # seven-out on this point
        if p in made:
            repeat += establish * make
            continue
        after = _distribution(made | {p})
        for k in range(7):
            result[k] += establish * make * after[k]
    return tuple(x / (1 - repeat) for x in result)


def exact_distribution() -> list[Fraction]:
    """P(exactly k different points before the seven-out), k = 0..6, as exact fractions."""
    return list(_distribution(frozenset()))


def payoffs(rules: FireBetRules) -> list[int]:
    """What a $1 wager nets with k = 0..6 different points: the odds to 1, or -1 lost."""
    return [rules.odds_for(k)[1] or -1 for k in range(7)]


def house_edge(rules: FireBetRules, p: list[Fraction] | None = None) -> Fraction:
    """The house's expected win per dollar wagered under the rules' pay table."""
    probs = p if p is not None else exact_distribution()
    return -sum((q * net for q, net in zip(probs, payoffs(rules), strict=True)), Fraction(0))


def faces(seed: int, chunk: int = 1 << 16) -> Iterator[bytes]:
    """The faces ``random.Random(seed).randint(1, 6)`` shows, call after call, in chunks.

    ``randint(1, 6)`` takes the top three bits of one 32-bit Mersenne Twister output and
    draws again while they read 6 or 7. ``getrandbits(32 * n)`` hands out n outputs at
    once (the first in the lowest bits), so the faces are the top three bits of every
    fourth byte, the draws of 6 and 7 deleted: the same faces, found in C, not in a
    Python loop (the tests hold this against ``randint``).
    """
    rng = random.Random(seed)
    redraw = bytes(range(0xC0, 0x100))  # top three bits 110 or 111: randint draws again
    face = bytes((b >> 5) + 1 if b < 0xC0 else 0 for b in range(256))
    while True:
        words = rng.getrandbits(32 * chunk).to_bytes(4 * chunk, "little")
        yield words[3::4].translate(face, redraw)


def _walk(rules: FireBetRules) -> list[int]:
    """The hand as the engine plays it, as a table: (state * 13 + total) -> next state * 13.

    A state is what decides the count of different points: the phase, the point and
    the set of points made. Every state and total is put to the real engine once; a
    seven-out's entry is ``~different points`` (negative), and the walk starts again at 0.
    """
    engine = Engine(rules)
    dice = {t: (max(1, t - 6), t - max(1, t - 6)) for t in range(2, 13)}

    def key(s: TableState) -> tuple[object, ...]:
        return (s.phase, s.point, frozenset(s.points))

    start = TableState()
    index = {key(start): 0}
    states = [start]
    table: list[int] = []
    for state in states:  # grows while it is walked: every reachable state once
        row = [0] * 13
        for total, (d1, d2) in dice.items():
            outcome = engine.apply(state, Roll(d1, d2, source="sim"))
            settled = [e for e in outcome.events if isinstance(e, Settlement)]
            if settled:
                row[total] = ~settled[0].unique_points
                continue
            k = key(outcome.state)
            if k not in index:
                index[k] = len(states)
                states.append(outcome.state)
            row[total] = index[k] * 13
        table.extend(row)
    return table


def simulate(rules: FireBetRules, hands: int, seed: int) -> list[int]:
    """Counts of hands ending with k different points, by the real engine on seeded dice.

    The engine's moves are tabled first (:func:`_walk`), then the dice of
    ``random.Random(seed).randint(1, 6)`` (:func:`faces`) walk the table: the very
    hands, counts and estimate of rolling the engine roll by roll, many times faster.
    """
    table = _walk(replace(rules, pay_six_immediately=False))
    counts = [0] * 7
    state = done = 0
    spare = b""
    for chunk in faces(seed, min(1 << 16, 32 * hands)):
        chunk = spare + chunk
        spare = chunk[-1:] if len(chunk) % 2 else b""
        for total in map(add, chunk[0::2], chunk[1::2]):
            state = table[state + total]
            if state < 0:
                counts[~state] += 1
                done += 1
                if done == hands:
                    return counts
                state = 0
    raise AssertionError("unreachable: faces() never ends")  # pragma: no cover


def simulate_roll_by_roll(rules: FireBetRules, hands: int, seed: int) -> list[int]:
    """What :func:`simulate` gives, the slow way: the engine applied to every roll of
    ``random.Random(seed).randint(1, 6)`` dice. The reference the tests hold
    :func:`simulate` to and the benchmark times it against."""
    engine = Engine(replace(rules, pay_six_immediately=False))
    rng = random.Random(seed)
    counts = [0] * 7
    state = TableState()
    done = 0
    while done < hands:
        outcome = engine.apply(state, Roll(rng.randint(1, 6), rng.randint(1, 6), source="sim"))
        state = outcome.state
        for event in outcome.events:
            if isinstance(event, Settlement):
                counts[event.unique_points] += 1
                done += 1
    return counts


def report(rules: FireBetRules, simulate_hands: int = 0, seed: int = 0) -> dict[str, Any]:
    """The ``odds --json`` object: exact p[0..6] and house edge (and a simulation if asked)."""
    p = exact_distribution()
    out: dict[str, Any] = {
        "p": [float(x) for x in p],
        "house_edge": float(house_edge(rules, p)),
        "exact": {"p": [str(x) for x in p], "house_edge": str(house_edge(rules, p))},
        "pays": {str(k): v for k, v in rules.pay_table().items()},
    }
    if simulate_hands:
        counts = simulate(rules, simulate_hands, seed)
        n = simulate_hands
        est = [c / n for c in counts]
        stderr = [math.sqrt(q * (1 - q) / n) for q in (float(x) for x in p)]
        payoff = payoffs(rules)
        mean = sum(est[k] * payoff[k] for k in range(7))
        # the estimator's standard error from the exact distribution: a small sample
        # rarely sees the 5- and 6-point hands that carry most of the variance
        true_mean = sum(float(p[k]) * payoff[k] for k in range(7))
        var = sum(float(p[k]) * (payoff[k] - true_mean) ** 2 for k in range(7))
        out["simulation"] = {
            "hands": n,
            "seed": seed,
            "p": est,
            "p_stderr": stderr,
            "house_edge": -mean,
            "house_edge_stderr": math.sqrt(var / n),
        }
    return out
