"""``firebet replay FILE``: run the pure engine over a script of table actions.

Script: one item a line; ``#`` starts a comment; blank lines are ignored.
``D1 D2`` a roll, ``void``, ``surrender [voluntary|compulsory]``,
``bet POS AMOUNT``, ``cancel POS``, ``ack``. Line N is the N-th ``\\n``-terminated line.

The script is streamed, read once: its output is spooled to a temporary file and written
out when every line has played, so a bad line stops the replay before any output and
memory does not grow with the script's length.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any

from controller.cli import options, progress
from controller.cli.wording import count, hand_line, money
from controller.core.engine import Engine
from controller.core.errors import UsageError
from controller.core.events import Settlement
from controller.core.script import Replayer
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


def _chunks(stream: IO[bytes], bar: progress.Progress | None = None) -> Iterator[list[bytes]]:
    """The script's lines, many at a time, split at ``\n`` only (``bar``: told how many
    lines were read, a chunk at a time)."""
    read = 0
    while lines := stream.readlines(_CHUNK):
        if bar is not None:
            read += len(lines)
            bar.update(read)
        yield lines


class Money:
    """The fire bets of the hands a replay settled: what was wagered, paid and held (as
    the floor's shift figures count them, docs/floor.md: hold = wagers - paid - the winning
    wagers returned)."""

    def __init__(self) -> None:
        self.hands = 0
        self.wagered = 0
        self.paid = 0  # the winnings alone
        self.returned = 0  # the winning wagers given back

    def add(self, s: Settlement) -> None:
        """Count one settlement (a hand with no wager adds a hand and no money)."""
        self.hands += 1
        if s.wagers:
            self.wagered += sum(s.wagers.values())
            for position, won in s.payouts.items():
                if won:
                    self.paid += won
                    self.returned += s.wagers.get(position, 0)

    @property
    def hold(self) -> int:
        return self.wagered - self.paid - self.returned

    def line(self) -> str:
        """``money: 3 hands settled; wagers $15, paid $120 (+$5 returned), hold -$110``."""
        share = f" ({self.hold * 100 / self.wagered:.1f}%)" if self.wagered else ""
        returned = f" (+{money(self.returned)} returned)" if self.returned else ""
        return (
            f"money: {count(self.hands, 'hand')} settled; wagers {money(self.wagered)}, "
            f"paid {money(self.paid)}{returned}, hold {money(self.hold)}{share}"
        )


def run(args: argparse.Namespace) -> int:
    config = options.load(args)
    engine = Engine(config.firebet)
    source = str(Path(args.file))
    out, err = sys.stdout, sys.stderr
    shown = progress.wanted()  # stderr a terminal: the output waits for the last line
    with ExitStack() as stack:
        replayer = Replayer(engine)
        render = json_line if args.json else _table_text
        hands: list[str] = []  # settled hands' text not yet spooled
        totals = Money()
        bar = stack.enter_context(progress.Progress("replay", "lines", enabled=shown))
        try:
            if args.file == "-":
                script: IO[bytes] = sys.stdin.buffer
            else:
                script = stack.enter_context(Path(args.file).open("rb"))
            spool = _Spool(stack.enter_context(tempfile.TemporaryFile()), (out, err))
            lines = _chunks(script, bar if shown else None)
            for no, event in replayer.run_lines(lines, source):
                if type(event) is Settlement:
                    totals.add(event)
                    hands.append(render(event))
                    if len(hands) >= 1024:
                        spool.add(0, hands)
                        hands = []
                else:
                    if hands:
                        spool.add(0, hands)
                        hands = []
                    spool.add(1, [f"{source}:{no}: refused: {event.reason}"])  # type: ignore[union-attr]
        except OSError as exc:
            raise UsageError(f"{source}: cannot read the script: {exc.strerror or exc}") from exc
        if not args.json:
            hands += [_now_line(replayer.state), totals.line()]
        spool.add(0, hands)
        if args.json and shown:  # for the person watching; a script's stderr never has it
            spool.add(1, [totals.line()])
        bar.close()
        spool.play()  # every line was good: the output, in order
    return 0


def _table_text(s: Settlement) -> str:
    return "\n".join(_table_lines(s))


class _Spool:
    """The replay's output held in a temporary file until the whole script has played, so
    a bad line stops the replay before any output and memory does not grow with the
    script. Lines keep their order across standard output and standard error; they are
    written back in blocks, one write a block (not a system call a line when a stream is
    unbuffered: ``PYTHONUNBUFFERED``, a terminal's stderr)."""

    BLOCK = 1 << 16

    def __init__(self, file: IO[bytes], streams: tuple[IO[str], IO[str]]) -> None:
        self._file = file
        self._streams = streams
        self._pending: list[bytes] = []
        self._size = 0

    def add(self, stream: int, lines: list[str]) -> None:
        """``lines`` (each without its newline) for ``streams[stream]``."""
        if not lines:
            return
        data = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
        self._pending.append(b"%c%d\n" % (48 + stream, len(data)))
        self._pending.append(data)
        self._size += len(data)
        if self._size >= self.BLOCK:
            self._flush()

    def _flush(self) -> None:
        self._file.writelines(self._pending)
        self._pending, self._size = [], 0

    def play(self) -> None:
        """Write what was spooled to the streams, in order."""
        self._flush()
        self._file.seek(0)
        read = self._file.readline
        current: int | None = None
        block: list[bytes] = []
        size = 0
        while header := read():
            stream, length = header[0] - 48, int(header[1:])
            if stream != current or size >= self.BLOCK:
                self._write(current, block)
                current, block, size = stream, [], 0
            block.append(self._file.read(length))
            size += length
        self._write(current, block)

    def _write(self, stream: int | None, block: list[bytes]) -> None:
        if stream is not None and block:
            self._streams[stream].write(b"".join(block).decode("utf-8", "surrogateescape"))
            self._streams[stream].flush()


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
