"""firebet odds: the exact odds and house edge of the configured pay table, computed as
fractions from the pay table (the math: controller/core/odds.py, docs/rules.md);
--simulate N adds a Monte Carlo estimate beside them; --surrender POLICY proves, with the
exact chain of the engine, the edge when shooters surrender by POLICY (the same as without
surrenders: a surrender keeps the point and the points made), and plays the simulation
under it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from controller.cli import options
from controller.core.odds import SURRENDER_POLICIES, exact_distribution, house_edge, report


def _ordinal_label(k: int) -> str:
    return f"{k} point" + ("" if k == 1 else "s")


def run(args: argparse.Namespace) -> int:
    config = options.load(args)
    rules = config.firebet
    if args.simulate is not None and args.simulate <= 0:
        print("firebet: --simulate takes a number of hands greater than 0", file=sys.stderr)
        return 2
    data = report(rules, args.simulate or 0, args.seed, args.surrender)
    if args.json:
        print(json.dumps(data))
        return 0
    p = exact_distribution()
    sim = data.get("simulation")
    print(f"Fire bet odds: preset {config.preset}, configuration {config.source}")
    header = f"{'different points':<18}{'probability':>14}{'1 in':>12}{'pays':>14}"
    if sim:
        header += f"{'simulated':>14}{'± std err':>12}"
    print(header)
    for k in range(7):
        odds = rules.odds_for(k)[1]
        pays = f"{odds} to 1" if odds else "loses"
        line = f"{_ordinal_label(k):<18}{float(p[k]):>14.8f}{float(1 / p[k]):>12,.1f}{pays:>14}"
        if sim:
            line += f"{sim['p'][k]:>14.8f}{sim['p_stderr'][k]:>12.8f}"
        print(line)
    edge = house_edge(rules, p)
    # computed exactly; the fraction itself (80 digits) is in --json under "exact"
    print(f"house edge: {float(edge):.4%}")
    given = data.get("surrender")
    if given:
        same = "the same, exactly" if given["same_as_without"] else "NOT the same"
        print(
            f"house edge with shooters surrendering by policy {given['policy']} "
            f"(exact chain of the engine, surrender_carries_points = "
            f"{str(given['carries_points']).lower()}): {given['house_edge']:.4%} ({same})"
        )
    if sim:
        print(
            f"simulated house edge over {sim['hands']:,} hands (seed {sim['seed']}"
            + (f", surrender policy {args.surrender}" if args.surrender != "none" else "")
            + "): "
            f"{sim['house_edge']:.4%} ± {sim['house_edge_stderr']:.4%}"
        )
    return 0


def register(subparsers: Any) -> None:
    p = options.add_command(
        subparsers, "odds", "exact odds and house edge of the configured pay table", __doc__
    )
    options.add_config_option(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--simulate", type=options.whole, metavar="N", help="also simulate N hands with the engine"
    )
    p.add_argument("--seed", type=options.whole, default=0, metavar="S", help="seed for --simulate")
    p.add_argument(
        "--surrender",
        choices=SURRENDER_POLICIES,
        default="none",
        help="prove the edge (and simulate) with shooters surrendering by this policy",
    )
    p.set_defaults(func=run)
