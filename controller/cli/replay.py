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
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from controller.cli import options
from controller.cli.display import hand_line
from controller.core.engine import Engine
from controller.core.errors import UsageError
from controller.core.events import Settlement
from controller.core.script import Replayer, parse_chunks
from controller.core.state import TableState


def json_line(s: Settlement) -> str:
    """``json.dumps(s.report())``, written out: the replay prints one per settled hand."""
    if not s.payouts:  # most hands: all but the hand's number is kept, by its points
        key = (s.points, s.result, s.odds_to_one)
        tail = _TAILS.get(key)
        if tail is None:
            tail = _tail(s)
            if len(_TAILS) < 4096:
                _TAILS[key] = tail
        return f'{{"hand": {s.hand}{tail}'
    return f'{{"hand": {s.hand}{_tail(s)}'


_TAILS: dict[tuple[tuple[int, ...], str, int], str] = {}


def _tail(s: Settlement) -> str:
    points = ", ".join(map(str, s.points))
    payouts = ", ".join(f'"{p}": {a}' for p, a in sorted(s.payouts.items()))
    return (
        f', "points": [{points}], "unique_points": {s.unique_points}, '
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


_CHUNK = 1 << 16  # bytes of script lines read at a time


def _chunks(stream: IO[bytes], copy: IO[bytes] | None = None) -> Iterator[list[bytes]]:
    """The script's lines, many at a time, split at ``\n`` only (copied to ``copy``)."""
    while lines := stream.readlines(_CHUNK):
        if copy is not None:
            copy.writelines(lines)
        yield lines


def _check(stream: IO[bytes], source: str, copy: IO[bytes] | None) -> None:
    """Read every line once (copying it to ``copy``); a bad line raises ScriptError."""
    for _ in parse_chunks(_chunks(stream, copy), source):
        pass


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
        batch = stack.enter_context(_Batched())
        write = batch.write
        for no, event in replayer.run_lines(_chunks(script), source):
            if isinstance(event, Settlement):
                if args.json:
                    write(out, json_line(event) + "\n")
                else:
                    write(out, "\n".join(_table_lines(event)) + "\n")
            else:
                write(err, f"{source}:{no}: refused: {event.reason}\n")
        if not args.json:
            write(out, _now_line(replayer.state) + "\n")
    return 0


class _Batched:
    """Lines written in blocks, in the order given across stdout and stderr: one write a
    block, not a system call a line when the stream is unbuffered (``PYTHONUNBUFFERED``,
    a terminal's stderr). A block ends at 64 KB or where the other stream takes over."""

    LIMIT = 1 << 16

    def __init__(self) -> None:
        self._stream: IO[str] | None = None
        self._parts: list[str] = []
        self._size = 0

    def write(self, stream: IO[str], text: str) -> None:
        if stream is not self._stream:
            self.flush()
            self._stream = stream
        self._parts.append(text)
        self._size += len(text)
        if self._size >= self.LIMIT:
            self.flush()

    def flush(self) -> None:
        if self._parts and self._stream is not None:
            text, self._parts, self._size = "".join(self._parts), [], 0
            self._stream.write(text)

    def __enter__(self) -> _Batched:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()


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
