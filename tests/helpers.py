"""Small helpers shared by the engine tests: drive a table by script lines."""

from __future__ import annotations

from dataclasses import replace

from controller.config import FireBetRules
from controller.engine import Engine, Outcome
from controller.events import Event, Refused, Settlement
from controller.replay import parse_line
from controller.state import TableState


class Table:
    """A rules engine and its current state, driven with replay-script lines."""

    def __init__(self, **rules: object) -> None:
        self.engine = Engine(replace(FireBetRules(), **rules))  # type: ignore[arg-type]
        self.state = TableState()
        self.events: list[Event] = []
        self.settlements: list[Settlement] = []
        self.last: Outcome | None = None

    def do(self, *lines: str) -> Table:
        """Apply each line ('3 4', 'bet 3 5', 'void', ...) in turn."""
        for line in lines:
            for part in line.split(";"):
                command = parse_line(part)
                if command is None:
                    continue
                self.last = self.engine.apply(self.state, command)
                self.state = self.last.state
                self.events.extend(self.last.events)
                self.settlements.extend(e for e in self.last.events if isinstance(e, Settlement))
        return self

    def refusal(self) -> str | None:
        assert self.last is not None
        refused = self.last.refused
        return refused.reason if isinstance(refused, Refused) else None


def make_points(*points: int) -> str:
    """Script lines that establish and make each point in turn (no sevens)."""
    dice = {4: "2 2", 5: "2 3", 6: "3 3", 8: "4 4", 9: "4 5", 10: "5 5"}
    return ";".join(f"{dice[p]};{dice[p]}" for p in points)
