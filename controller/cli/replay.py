"""``firebet replay FILE``: run the pure engine over a script of table actions.

Script: one item a line; ``#`` starts a comment; blank lines are ignored.
``D1 D2`` a roll, ``void``, ``surrender [voluntary|compulsory]``,
``bet POS AMOUNT``, ``cancel POS``, ``ack``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from controller.cli import options
from controller.cli.display import count
from controller.core.engine import Engine
from controller.core.errors import UsageError
from controller.core.events import Refused
from controller.core.script import ReplayResult, parse_script, replay, script_lines


def _print_table(result: ReplayResult, out: TextIO) -> None:
    for s in result.settlements:
        points = ", ".join(str(p) for p in s.points) or "none"
        verdict = f"WIN {s.odds_to_one} to 1" if s.result == "win" else "lose"
        when = " (paid at the 6th point)" if s.immediate else ""
        print(
            f"hand {s.hand}: {count(s.unique_points, 'different point')} ({points}) "
            f"- {verdict}{when}",
            file=out,
        )
        for pos, won in sorted(s.payouts.items()):
            wager = s.wagers.get(pos, 0)
            outcome = f"wins ${won}" if won else "loses"
            print(f"    position {pos}: ${wager} {outcome}", file=out)
    st = result.state
    markers = ", ".join(f"{p}:{o}" for p, o in st.markers().items()) or "none"
    print(
        f"now: hand {st.hand}, shooter {st.shooter}, phase {st.phase.value}, "
        f"point {st.point or '-'}, markers {markers}, rolls {st.rolls}",
        file=out,
    )


def run(args: argparse.Namespace) -> int:
    config = options.load(args)
    engine = Engine(config.firebet)
    path = Path(args.file)
    source = str(path)
    try:
        # newline="": no universal-newline translation, so only "\n" ends a line
        if args.file == "-":
            text = sys.stdin.buffer.read().decode("utf-8")
        else:
            with path.open(encoding="utf-8", newline="") as f:
                text = f.read()
    except OSError as exc:
        raise UsageError(f"{source}: cannot read the script: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{source}: cannot read the script: not UTF-8 text (byte {exc.start})"
        ) from exc
    commands = list(parse_script(script_lines(text), source))  # a bad line stops before any output

    def refusal(no: int, event: Refused) -> None:
        print(f"{source}:{no}: refused: {event.reason}", file=sys.stderr)

    result = replay(engine, commands, on_refusal=refusal)
    if args.json:
        for s in result.settlements:
            print(json.dumps(s.report()))
    else:
        _print_table(result, sys.stdout)
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay",
        help="run the pure rules engine over a script of rolls and actions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", metavar="FILE", help="script file ('-' for standard input)")
    p.add_argument("--json", action="store_true", help="one JSON line per settled hand")
    p.add_argument("--config", metavar="F", help="table configuration file (TOML)")
    p.set_defaults(func=run)
