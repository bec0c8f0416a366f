"""The one meaning of the journal's records: the replay, pure over records.

A record means what it meant when it was journaled (SPEC section 6):

- a ``command`` record is the command, decided under the rules of the newest ``rules``
  record before it; the events are not stored, the rules engine gives them again from
  the state before the record ("commands in, state out": docs/journal.md);
- a ``rules`` record puts the rules it carries (the ``[table]`` and ``[firebet]``
  settings a start plays under) in force for every record after it; the records
  before the first one are decided under the rules the replay is started with;
- a ``clear_halt`` record resumes the game on the state it names (the state the chain
  proves: :mod:`controller.journal.walk` checks it before it adopts it);
- ``start``, ``mode`` and ``halt`` records change nothing in the game.

:class:`Replay` is where a replay stands (the state after the records so far and the
rules in force) and moves on record by record (:meth:`Replay.step`, which gives each
record's :class:`Step`: the state before and after it and its events) or, for a run of
commands whose events nobody asks for, all at once (:meth:`Replay.fold`, the fast path
of recovery and ``journal verify``: the same state). Recovery, ``journal verify``,
``clear-halt``, ``history``, ``journal migrate``, the floor link and the floor's second
opinion all replay the journal through it, so none of them can give a record another
meaning. Nothing here touches a file.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.commands import Command
from controller.core.config import FireBetRules, rules_changes
from controller.core.engine import Engine
from controller.core.events import Event
from controller.core.state import TableState
from controller.core.times import iso
from controller.journal.recipe import DECODE_ERRORS as DECODE_ERRORS  # re-exported
from controller.journal.recipe import RecordError as RecordError  # re-exported
from controller.journal.recipe import RecordKind, decode_body
from controller.journal.system import read_rules

ENGINES_KEPT = 16  # engines of distinct rules kept built (a table has one or two)
_engines: OrderedDict[str, Engine] = OrderedDict()


def engine_for(rules: FireBetRules) -> Engine:
    """The engine of ``rules``; the newest :data:`ENGINES_KEPT` distinct ones are kept
    built (building one drives the hand machine through every roll)."""
    key = rules.key()
    engine = _engines.get(key)
    if engine is None:
        engine = _engines[key] = Engine(rules)
        while len(_engines) > ENGINES_KEPT:
            _engines.popitem(last=False)
    else:
        _engines.move_to_end(key)
    return engine


@dataclass(frozen=True)
class Step:
    """One record replayed: the state before and after it and what it did."""

    record: int
    kind: str
    actor: str
    at: str
    before: TableState
    after: TableState
    events: tuple[Event, ...] = ()
    command: Command | None = None
    rules: FireBetRules | None = None  # a rules record: the rules it put in force
    changed: Mapping[str, Any] | None = None  # a rules record: what differs from before
    body: Any = None  # a rules or clear_halt record: its body, parsed
    decided_under: int | None = None  # a command: the rules record that decided it


def resume_state_of(body: str | Mapping[str, Any]) -> TableState:
    """The state a ``clear_halt`` record resumes on; a :class:`RecordError` when unreadable."""
    try:
        data = json.loads(body) if isinstance(body, str) else body
        return TableState.from_dict(data["resume_state"])
    except DECODE_ERRORS as exc:
        raise RecordError(f"the clear-halt record cannot be read: {exc!r}") from None


@dataclass(frozen=True)
class Held:
    """The rules a hand opened under, held for it while a newer ``rules`` record waits
    (journaled while its wagers rode: SPEC section 2, settled questions): ``record`` is
    the rules record that set them (None: the rules the replay started with)."""

    rules: FireBetRules
    record: int | None
    hand: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the floor's store keeps a replay's place)."""
        return {"rules": self.rules.to_dict(), "record": self.record, "hand": self.hand}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Held:
        return cls(FireBetRules.from_dict(data["rules"]), data.get("record"), int(data["hand"]))


class Replay:
    """Where a replay of one journal stands: the state after the records so far, and the
    rules in force (with the settings and number of the ``rules`` record that set them).

    A hand is decided under the rules in force when its betting opened: a ``rules``
    record journaled while wagers rode (its body names the hand: ``holds_for_hand``)
    waits, and the hand in play keeps its own rules (:attr:`held`) to its settlement;
    the newer rules decide from the next hand on. :attr:`rules`, :attr:`engine` and
    :attr:`rules_record` are those of the hand in play; :attr:`latest_record` the newest
    ``rules`` record, :attr:`pending` the one that waits."""

    __slots__ = ("_engine", "_record", "_rules", "held", "settings", "state")

    def __init__(
        self,
        rules: FireBetRules,
        state: TableState | None = None,
        *,
        rules_record: int | None = None,
        settings: Mapping[str, Any] | None = None,
        held: Held | None = None,
    ) -> None:
        """``rules``: in force until the first ``rules`` record (``rules_record`` and its
        ``settings``, when the replay starts after one: an anchor past a start; ``held``,
        when that record waits for the hand in play to end)."""
        self._rules = rules
        self._engine = engine_for(rules)
        self.state = state if state is not None else TableState()
        self._record = rules_record
        self.settings = dict(settings) if settings is not None else None
        self.held = held

    @property
    def holding(self) -> bool:
        """Whether the hand in play keeps older rules than the newest record's."""
        held = self.held
        return held is not None and self.state.hand == held.hand

    @property
    def rules(self) -> FireBetRules:
        """The rules the hand in play is decided under."""
        held = self.held
        return held.rules if held is not None and self.state.hand == held.hand else self._rules

    @property
    def engine(self) -> Engine:
        """The engine of :attr:`rules`."""
        held = self.held
        if held is not None and self.state.hand == held.hand:
            return engine_for(held.rules)
        return self._engine

    @property
    def rules_record(self) -> int | None:
        """The ``rules`` record that decides the hand in play (None: the defaults)."""
        held = self.held
        return held.record if held is not None and self.state.hand == held.hand else self._record

    @property
    def latest_record(self) -> int | None:
        """The newest ``rules`` record (in force from the next hand when :attr:`pending`)."""
        return self._record

    @property
    def latest_rules(self) -> FireBetRules:
        """The newest ``rules`` record's rules."""
        return self._rules

    @property
    def pending(self) -> int | None:
        """The ``rules`` record whose other rules wait for the hand in play to end (None:
        none)."""
        held = self.held
        if held is None or self.state.hand != held.hand or held.rules == self._rules:
            return None
        return self._record

    def copy(self) -> Replay:
        """A replay standing where this one stands (the state is a value: shared)."""
        return Replay(
            self._rules, self.state, rules_record=self._record, settings=self.settings,
            held=self.held,
        )  # fmt: skip

    # one record ---------------------------------------------------------------------
    def step(self, record: int, at: int, actor: str, kind: str, body: str) -> Step:
        """Replay one record (its stored fields: ``at`` in milliseconds, ``body`` the text): its
        :class:`Step`. Raises :class:`RecordError` (the replay stays where it was) when
        its meaning cannot be read."""
        at_text = iso(at)
        before = self.state
        if kind == RecordKind.COMMAND:
            decided_under = self.rules_record
            try:
                command = decode_body(body, actor, at, at_text)
                outcome = self.engine.apply(before, command)
            except DECODE_ERRORS as exc:
                raise RecordError(f"the record cannot be decoded: {exc!r}") from None
            self.state = outcome.state
            return Step(
                record, kind, actor, at_text, before, outcome.state, outcome.events, command,
                decided_under=decided_under,
            )  # fmt: skip
        if kind == RecordKind.RULES:
            found = read_rules(body)
            changed = self.take_rules(found.rules, found.settings, record, found.holds_for_hand)
            return Step(
                record, kind, actor, at_text, before, before, rules=found.rules,
                changed=changed, body=found.settings,
            )  # fmt: skip
        if kind == RecordKind.CLEAR_HALT:
            state = resume_state_of(body)
            self.state = state
            return Step(record, kind, actor, at_text, before, state, body=json.loads(body))
        if kind in (RecordKind.START, RecordKind.MODE, RecordKind.HALT):
            return Step(record, kind, actor, at_text, before, before)
        raise RecordError(f"unknown record kind {kind!r}")

    def take_rules(
        self,
        rules: FireBetRules,
        settings: Mapping[str, Any],
        record: int | None,
        holds_for_hand: int | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Put ``rules`` in force (a ``rules`` record's, with its ``settings``): what
        changed from the settings in force before (nothing, for the journal's first).
        ``holds_for_hand``: the record was journaled while that hand's wagers rode; while
        it is in play it keeps the rules it opened under (a second record for the same
        hand keeps them too)."""
        changed = rules_changes(self.settings, settings) if self.settings is not None else {}
        if holds_for_hand is not None and self.state.hand == holds_for_hand:
            if not self.holding:
                self.held = Held(self.rules, self.rules_record, holds_for_hand)
        else:
            self.held = None
        self._rules, self._engine = rules, engine_for(rules)
        self._record, self.settings = record, dict(settings)
        return changed

    def resume(self, state: TableState) -> None:
        """Stand on ``state`` (a ``clear_halt`` the chain proves)."""
        self.state = state

    # many commands at once ------------------------------------------------------------
    def fold(self, commands: Sequence[Command], start: int = 0) -> int:
        """Fold ``commands[start:]`` in order (the commands of consecutive ``command``
        records) into the state: the index of the first one that cannot be folded
        (``len(commands)`` when all were). The same state as :meth:`step` on each, without
        making the events of the rolls that only move the hand: each run of those is
        folded at once (:meth:`Engine.advance_moves`), any other command alone."""
        held = self.held
        if held is not None and self.state.hand <= held.hand:
            return self._fold_held(commands, start)
        advance_moves, advance = self.engine.advance_moves, self.engine.advance
        state = self.state
        i, count = start, len(commands)
        while i < count:
            try:
                state, end = advance_moves(state, commands, i)
            except DECODE_ERRORS:
                end = i
            if end == i:
                try:
                    state = advance(state, commands[i])
                except DECODE_ERRORS:
                    break
                end = i + 1
            i = end
        self.state = state
        return i

    def _fold_held(self, commands: Sequence[Command], start: int) -> int:
        """:meth:`fold` while a hand keeps its own rules: the engine is chosen again for
        each run (a run ends at the seven-out that starts the next hand)."""
        state = self.state
        i, count = start, len(commands)
        while i < count:
            engine = self.engine
            try:
                state, end = engine.advance_moves(state, commands, i)
            except DECODE_ERRORS:
                end = i
            if end == i:
                try:
                    state = engine.advance(state, commands[i])
                except DECODE_ERRORS:
                    break
                end = i + 1
            i = end
            self.state = state
        self.state = state
        return i
