"""The walk along the chain: check each record's seal, fold its command, note damage.

Recovery walks from the newest snapshot, ``journal verify`` and ``clear-halt``
from the genesis record. The walk keeps the *verified prefix*: the records
from genesis whose seals, snapshots and commands all check, with the state
after them. Past the first damage it still checks seals (to report every
problem and to find a ``clear_halt`` record) but folds nothing until a
``clear_halt`` whose resume point and state the prefix proves.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.core.commands import Command
from controller.core.engine import Engine
from controller.core.state import TableState
from controller.journal.recipe import (
    GENESIS,
    KINDS,
    canonical,
    decode_body,
    decode_command,
    iso,
    seal,
    sealer,
)
from controller.journal.store import Row

Problem = tuple[int | None, str]
_RUN = 512  # sealed records folded together at most (the walk's memory stays flat)


@dataclass
class Walk:
    """A walk in progress: the verified prefix so far and the problems after it."""

    key: bytes
    engine: Engine
    state: TableState = field(default_factory=TableState)
    prev: bytes = GENESIS  # the stored MAC of the record before the next one
    expect: int = 1
    good: int = 0  # the last record of the verified prefix
    problems: list[Problem] = field(default_factory=list)
    acknowledged: list[tuple[int | None, str, int]] = field(default_factory=list)
    snapshots: int = 0
    records: int = 0

    @classmethod
    def from_anchor(
        cls, key: bytes, engine: Engine, row: Row, prev: bytes, state_text: str | None
    ) -> tuple[Walk, Problem | None]:
        """A walk starting after the snapshot at ``row`` (whose predecessor's MAC is ``prev``)."""
        walk = cls(key, engine, prev=prev, expect=row.record)
        if state_text is None:
            return walk, (row.record, f"the snapshot of record {row.record} is missing")
        if seal(key, prev, *row[:5], state_text) != row.mac:
            return walk, (row.record, _bad_seal(row))
        try:
            walk.state = TableState.from_dict(json.loads(state_text))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return walk, (row.record, f"the snapshot of record {row.record} cannot be read: {exc}")
        walk.prev = row.mac
        walk.expect, walk.good = row.record + 1, row.record
        return walk, None

    def run(
        self, rows: Iterable[tuple[Any, ...]], snaps: Mapping[int, str], *, stop_at_damage: bool
    ) -> None:
        """Walk ``rows`` (plain tuples in :class:`Row` order) in order; ``snaps`` is the
        state text by record. Command records without a snapshot, in an intact chain, take
        the fast path: the same checks as :meth:`step` (each seal, then the commands folded
        through the rules), with the key's pads hashed once (:func:`sealer`) and the
        commands of up to ``_RUN`` sealed records folded together (:meth:`_fold_run`)."""
        mac_of = sealer(self.key)
        problems = self.problems
        rows = iter(rows)
        while True:
            prev, expect = self.prev, self.expect
            sealed: list[tuple[Any, ...]] = []
            commands: list[Command] = []
            slow: tuple[Any, ...] | None = None
            for raw in rows:
                number, at, actor, kind, body, snap, mac = raw
                if not snap and number == expect and kind == "command" and not problems:
                    at_text = iso(at)
                    text = f"{number}\n{at_text}\n{actor}\ncommand\n0\n{body}"
                    if mac_of(prev + text.encode()) == mac:
                        try:
                            command = decode_body(body, actor, at, at_text)
                        except (KeyError, TypeError, ValueError, AttributeError):
                            pass  # the slow path says what is wrong
                        else:
                            sealed.append(raw)
                            commands.append(command)
                            prev, expect = mac, number + 1
                            if len(sealed) < _RUN:
                                continue
                            break
                slow = raw
                break
            else:
                if not sealed:
                    return  # every row walked
            if sealed and not self._fold_run(sealed, commands, snaps, stop_at_damage):
                return
            if slow is not None:
                self.step(Row(*slow), snaps.get(slow[0]))
                if stop_at_damage and problems:
                    return

    def _fold_run(
        self,
        sealed: list[tuple[Any, ...]],
        commands: list[Command],
        snaps: Mapping[int, str],
        stop_at_damage: bool,
    ) -> bool:
        """Fold the commands of ``sealed`` (consecutive records whose seals check, after the
        walk so far) into the state: each run of rolls that only move the hand at once
        (:meth:`Engine.advance_moves`), any other command alone. A command the rules cannot
        fold sends its record to :meth:`step` (which names the damage) and the records
        after it along the walk again. False when the walk should stop there."""
        advance_moves, advance = self.engine.advance_moves, self.engine.advance
        state = self.state
        i, count = 0, len(commands)
        while i < count:
            try:
                state, end = advance_moves(state, commands, i)
            except (KeyError, TypeError, ValueError, AttributeError):
                end = i
            if end == i:
                try:
                    state = advance(state, commands[i])
                except (KeyError, TypeError, ValueError, AttributeError):
                    break
                end = i + 1
            i = end
        self.state = state
        if i:
            last = sealed[i - 1]
            self.records += i
            self.prev = last[6]
            self.good, self.expect = last[0], last[0] + 1
        if i == count:
            return True
        self.step(Row(*sealed[i]), None)
        if stop_at_damage and self.problems:
            return False
        self.run(sealed[i + 1 :], snaps, stop_at_damage=stop_at_damage)
        return not (stop_at_damage and self.problems)

    def step(self, row: Row, state_text: str | None) -> None:
        """Check one record and fold it into the state (or note what is wrong)."""
        number = row.record
        self.records += 1
        if number != self.expect:
            self.problems.append((self.expect, _gap(self.expect, number - 1)))
        if row.snap:
            self.snapshots += 1
        if row.snap and state_text is None:
            self.problems.append((number, f"the snapshot of record {number} is missing"))
        elif seal(self.key, self.prev, *row[:5], state_text if row.snap else None) != row.mac:
            if number == self.expect:
                self.problems.append((number, _bad_seal(row)))
        elif row.kind == "clear_halt":
            self._acknowledge(row, state_text)
        elif not self.problems:
            problem = self._fold(row, state_text)
            if problem is None:
                self.good = number
            else:
                self.problems.append((number, problem))
        self.prev, self.expect = row.mac, number + 1

    def _fold(self, row: Row, state_text: str | None) -> str | None:
        kind = row.kind
        try:
            if kind == "command":
                command = decode_command(json.loads(row.body), row.actor, row.at)
                after = self.engine.apply(self.state, command).state
            elif kind in KINDS:
                after = self.state
            else:
                return f"unknown record kind {kind!r}"
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            return f"the record cannot be decoded: {exc!r}"
        if state_text is not None and row.snap and state_text != canonical(after.to_dict()):
            return f"the snapshot of record {row.record} disagrees with the records before it"
        self.state = after
        return None

    def _acknowledge(self, row: Row, state_text: str | None) -> None:
        """A sealed clear-halt: it acknowledges the damage before it when it resumed from
        exactly the verified prefix and its state (it is the new anchor)."""
        try:
            data: dict[str, Any] = json.loads(row.body)
            resume_from = int(data["resume_from"])
            resume = canonical(data["resume_state"])
        except (KeyError, TypeError, ValueError) as exc:
            self.problems.append((row.record, f"the clear-halt record cannot be decoded: {exc!r}"))
            return
        if state_text is not None and state_text != resume:
            self.problems.append((row.record, "the clear-halt's snapshot is not its resume state"))
            return
        if resume_from != self.good or resume != canonical(self.state.to_dict()):
            self.problems.append(
                (row.record, f"the clear-halt resumed from record {resume_from}, which the chain "
                 f"does not prove (the verified prefix ends at record {self.good})")
            )  # fmt: skip
            return
        self.acknowledged += [(r, why, row.record) for r, why in self.problems]
        self.problems.clear()
        self.good = row.record
        self.state = TableState.from_dict(json.loads(resume))


def _gap(first: int, last: int) -> str:
    if first == last:
        return f"record {first} is missing"
    return f"records {first}..{last} are missing"


def _bad_seal(row: Row) -> str:
    if row.snap:
        return (
            f"record {row.record} or its snapshot does not match its seal "
            "(edited, torn, or written without the table's key)"
        )
    return (
        f"record {row.record} does not match its seal "
        "(edited, torn, or written without the table's key)"
    )
