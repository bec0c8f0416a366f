"""What the table decided for each record the floor link publishes, replayed on the link's
thread.

The journal keeps commands, not events ("commands in, state out": docs/journal.md); what
a record decided is what the one replay of the journal gives for it
(:mod:`controller.journal.replay`: under the rules in force when it was journaled, as
recovery rebuilds the table). The link replays on its own thread: it starts from the
newest snapshot before the first record it publishes, goes on record by record, and
hands each ``command`` record's events (as :meth:`Event.to_dict` gives them) to the
message it publishes, so the floor's second opinion has the table's answer to compare
with its own. Nothing here touches the engine thread.

When a record cannot be replayed (a damaged journal) its events, and those of the
records after it, are None until a snapshot or a ``clear_halt`` gives the state again:
the link then publishes the record without events and the floor says "not checked" for
it rather than guessing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Sequence
from typing import Any

from controller.core.config import FireBetRules
from controller.core.events import Event, RollAccepted, RollVoided
from controller.core.times import to_ms
from controller.journal import Journal, Record, RecordKind, Replay, canonical
from controller.journal.replay import RecordError
from controller.journal.walk import replay_before

log = logging.getLogger("firebet.floor")

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
    """The table's replay as of one record, moved forward on the link's thread."""

    def __init__(self, rules: FireBetRules) -> None:
        """``rules``: in force before the journal's first ``rules`` record."""
        self.rules = rules
        self._replay = Replay(rules)
        self._known = True  # False: the state is not known (damage before a snapshot)
        self._at = -1  # the record the replay stands after (-1: nothing replayed yet)
        self._resync = False  # the replay disagreed with a snapshot: start again from it
        self._last_roll: int | None = None  # the record of the last roll accepted (a void's)
        self.rebuilds = 0

    def events(self, reader: Journal, record: Record) -> list[dict[str, Any]] | None:
        """The events the table decided for ``record`` (None: not a command, or not
        derivable); the replay moves past it. Records may come in any order (a resend goes
        back): the replay is rebuilt from the newest snapshot before ``record``."""
        if record.record != self._at + 1 or self._resync:
            self.rebuilds += 1
            self._last_roll = None  # known again once the replay passes a roll
            with reader.view() as db:
                self._replay, self._known = replay_before(
                    db, self.rules, record.record, self._note_rolls
                )
            self._resync = False
        return self._step(record)

    def _step(self, rec: Record) -> list[dict[str, Any]] | None:
        self._at = rec.record
        at = to_ms(rec.at)
        events: list[dict[str, Any]] | None = None
        try:
            if at is None:
                raise RecordError(f"record {rec.record} has no readable time {rec.at!r}")
            step = self._replay.step(rec.record, at, rec.actor, rec.kind, rec.payload)
        except RecordError as exc:
            log.warning("floor link: record %d cannot be replayed: %s", rec.record, exc)
            self._known = False
        else:
            if rec.kind == RecordKind.CLEAR_HALT:
                self._known = True  # the game resumes from the state it names
            elif rec.kind == RecordKind.COMMAND and self._known:
                events = [self._named(e) for e in step.events]
            self._note_rolls(rec.record, step.events)
        if rec.snapshot is not None:
            self._check_snapshot(rec)
        return events

    def _note_rolls(self, record: int, events: Sequence[Event]) -> None:
        """Keep the record of the last roll accepted: the one a void undoes."""
        if any(isinstance(e, RollAccepted) for e in events):
            self._last_roll = record

    def _named(self, event: Event) -> dict[str, Any]:
        """The event's dict; a void's with the record of the roll it undid (None when the
        replay began after that roll: at a snapshot on the roll's own record)."""
        out = event_dict(event)
        if isinstance(event, RollVoided) and event.record is None:
            out["record"] = self._last_roll
        return out

    def _check_snapshot(self, rec: Record) -> None:
        """A record with a snapshot: the replay must agree with it (else the next record
        starts again from the snapshot, which the table's recovery would use too)."""
        if self._known:
            text = canonical(self._replay.state.to_dict())
            if hashlib.sha256(text.encode()).hexdigest() == rec.snapshot:
                return
            log.warning(
                "floor link: the replay disagrees with the snapshot of record %d", rec.record
            )
        self._resync = True  # rebuilt from this snapshot before the next record
