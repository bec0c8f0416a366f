"""Replay scripts: one table action a line, parsed into commands and folded by the engine.

Script: one item a line; ``#`` starts a comment; blank lines are ignored.
``D1 D2`` a roll, ``void``, ``surrender [voluntary|compulsory]``,
``bet POS AMOUNT``, ``cancel POS``, ``ack``. Used by ``firebet replay`` and
``firebet sim --script``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.core.commands import (
    Ack,
    Bet,
    Cancel,
    Command,
    Roll,
    Surrender,
    SurrenderHow,
    Void,
)
from controller.core.engine import Engine
from controller.core.errors import ScriptError
from controller.core.events import Event, Refused, RollAccepted, RollVoided, Settlement
from controller.core.numbers import WHOLE_NUMBER, whole_number
from controller.core.rolls import DICE_LINES
from controller.core.state import TableState


def _whole(word: str, what: str, source: str, no: int, line: str) -> int:
    value = whole_number(word)
    if value is None:
        raise ScriptError(source, no, line, f"{what} must be {WHOLE_NUMBER}, not {word!r}")
    return value


def parse_line(line: str, source: str = "<script>", no: int = 1) -> Command | None:
    """One script line -> a command (None for a blank or comment line)."""
    body = line.split("#", 1)[0].strip()
    if not body:
        return None
    words = body.split()
    verb = words[0].lower()
    if verb[0].isnumeric() or verb[0] in "-+":  # a roll, or meant as one
        if len(words) != 2:
            raise ScriptError(source, no, line, "a roll is two dice, like '3 4'")
        d1 = _whole(words[0], "die 1", source, no, line)
        d2 = _whole(words[1], "die 2", source, no, line)
        for label, die in (("die 1", d1), ("die 2", d2)):
            if not 1 <= die <= 6:
                raise ScriptError(source, no, line, f"{label} shows {die}: a die shows 1 to 6")
        return Roll(d1, d2, source="script", actor="script")
    if verb == "void" and len(words) == 1:
        return Void(actor="script")
    if verb == "ack" and len(words) == 1:
        return Ack(actor="script")
    if verb == "surrender" and len(words) <= 2:
        try:
            how = SurrenderHow(words[1].lower()) if len(words) == 2 else SurrenderHow.VOLUNTARY
        except ValueError:
            raise ScriptError(
                source, no, line, "a surrender is 'voluntary' or 'compulsory'"
            ) from None
        return Surrender(kind=how, actor="script")
    if verb == "bet":
        if len(words) != 3:
            raise ScriptError(source, no, line, "a bet is 'bet POSITION AMOUNT', like 'bet 3 5'")
        pos = _whole(words[1], "the position", source, no, line)
        amount = _whole(words[2].removeprefix("$"), "the amount (whole dollars)", source, no, line)
        return Bet(pos, amount, actor="script")
    if verb == "cancel":
        if len(words) != 2:
            raise ScriptError(source, no, line, "a cancel is 'cancel POSITION', like 'cancel 3'")
        return Cancel(_whole(words[1], "the position", source, no, line), actor="script")
    raise ScriptError(
        source,
        no,
        line,
        "not a script item (expected 'D1 D2', void, surrender, bet POS AMOUNT, cancel POS, ack)",
    )


def script_lines(text: str) -> list[str]:
    """The lines of a script held in memory: line N is its N-th ``\\n``-terminated line.

    ``str.splitlines`` also splits at form feeds, ``\\r``, U+2028 and more, which would
    shift every later line number; a file is read with ``newline="\\n"`` for the same reason.
    """
    return text.split("\n")


def _common_lines() -> dict[str, Command]:
    """The script lines most scripts are made of, each with its (immutable) command."""
    common: dict[str, Command] = {
        line.decode(): Roll(d1, d2, source="script", actor="script")
        for line, (d1, d2) in DICE_LINES.items()
        if not line.endswith(b"\n")
    }
    common["void"] = Void(actor="script")
    common["ack"] = Ack(actor="script")
    common["surrender"] = Surrender(kind=SurrenderHow.VOLUNTARY, actor="script")
    common.update({f"{line}\n": command for line, command in common.items()})
    return common


_COMMON = _common_lines()


def parse_script(lines: Iterable[str], source: str = "<script>") -> Iterator[tuple[int, Command]]:
    """Every command of a script with its line number; raises ScriptError on a bad line.

    A line the way most lines are written (``3 4``, ``void``) is looked up, not parsed:
    its command is the very value :func:`parse_line` would make.
    """
    common = _COMMON.get
    for no, line in enumerate(lines, start=1):
        command = common(line)
        if command is None:
            command = parse_line(line, source, no)
            if command is None:
                continue
        yield no, command


_COMMON_BYTES: dict[bytes, Command] = {line.encode(): c for line, c in _COMMON.items()}
_KNOWN_LINES = 4096  # distinct lines remembered a script (its wagers, comments)


class LineCommands:
    """Script lines read as bytes -> their commands, for one script: a line seen before is
    looked up, not parsed again (commands are values); a line that is not UTF-8 is a
    ScriptError naming it."""

    def __init__(self, source: str = "<script>") -> None:
        self.source = source
        self.known: dict[bytes, Command] = dict(_COMMON_BYTES)

    def __call__(self, line: bytes, no: int) -> Command | None:
        """The command of ``line`` (line number ``no``), None for a blank or comment line."""
        command = self.known.get(line)
        if command is not None:
            return command
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            why = f"cannot read the script: not UTF-8 ({exc.reason})"
            raise ScriptError(self.source, no, "", why) from None
        command = parse_line(text, self.source, no)
        if command is not None and len(self.known) < _KNOWN_LINES:
            self.known[line] = command
        return command


Item = tuple[int, Refused | Settlement]


class Replayer:
    """Folds a stream of commands through the engine, in memory that does not grow.

    :meth:`run` yields each refusal at once and each settlement as soon as no later
    ``void`` can take it back: only the settlement of the last roll can be reversed
    (by a void before the next roll, wager or surrender), so one settlement is held
    back at most. ``state`` is the table after the commands run so far.
    """

    def __init__(self, engine: Engine, state: TableState | None = None) -> None:
        self.engine = engine
        self.state = state if state is not None else TableState()

    def run(self, commands: Iterable[tuple[int, Command]]) -> Iterator[Item]:
        """Apply ``commands`` in order; yield ``(line, Refused)`` and ``(line, Settlement)``."""
        apply = self.engine.apply
        state = self.state
        held: Item | None = None
        try:
            for no, command in commands:
                state, events = apply(state, command)
                if held is not None or len(events) != 1 or type(events[0]) is not RollAccepted:
                    held, out = _standing(state, no, events, held)
                    yield from out
                self.state = state
        finally:
            self.state = state
        if held is not None:
            yield held

    def run_lines(
        self, chunks: Iterable[Sequence[bytes]], source: str = "<script>"
    ) -> Iterator[Item]:
        """:meth:`run` over a script read as bytes, many lines at a time (each line
        ``\n``-terminated, as a binary file's ``readlines`` gives them): the same items in
        the same order. Each run of plain roll lines is swept at once
        (:meth:`Engine.sweep`), across hands: every settlement it made stands but one its
        last roll made, held back as :meth:`run` holds it; any other line is parsed and
        applied alone."""
        apply, sweep, rolls = self.engine.apply, self.engine.sweep, DICE_LINES
        read = LineCommands(source)
        state = self.state
        held: Item | None = None
        no = 0  # the lines before this chunk
        try:
            for lines in chunks:
                i, count = 0, len(lines)
                while i < count:
                    if lines[i] in rolls:
                        state, end, paid = sweep(state, lines, i)
                    else:
                        end = i
                    if end > i:
                        i = end
                        if held is not None:
                            yield held
                            held = None
                        if paid and paid[-1][1] is state.last_settlement:
                            last = paid.pop()  # a void can still take it back
                            held = (no + last[0] + 1, last[1])
                        for at, settled in paid:
                            yield no + at + 1, settled
                        continue
                    i += 1
                    command = read(lines[i - 1], no + i)
                    if command is None:
                        continue
                    state, events = apply(state, command)
                    held, out = _standing(state, no + i, events, held)
                    yield from out
                no += count
                self.state = state
        finally:
            self.state = state
        if held is not None:
            yield held


def _standing(
    state: TableState, no: int, events: Sequence[Event], held: Item | None
) -> tuple[Item | None, list[Item]]:
    """What a replay yields after the command on line ``no`` made ``events`` (``state``
    after them), and the settlement it holds back then: a refusal at once; a settlement
    held back until a later roll, wager or surrender puts it out of a void's reach (a
    void takes it back)."""
    out: list[Item] = []
    for event in events:
        kind = type(event)
        if kind is Settlement:
            if held is not None:
                out.append(held)
            held = (no, event)  # type: ignore[assignment]
        elif kind is RollVoided and event.reversed_settlement is not None:  # type: ignore[attr-defined]
            held = None  # the void took back the settlement it held
        elif kind is Refused:
            out.append((no, event))  # type: ignore[arg-type]
    if held is not None and state.last_settlement is not held[1]:
        out.append(held)  # no void can reach it now
        held = None
    return held, out


@dataclass
class ReplayResult:
    """The end state, the settlements that stood, and the refusals on the way."""

    state: TableState
    settlements: list[Settlement] = field(default_factory=list)
    refusals: list[tuple[int, Refused]] = field(default_factory=list)


def replay(
    engine: Engine,
    commands: Iterable[tuple[int, Command]],
    state: TableState | None = None,
    on_refusal: Any = None,
) -> ReplayResult:
    """Fold commands through the engine and collect what :class:`Replayer` yields."""
    replayer = Replayer(engine, state)
    result = ReplayResult(replayer.state)
    for no, event in replayer.run(commands):
        if isinstance(event, Settlement):
            result.settlements.append(event)
        else:
            result.refusals.append((no, event))
            if on_refusal is not None:
                on_refusal(no, event)
    result.state = replayer.state
    return result
