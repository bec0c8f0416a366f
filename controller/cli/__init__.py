"""The ``firebet`` command line (``docs/cli.md``): one console script, many subcommands.

Each subcommand lives in its own module, which offers ``register(subparsers)``
and sets ``func`` on its parser; ``func(args) -> int`` returns the exit code.
Exit codes: 0 ok, 1 failure, 2 bad usage/input/config, 3 service not
reachable, 4 journal integrity failure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import select
import sys
from collections.abc import Sequence
from typing import NoReturn

from controller import __version__
from controller.core.errors import FirebetError, Refusal

# the modules that add subcommands, in the order `firebet --help` lists them
COMMAND_MODULES: tuple[str, ...] = (
    "controller.cli.run",
    "controller.cli.sim",
    "controller.cli.dealer",
    "controller.cli.bench",
    "controller.cli.audit",
    "controller.cli.diag",
    "controller.cli.doctor",
    "controller.cli.reader_check",
    "controller.cli.replay",
    "controller.cli.odds",
    "controller.cli.floor",
)

# the module that adds each command: ``firebet bet`` loads the dealer's module alone, not
# the service, the floor console and their libraries (a test holds this to what the
# modules register)
_DEALER = (
    "status", "whoami", "roll", "void", "correct", "surrender", "bet", "cancel", "ack", "held",
)  # fmt: skip
COMMANDS: dict[str, str] = {
    "run": "controller.cli.run",
    "sim": "controller.cli.sim",
    **dict.fromkeys((*_DEALER, "diagnostics"), "controller.cli.dealer"),
    "sim-reader": "controller.cli.bench",
    **dict.fromkeys(("journal", "history", "export", "clear-halt"), "controller.cli.audit"),
    "diag": "controller.cli.diag",
    "doctor": "controller.cli.doctor",
    "reader-check": "controller.cli.reader_check",
    "replay": "controller.cli.replay",
    "odds": "controller.cli.odds",
    "floor": "controller.cli.floor",
}

# the options that print and exit before any command is read: they load no command's module
# (``firebet --version`` had cost four times the CPU of ``firebet status --help``, issue 31)
EXITING_OPTIONS: tuple[str, ...] = ("--version", "--contract-version")


# a usage error's refusal code, by the argument argparse names ("argument AMOUNT: ...");
# any other usage error is bad_input (docs/cli.md, "Refusal codes")
USAGE_CODES: dict[str, Refusal] = {
    "AMOUNT": Refusal.NOT_AN_AMOUNT,
    "D1": Refusal.BAD_DICE,
    "D2": Refusal.BAD_DICE,
    "POS": Refusal.NO_SUCH_POSITION,
}


def usage_refusal(message: str) -> dict[str, object]:
    """The refusal object ``--json`` prints for a usage error (exit 2) with ``message``."""
    named = message.split(":", 1)[0].removeprefix("argument ") if message else ""
    code = USAGE_CODES.get(named, Refusal.BAD_INPUT)
    return {"ok": False, "code": str(code), "error": message, "exit": 2}


class _Parser(argparse.ArgumentParser):
    """The parser of every command: under ``--json`` a usage error is also the refusal
    object on standard output (its words and usage on standard error, exit 2, as always)."""

    json_wanted = False  # set from the command's words before they are parsed

    def error(self, message: str) -> NoReturn:
        if _Parser.json_wanted:
            print(json.dumps(usage_refusal(message)), flush=True)
        super().error(message)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered, or, for a known
    ``command``, only the commands of the module that adds it (the same parser for it);
    for one of :data:`EXITING_OPTIONS`, none."""
    parser = _Parser(
        prog="firebet",
        description="Fire-bet table controller for live craps and mini-craps.",
    )
    parser.add_argument("--version", action="version", version=f"firebet {__version__}")
    parser.add_argument(
        "--contract-version",
        action=_ContractVersion,
        help="print the release, the command line's contract version, the floor messages' "
        "version and where the JSON Schemas are, as JSON, and exit",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if command in COMMANDS:
        modules: tuple[str, ...] = (COMMANDS[command],)
    elif command in EXITING_OPTIONS:
        modules = ()
    else:
        modules = COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(subparsers)
    for sub in _walk(parser):
        _plain_help(sub)
        sub.set_defaults(_parser=sub)  # the deepest parser's wins: unknown options name it
    return parser


class _ContractVersion(argparse.Action):
    """``firebet --contract-version``: what a script reads to know what it talks to."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> None:
        from controller.cli.contract import versions

        print(json.dumps(versions()))
        parser.exit(0)


def _walk(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser under it, depth first."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in action._choices_actions}
            for name, sub in action.choices.items():
                if sub.description is None and helps.get(name):
                    sub.description = helps[name]  # `firebet X --help` says what X does
            for sub in dict.fromkeys(action.choices.values()):
                found.extend(_walk(sub))
    return found


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """No reST markup (````name````) in what ``--help`` prints."""
    if parser.description:
        parser.description = parser.description.replace("``", "")
    if parser.epilog:
        parser.epilog = parser.epilog.replace("``", "")
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = action.help.replace("``", "")
        for choice in getattr(action, "_choices_actions", []):
            if isinstance(choice.help, str):
                choice.help = choice.help.replace("``", "")


def _unknown(parser: argparse.ArgumentParser, extras: list[str]) -> None:
    """Refuse arguments the subcommand does not know, with its usage (exit 2)."""
    import difflib  # only for a mistyped option: not on every command's start

    options = [o for a in parser._actions for o in a.option_strings]
    hints = []
    for extra in extras:
        close = difflib.get_close_matches(extra.split("=", 1)[0], options, n=1)
        if close:
            hints.append(f"{extra} (did you mean {close[0]}?)")
        else:
            hints.append(extra)
    parser.error("unrecognized arguments: " + " ".join(hints))


def _stdout_closed() -> bool:
    """Whether the reader of our standard output went away (``| head`` has read enough)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR and POLLHUP are reported whatever is asked for
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in poller.poll(0))


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so the flush at exit has nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one firebet command; returns its exit code.

    A broken pipe on standard output (``firebet export --format csv | head -1``)
    ends any command quietly with exit 0: the reader had what it wanted.
    """
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # here, not at exit, where a closed pipe is only reported
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # a socket's broken pipe is a real failure, not ``| head``
        _quiet_stdout()
        return 0


def _main(argv: Sequence[str] | None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    _Parser.json_wanted = "--json" in words
    # the command first: its own module's parser; anything else (--help, a typo) the full one
    parser = build_parser(words[0] if words else None)
    args, extras = parser.parse_known_args(words)
    if extras:
        _unknown(getattr(args, "_parser", parser), extras)
    try:
        code: int = args.func(args)
        return code
    except FirebetError as exc:
        print(f"firebet: {exc}", file=sys.stderr)
        if getattr(args, "json", False) and getattr(args, "_json_refusal", False):
            from controller.cli.dealer import refusal_json

            print(json.dumps(refusal_json(exc)))  # the code and words, for a script
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
