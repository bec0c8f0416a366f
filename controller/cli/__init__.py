"""The ``firebet`` command line (SPEC §5): one console script, many subcommands.

Each subcommand lives in its own module, which offers ``register(subparsers)``
and sets ``func`` on its parser; ``func(args) -> int`` returns the exit code.
Exit codes: 0 ok, 1 failure, 2 bad usage/input/config, 3 service not
reachable, 4 journal integrity failure.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from controller import __version__
from controller.core.errors import FirebetError

# the modules that add subcommands, in the order `firebet --help` lists them
COMMAND_MODULES: tuple[str, ...] = (
    "controller.cli.run",
    "controller.cli.sim",
    "controller.cli.dealer",
    "controller.cli.audit",
    "controller.cli.diag",
    "controller.cli.doctor",
    "controller.cli.replay",
    "controller.cli.odds",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="firebet",
        description="Fire-bet table controller for live craps and mini-craps.",
    )
    parser.add_argument("--version", action="version", version=f"firebet {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one firebet command; returns its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except FirebetError as exc:
        print(f"firebet: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
