"""``firebet odds``: the exact odds and house edge of the configured pay table.

The number of different points a shooter makes before the seven-out is a
Markov chain over the set of points already made. From a come-out roll a point
p is established with probability ways(p)/24 among the rolls that decide
anything; then p is made before a 7 with probability ways(p)/(ways(p)+6).
Everything is computed with fractions, so the figures are exact.

A surrender never changes that chain: the successor throws for the point that was on and
the hand's points carry (SPEC section 2, settled questions). :func:`surrender_edge`
proves it for a shooter's surrender policy with the chain of the real engine (every
situation put to it, with the policy's surrender before each roll), solved exactly.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from fractions import Fraction
from functools import cache
from operator import add
from typing import Any

from controller.core.commands import Bet, Roll, Surrender
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


SurrenderPolicy = Callable[[TableState], bool]
"""Whether the shooter surrenders in a situation, before the next roll."""

SURRENDER_POLICIES = ("none", "made-before", "new-point", "always", "random")
"""The policies ``firebet odds --surrender`` knows (:func:`surrender_policy`)."""


def surrender_policy(name: str, seed: int = 0) -> SurrenderPolicy:
    """The shooter's surrender policy called ``name``: ``none``; ``made-before`` (the
    exploit of the old ruling: surrender whenever the point on is one already made this
    hand, short of six); ``new-point`` (whenever the point on is not made yet); ``always`` (before
    every roll); ``random`` (in a pseudo-random half of the situations, by ``seed``)."""
    if name == "none":
        return lambda s: False
    if name == "made-before":  # (with six made every point is: he stops and is paid)
        return lambda s: s.point is not None and s.point in s.points and len(s.points) < 6
    if name == "new-point":
        return lambda s: s.point is not None and s.point not in s.points
    if name == "always":
        return lambda s: True
    if name == "random":

        def coin(s: TableState) -> bool:
            key = f"{seed}|{s.phase}|{s.point}|{sorted(s.points)}|{s.surrender_pending}"
            return hashlib.blake2b(key.encode(), digest_size=1).digest()[0] < 128

        return coin
    raise ValueError(f"unknown surrender policy {name!r}: one of {', '.join(SURRENDER_POLICIES)}")


def _situation(s: TableState) -> tuple[object, ...]:
    """What decides the rest of a hand with a wager riding: phase, point, points made,
    whether betting is open, a surrendered hand pending."""
    return (s.phase, s.point, frozenset(s.points), s.betting_open, s.surrender_pending)


def _rolled(engine: Engine, state: TableState, policy: SurrenderPolicy | None) -> TableState:
    """The state the next roll is thrown in: after the shooter's surrender, when the
    policy has him surrender here."""
    if policy is not None and policy(state):
        return engine.apply(state, Surrender(actor="sim")).state
    return state


_DICE = {t: (max(1, t - 6), t - max(1, t - 6)) for t in range(2, 13)}


def surrender_edge(rules: FireBetRules, policy: SurrenderPolicy) -> Fraction:
    """The house's exact expected win per dollar on a fire bet whose shooters surrender
    by ``policy`` before any roll (``pay_six_immediately`` aside: it pays the same).

    The chain is the real engine's: from a $1 wager every situation reached is put to
    it, the policy's surrender first, then each total (``ways/36``); a settlement ends
    the hand with the wager's net. The values are solved exactly by elimination, the
    situations with more points made first (a roll never takes a point away; a
    surrender without ``surrender_carries_points`` may, to a situation with none,
    eliminated last)."""
    rules = replace(rules, pay_six_immediately=False)
    engine = Engine(rules)
    net = payoffs(rules)
    start = engine.apply(TableState(), Bet(1, 1, actor="sim")).state
    index: dict[tuple[object, ...], int] = {_situation(start): 0}
    states = [start]
    eqs: list[dict[int, Fraction]] = []  # x_i = sum coef * x_j (+ constant under key -1)
    ending: list[Fraction] = []  # each situation's chance its next roll settles the hand
    for state in states:  # grows while it is walked
        thrown = _rolled(engine, state, policy)
        eq: dict[int, Fraction] = {}
        ending.append(Fraction(0))
        for total, (d1, d2) in _DICE.items():
            chance = Fraction(WAYS[total], 36)
            outcome = engine.apply(thrown, Roll(d1, d2, source="sim"))
            paid = [e for e in outcome.events if isinstance(e, Settlement) and e.wagers]
            if paid:
                eq[-1] = eq.get(-1, Fraction(0)) + chance * net[paid[0].unique_points]
                ending[-1] += chance
                continue
            key = _situation(outcome.state)
            if key not in index:
                index[key] = len(states)
                states.append(outcome.state)
            j = index[key]
            eq[j] = eq.get(j, Fraction(0)) + chance
        eqs.append(eq)
    order = sorted(range(len(states)), key=lambda i: -len(states[i].points))
    # the chance the hand is ever settled: a policy that keeps the wager riding forever
    # (under the old ruling, a surrender on every point) has no edge to state
    settles = [
        {**{j: c for j, c in eq.items() if j >= 0}, -1: end}
        for eq, end in zip(eqs, ending, strict=True)
    ]
    if _solve(settles, order)[0] != 1:
        raise ValueError("under this surrender policy a fire-bet hand need never be settled")
    return -_solve(eqs, order)[0]


def _solve(eqs: list[dict[int, Fraction]], order: list[int]) -> list[Fraction]:
    """The solution of x_i = sum_j eqs[i][j] x_j + eqs[i][-1], by elimination in
    ``order`` (each x_i substituted into the equations that use it), then back."""
    users: dict[int, set[int]] = {i: set() for i in range(len(eqs))}
    for i, eq in enumerate(eqs):
        for j in eq:
            if j >= 0:
                users[j].add(i)
    solved: list[tuple[int, dict[int, Fraction]]] = []
    for i in order:
        eq = eqs[i]
        loop = eq.pop(i, Fraction(0))
        users[i].discard(i)
        if loop == 1:  # it never leaves: nothing is ever settled from it
            eq = eqs[i] = {}
        elif loop:
            eq = {j: c / (1 - loop) for j, c in eq.items()}
            eqs[i] = eq
        for u in users.pop(i):
            target = eqs[u]
            c = target.pop(i)
            for j, cj in eq.items():
                target[j] = target.get(j, Fraction(0)) + c * cj
                if j >= 0:
                    users[j].add(u)
        for j in eq:
            if j >= 0:
                users[j].discard(i)
        solved.append((i, eq))
    x = [Fraction(0)] * len(eqs)
    for i, eq in reversed(solved):
        x[i] = sum((c * x[j] for j, c in eq.items() if j >= 0), eq.get(-1, Fraction(0)))
    return x


def _walk(rules: FireBetRules, policy: SurrenderPolicy | None = None) -> list[int]:
    """The hand as the engine plays it, as a table: (state * 13 + total) -> next state * 13.

    A state is what decides the count of different points: the phase, the point and
    the set of points made. Every state and total is put to the real engine once; a
    seven-out's entry is ``~different points`` (negative), and the walk starts again at 0.
    With a surrender ``policy`` each hand starts with a wager riding (a surrender decides
    by it), the shooter surrenders by the policy before each roll and a state is its
    whole situation (:func:`_situation`).
    """
    engine = Engine(rules)
    dice = _DICE

    def key(s: TableState) -> tuple[object, ...]:
        return (s.phase, s.point, frozenset(s.points)) if policy is None else _situation(s)

    start = TableState()
    if policy is not None:
        start = engine.apply(start, Bet(1, 1, actor="sim")).state
    index = {key(start): 0}
    states = [start]
    table: list[int] = []
    for state in states:  # grows while it is walked: every reachable state once
        row = [0] * 13
        thrown = _rolled(engine, state, policy)
        for total, (d1, d2) in dice.items():
            outcome = engine.apply(thrown, Roll(d1, d2, source="sim"))
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


def simulate(
    rules: FireBetRules, hands: int, seed: int, policy: SurrenderPolicy | None = None
) -> list[int]:
    """Counts of hands ending with k different points, by the real engine on seeded dice.

    The engine's moves are tabled first (:func:`_walk`), then the dice of
    ``random.Random(seed).randint(1, 6)`` (:func:`faces`) walk the table: the very
    hands, counts and estimate of rolling the engine roll by roll, many times faster.
    ``policy``: the shooters surrender by it (:func:`surrender_policy`).
    """
    table = _walk(replace(rules, pay_six_immediately=False), policy)
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


def report(
    rules: FireBetRules, simulate_hands: int = 0, seed: int = 0, surrender: str = "none"
) -> dict[str, Any]:
    """The ``odds --json`` object: exact p[0..6] and house edge (and a simulation if asked);
    ``surrender``: a shooter's surrender policy (:data:`SURRENDER_POLICIES`) whose exact
    edge is proved beside it (and the simulation played under it)."""
    policy = surrender_policy(surrender) if surrender != "none" else None
    p = exact_distribution()
    out: dict[str, Any] = {
        "p": [float(x) for x in p],
        "house_edge": float(house_edge(rules, p)),
        "exact": {"p": [str(x) for x in p], "house_edge": str(house_edge(rules, p))},
        "pays": {str(k): v for k, v in rules.pay_table().items()},
    }
    if policy is not None:
        edge = surrender_edge(rules, policy)
        out["surrender"] = {
            "policy": surrender,
            "carries_points": rules.surrender_carries_points,
            "house_edge": float(edge),
            "exact": str(edge),
            "same_as_without": edge == house_edge(rules, p),
        }
    if simulate_hands:
        counts = simulate(rules, simulate_hands, seed, policy)
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
            "surrender": surrender,
            "p": est,
            "p_stderr": stderr,
            "house_edge": -mean,
            "house_edge_stderr": math.sqrt(var / n),
        }
    return out
