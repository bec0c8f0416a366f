"""``firebet replay FILE``: run the pure engine over a script of table actions.

Script: one item a line; ``#`` starts a comment; blank lines are ignored.
``D1 D2`` a roll, ``void``, ``surrender [voluntary|compulsory]``,
``bet POS AMOUNT``, ``cancel POS``, ``ack``. Line N is the N-th ``\\n``-terminated line.

The script is streamed: it is read twice (once to check every line, so a bad line stops
the replay before any output, once to play it), standard input is copied to a temporary
file for the second reading, and memory does not grow with the script's length.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from controller.cli import options
from controller.cli.display import hand_line
from controller.core.engine import Engine
from controller.core.errors import ScriptError, UsageError
from controller.core.events import Settlement
from controller.core.script import Replayer, parse_script
from controller.core.state import TableState


def json_line(s: Settlement) -> str:
    """``json.dumps(s.report())``, written out: the replay prints one per settled hand."""
    points = ", ".join(map(str, s.points))
    payouts = ", ".join(f'"{p}": {a}' for p, a in sorted(s.payouts.items()))
    return (
        f'{{"hand": {s.hand}, "points": [{points}], "unique_points": {s.unique_points}, '
        f'"result": "{s.result}", "odds_to_one": {s.odds_to_one}, "payouts": {{{payouts}}}}}'
    )


def _table_lines(s: Settlement) -> Iterator[str]:
    when = " (paid at the 6th point)" if s.immediate else ""
    yield hand_line(s.hand, s.unique_points, s.points, s.result, s.odds_to_one) + when
    for pos, won in sorted(s.payouts.items()):
        wager = s.wagers.get(pos, 0)
        outcome = f"wins ${won}" if won else "loses"
        yield f"    position {pos}: ${wager} {outcome}"


def _now_line(st: TableState) -> str:
    markers = ", ".join(f"{p}:{o}" for p, o in st.markers().items()) or "none"
    return (
        f"now: hand {st.hand}, shooter {st.shooter}, phase {st.phase.value}, "
        f"point {st.point or '-'}, markers {markers}, rolls {st.rolls}"
    )


def _numbered(text: Iterable[str], source: str) -> Iterator[str]:
    """The lines of ``text``; a byte that is not UTF-8 is a ScriptError naming its line."""
    no = 0
    try:
        for no, line in enumerate(text, start=1):  # noqa: B007 - no is read after a failure
            yield line
    except UnicodeDecodeError as exc:
        why = f"cannot read the script: not UTF-8 ({exc.reason})"
        raise ScriptError(source, no + 1, "", why) from None


def _reading(stream: IO[bytes]) -> io.TextIOWrapper:
    """``stream`` as text, split at ``\\n`` only (the caller detaches it after use)."""
    return io.TextIOWrapper(stream, encoding="utf-8", newline="\n")


def _copying(lines: Iterator[str], copy: IO[bytes]) -> Iterator[str]:
    for line in lines:
        copy.write(line.encode("utf-8"))
        yield line


def _check(stream: IO[bytes], source: str, copy: IO[bytes] | None) -> None:
    """Read every line once (copying it to ``copy``); a bad line raises ScriptError."""
    text = _reading(stream)
    try:
        lines = _numbered(text, source)
        for _ in parse_script(lines if copy is None else _copying(lines, copy), source):
            pass
    finally:
        text.detach()  # the stream stays open for the second reading


def run(args: argparse.Namespace) -> int:
    config = options.load(args)
    engine = Engine(config.firebet)
    source = str(Path(args.file))
    with ExitStack() as stack:
        try:
            if args.file == "-":
                script: IO[bytes] = stack.enter_context(tempfile.TemporaryFile())
                _check(sys.stdin.buffer, source, script)
            else:
                script = stack.enter_context(Path(args.file).open("rb"))
                _check(script, source, None)
            script.seek(0)
        except OSError as exc:
            raise UsageError(f"{source}: cannot read the script: {exc.strerror or exc}") from exc
        replayer = Replayer(engine)
        out, err = sys.stdout, sys.stderr
        text = _reading(script)
        try:
            for no, event in replayer.run(parse_script(_numbered(text, source), source)):
                if isinstance(event, Settlement):
                    if args.json:
                        out.write(json_line(event) + "\n")
                    else:
                        out.write("\n".join(_table_lines(event)) + "\n")
                else:
                    err.write(f"{source}:{no}: refused: {event.reason}\n")
        finally:
            text.detach()
        if not args.json:
            out.write(_now_line(replayer.state) + "\n")
    return 0


def register(subparsers: Any) -> None:
    p = options.add_command(
        subparsers,
        "replay",
        "run the pure rules engine over a script of rolls and actions",
        __doc__,
    )
    p.add_argument("file", metavar="FILE", help="script file ('-' for standard input)")
    p.add_argument("--json", action="store_true", help="one JSON line per settled hand")
    options.add_config_option(p)
    p.set_defaults(func=run)
