"""What the table's own engine decided for each record the floor link publishes.

The journal keeps commands, not events ("commands in, state out": docs/journal.md),
and the table's state after any record is the fold of its commands through the
table's engine, which is how recovery rebuilds it. The floor link does the same on
its own thread: it starts from the newest snapshot before the first record it
publishes, folds forward, and hands each ``command`` record's events (as
:meth:`Event.to_dict` gives them) to the message it publishes, so the floor's second
opinion has the table's answer to compare with its own.

The records this run of the service decides (from ``live_from`` on) are folded with
the rules the table's engine runs (``rules``), not with what the ``rules`` record
says: a table whose engine pays differently from the rules it journaled is exactly
what the floor must catch. Earlier records (a backlog from before a restart) are
folded with the rules their run journaled. Nothing here touches the engine thread.

When a record cannot be folded (a damaged journal) its events, and those of the
records after it, are None until a snapshot or a ``clear_halt`` gives the state
again: the link then publishes the record without events and the floor says "not
checked" for it rather than guessing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
from typing import Any

from controller.core.config import FireBetRules, rules_from_settings
from controller.core.engine import Engine
from controller.core.events import Event
from controller.core.state import TableState
from controller.journal import Journal, Record, canonical
from controller.journal.recipe import decode_body, to_ms

log = logging.getLogger("firebet.floor")

_BATCH = 256  # records read at once while catching the fold up to a record
_FIELDS: dict[type, tuple[str, ...]] = {}


def event_dict(event: Event) -> dict[str, Any]:
    """``event.to_dict()``, the same JSON, without ``dataclasses.asdict``'s deep copy of every
    field (which is most of the link's cost a record): only a nested event is converted."""
    cls = type(event)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(event))
    out: dict[str, Any] = {"event": event.name}
    for name in names:
        value = getattr(event, name)
        out[name] = dataclasses.asdict(value) if isinstance(value, Event) else value
    return out


class LinkFold:
    """The table's state as of one record, folded forward on the link's thread."""

    def __init__(self, rules: FireBetRules, *, live_from: int = 1) -> None:
        self.live_rules = rules
        self.live_from = live_from
        self._engines: dict[str, Engine] = {}
        self._engine = self._engine_for(rules)
        self._state: TableState | None = None  # None: not known (damage before a snapshot)
        self._at = -1  # the record whose state is held (-1: nothing folded yet)
        self._resync = False  # the fold disagreed with a snapshot: start again from it
        self.rebuilds = 0

    def _engine_for(self, rules: FireBetRules) -> Engine:
        key = repr(rules)  # the pay table is a dict: not hashable
        engine = self._engines.get(key)
        if engine is None:
            engine = self._engines[key] = Engine(rules)
        return engine

    def events(self, reader: Journal, record: Record) -> list[dict[str, Any]] | None:
        """The events the table's engine decided for ``record`` (None: not a command, or not
        derivable); the fold moves past it. Records may come in any order (a resend goes
        back): the fold is rebuilt from the newest snapshot before ``record``."""
        if record.record != self._at + 1 or self._resync:
            self._rebuild(reader, record.record)
        return self._step(record)

    def _rebuild(self, reader: Journal, number: int) -> None:
        """The state before record ``number``: the newest snapshot before it, folded forward."""
        self.rebuilds += 1
        self._resync = False
        anchor = reader.anchor_before(number)
        start, self._state = 0, TableState()
        if anchor is not None:
            start = anchor[0]
            try:
                self._state = TableState.from_dict(json.loads(anchor[1]))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.warning("floor link: the snapshot of record %d cannot be read: %r", start, exc)
                self._state = None
        self._engine = self._engine_for(self._rules_at(reader, start + 1))
        position = start
        while position < number - 1:
            batch = reader.batch(position, min(_BATCH, number - 1 - position))
            if not batch or batch[0].record >= number:
                break
            for rec in batch:
                if rec.record >= number:
                    break
                if rec.record != position + 1:
                    self._state = None  # records missing: the state is not known
                self._step(rec)
                position = rec.record
        if position != number - 1 or self._resync:
            self._state = None  # records missing, or a snapshot the fold disagrees with
            self._resync = False
        self._at = number - 1

    def _rules_at(self, reader: Journal, number: int) -> FireBetRules:
        """The rules the table decided record ``number`` under."""
        if number >= self.live_from:
            return self.live_rules
        found = reader.rules_before(number)
        if found is None:
            return FireBetRules()  # no start journaled its rules yet: the NJ defaults
        try:
            return rules_from_settings(found.data())
        except (KeyError, TypeError, ValueError, AttributeError):
            return FireBetRules()

    def _step(self, rec: Record) -> list[dict[str, Any]] | None:
        self._at = rec.record
        if rec.record == self.live_from:
            self._engine = self._engine_for(self.live_rules)
        kind = rec.kind
        events: list[dict[str, Any]] | None = None
        if kind == "command" and self._state is not None:
            try:
                at = to_ms(rec.at)
                if at is None:
                    raise ValueError(f"record {rec.record} has no readable time {rec.at!r}")
                command = decode_body(rec.payload, rec.actor, at, rec.at)
                outcome = self._engine.apply(self._state, command)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                log.warning("floor link: record %d cannot be folded: %r", rec.record, exc)
                self._state = None
            else:
                self._state = outcome.state
                events = [event_dict(e) for e in outcome.events]
        elif kind == "clear_halt":  # the game resumes from the state it names
            try:
                self._state = TableState.from_dict(rec.data()["resume_state"])
            except (KeyError, TypeError, ValueError, AttributeError):
                self._state = None
        elif kind == "rules" and rec.record < self.live_from:
            # a rules record that cannot be read: the rules before it stay, as at the floor
            with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
                self._engine = self._engine_for(rules_from_settings(rec.data()))
        if rec.snapshot is not None:
            self._check_snapshot(rec)
        return events

    def _check_snapshot(self, rec: Record) -> None:
        """A record with a snapshot: the fold must agree with it (else the next record
        starts again from the snapshot, which the table's recovery would use too)."""
        if self._state is not None:
            text = canonical(self._state.to_dict())
            if hashlib.sha256(text.encode()).hexdigest() == rec.snapshot:
                return
            log.warning("floor link: the fold disagrees with the snapshot of record %d", rec.record)
        self._resync = True  # rebuilt from this snapshot before the next record
