"""Benchmark: ``firebet odds --simulate N``, the simulated hands per second.

    .venv/bin/python bench/odds.py [--hands 1000000] [--seed 7] [--reference 20000]

Times :func:`controller.core.odds.report` with ``--simulate N`` (what the command runs),
and, for scale, the engine rolled roll by roll on the same dice for ``--reference`` hands
(how the simulation ran before issue 11). Both give the same counts for the same seed;
the benchmark checks that on the reference hands. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.core.config import FireBetRules  # noqa: E402
from controller.core.odds import report, simulate, simulate_roll_by_roll  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--reference", type=int, default=20_000)
    args = parser.parse_args()
    rules = FireBetRules()
    start = time.perf_counter()
    sim = report(rules, args.hands, args.seed)["simulation"]
    ours = time.perf_counter() - start
    print(
        f"firebet odds --simulate {args.hands:,} --seed {args.seed}: {ours:.2f} s "
        f"({args.hands / ours:,.0f} hands/s); house edge {sim['house_edge']:.4%} "
        f"± {sim['house_edge_stderr']:.4%}"
    )
    if args.reference:
        start = time.perf_counter()
        reference = simulate_roll_by_roll(rules, args.reference, args.seed)
        theirs = time.perf_counter() - start
        same = reference == simulate(rules, args.reference, args.seed)
        rate = args.reference / theirs
        print(
            f"engine roll by roll, {args.reference:,} hands: {rate:,.0f} hands/s "
            f"(1,000,000 hands would take {1_000_000 / rate:.0f} s); "
            f"same counts for the same seed: {'yes' if same else 'NO'}"
        )
        print(f"ratio: the simulation is {args.hands / ours / rate:.1f}x the engine roll by roll")


if __name__ == "__main__":
    main()
