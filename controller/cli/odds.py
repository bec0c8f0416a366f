"""firebet odds: the exact odds and house edge of the configured pay table, computed as
fractions from the pay table (the math: controller/core/odds.py, docs/rules.md);
--simulate N adds a Monte Carlo estimate beside them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from controller.cli import options
from controller.core.odds import exact_distribution, house_edge, report


def _ordinal_label(k: int) -> str:
    return f"{k} point" + ("" if k == 1 else "s")


def run(args: argparse.Namespace) -> int:
    config = options.load(args)
    rules = config.firebet
    if args.simulate is not None and args.simulate <= 0:
        print("firebet: --simulate takes a number of hands greater than 0", file=sys.stderr)
        return 2
    data = report(rules, args.simulate or 0, args.seed)
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
    if sim:
        print(
            f"simulated house edge over {sim['hands']:,} hands (seed {sim['seed']}): "
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
    p.set_defaults(func=run)
