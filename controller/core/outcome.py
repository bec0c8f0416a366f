"""What one command did: the next state and the events that lead there."""

from __future__ import annotations

from typing import NamedTuple

from controller.core.events import Event, Refused
from controller.core.state import TableState


class Outcome(NamedTuple):
    """What one command did: the next state and the events that lead there."""

    state: TableState
    events: tuple[Event, ...]

    @property
    def refused(self) -> Refused | None:
        for e in self.events:
            if isinstance(e, Refused):
                return e
        return None


def outcome(pair: tuple[TableState, tuple[Event, ...]]) -> Outcome:
    """An Outcome without NamedTuple's keyword-handling constructor (the roll path's cost)."""
    return tuple.__new__(Outcome, pair)
