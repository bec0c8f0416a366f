"""Benchmark: the old surrender exploit played through ``firebet replay``.

    .venv/bin/python bench/surrender.py [--hands 200000] [--seed 1] [--json]

A shooter who surrenders whenever the point on is one he already made this hand (short of
six) once turned the NJ fire bet's 20.76% house edge into about 461% for the players: the
surrender threw the point away and the successor's come-out 7 was a natural. A surrender
now keeps the point (docs/rules.md), so the policy changes nothing.

The script is written by a tracker of its own (the point on and the points made, in
craps terms, independent of the engine) from seeded dice: ``bet 1 5`` for every new
fire-bet hand, ``surrender`` by the policy, the rolls. ``firebet replay --json`` plays it;
the house's win per dollar wagered is compared with the exact edge
(``firebet odds --surrender made-before``) and its standard error. Exit 0 when the
replayed edge is within 4 standard errors of the exact figure, 1 when not.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.core.config import FireBetRules  # noqa: E402
from controller.core.odds import (  # noqa: E402
    exact_distribution,
    payoffs,
    surrender_edge,
    surrender_policy,
)

WAGER = 5
POINTS = (4, 5, 6, 8, 9, 10)


def write_script(path: Path, hands: int, seed: int) -> int:
    """The exploit's script for ``hands`` fire-bet hands on ``random.Random(seed)`` dice;
    returns its number of lines."""
    rng = random.Random(seed)
    lines = 0
    with path.open("w", encoding="ascii") as out:
        for _ in range(hands):
            out.write(f"bet 1 {WAGER}\n")
            lines += 1
            point: int | None = None
            made: set[int] = set()
            while True:
                d1, d2 = rng.randint(1, 6), rng.randint(1, 6)
                total = d1 + d2
                out.write(f"{d1} {d2}\n")
                lines += 1
                if point is None:
                    if total in POINTS:
                        point = total
                elif total == point:
                    made.add(point)
                    point = None
                elif total == 7:
                    break  # the loser 7: the hand settles
                if point is not None and point in made and len(made) < 6:
                    out.write("surrender\n")  # the successor throws for the same point
                    lines += 1
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    rules = FireBetRules()  # the NJ table
    exact = surrender_edge(rules, surrender_policy("made-before"))
    p = exact_distribution()
    net = payoffs(rules)
    mean = sum(float(p[k]) * net[k] for k in range(7))
    sd = math.sqrt(sum(float(p[k]) * (net[k] - mean) ** 2 for k in range(7)))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "exploit.txt"
        lines = write_script(script, args.hands, args.seed)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "controller", "replay", "--json", str(script)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.perf_counter() - started
    if done.returncode != 0:
        print(f"firebet replay failed ({done.returncode}): {done.stderr}", file=sys.stderr)
        return 1
    settled = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    player = 0
    for hand in settled:
        won = hand["payouts"].get("1", 0)
        player += won if won else -WAGER
    wagered = WAGER * len(settled)
    edge = -player / wagered
    stderr = sd / math.sqrt(len(settled))
    within = abs(edge - float(exact)) <= 4 * stderr and len(settled) == args.hands
    figures = {
        "hands": len(settled),
        "script_lines": lines,
        "seed": args.seed,
        "replay_seconds": round(took, 2),
        "player_net": player,
        "wagered": wagered,
        "house_edge": edge,
        "house_edge_stderr": stderr,
        "exact_house_edge": str(exact),
        "within_4_stderr": within,
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"{len(settled):,} hands ({lines:,} script lines, seed {args.seed}) replayed in "
            f"{took:.1f} s: players net ${player:,} on ${wagered:,} wagered"
        )
        print(
            f"house edge {edge:.4%} ± {stderr:.4%} (std err); exact {float(exact):.4%}: "
            + ("within 4 std err" if within else "OUTSIDE 4 std err")
        )
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
