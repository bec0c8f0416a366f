"""The hand machine: a ``transitions`` state machine (new_shooter / come_out / point).

The single source of the craps rules of one hand. The engine drives it once through
every (phase, point, total) at start-up and keeps the answers (:func:`decision_table`);
``python -m controller.cli.diagram`` draws ``docs/state-machine.md`` from it.
"""

from __future__ import annotations

import logging
from typing import Any

from transitions import Machine

from controller.core.config import POINT_NUMBERS
from controller.core.events import RollOutcome
from controller.core.state import Phase


class _QuietOverrides(logging.Filter):
    """Drop transitions' notice for each helper model_override=True leaves unbound (by design)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "due to model override policy" not in record.getMessage()


logging.getLogger("transitions.core").addFilter(_QuietOverrides())

NATURALS = (7, 11)
CRAPS = (2, 3, 12)


class HandModel:
    """The model the hand machine drives: the phase, the point and the roll in hand."""

    state: Phase

    def __init__(self) -> None:
        self.point: int | None = None
        self.total = 0
        self.outcome: RollOutcome | None = None

    # triggers: placeholders the machine replaces (model_override=True) -------
    def roll(self) -> bool:
        """Fire the roll trigger (bound by the hand machine)."""
        raise RuntimeError("not bound to a hand machine")

    def surrender(self) -> bool:
        """Fire the surrender trigger (bound by the hand machine)."""
        raise RuntimeError("not bound to a hand machine")

    # conditions -----------------------------------------------------------
    def is_natural(self) -> bool:
        return self.total in NATURALS

    def is_craps(self) -> bool:
        return self.total in CRAPS

    def is_point_number(self) -> bool:
        return self.total in POINT_NUMBERS

    def makes_point(self) -> bool:
        return self.total == self.point

    def is_seven(self) -> bool:
        return self.total == 7

    # effects on the model only (no I/O) -------------------------------------
    def on_natural(self) -> None:
        self.outcome = RollOutcome.NATURAL

    def on_craps(self) -> None:
        self.outcome = RollOutcome.CRAPS

    def on_point_established(self) -> None:
        self.outcome, self.point = RollOutcome.POINT_ESTABLISHED, self.total

    def on_point_made(self) -> None:
        self.outcome, self.point = RollOutcome.POINT_MADE, None

    def on_seven_out(self) -> None:
        self.outcome, self.point = RollOutcome.SEVEN_OUT, None

    def on_no_decision(self) -> None:
        self.outcome = RollOutcome.NO_DECISION

    def on_surrender(self) -> None:
        """The shooter gave up the dice; a point that was on stays on (the successor
        throws for it, as in craps: SPEC section 2, settled questions)."""
        self.outcome = RollOutcome.SURRENDER


COME_OUT_PHASES = [Phase.NEW_SHOOTER, Phase.COME_OUT]

HAND_TRANSITIONS: list[dict[str, Any]] = [
    {"trigger": "roll", "source": COME_OUT_PHASES, "dest": Phase.COME_OUT,
     "conditions": "is_natural", "after": "on_natural"},
    {"trigger": "roll", "source": COME_OUT_PHASES, "dest": Phase.COME_OUT,
     "conditions": "is_craps", "after": "on_craps"},
    {"trigger": "roll", "source": COME_OUT_PHASES, "dest": Phase.POINT,
     "conditions": "is_point_number", "after": "on_point_established"},
    {"trigger": "roll", "source": Phase.POINT, "dest": Phase.COME_OUT,
     "conditions": "makes_point", "after": "on_point_made"},
    {"trigger": "roll", "source": Phase.POINT, "dest": Phase.NEW_SHOOTER,
     "conditions": "is_seven", "after": "on_seven_out"},
    {"trigger": "roll", "source": Phase.POINT, "dest": None, "after": "on_no_decision"},
    {"trigger": "surrender", "source": COME_OUT_PHASES, "dest": Phase.NEW_SHOOTER,
     "after": "on_surrender"},
    {"trigger": "surrender", "source": Phase.POINT, "dest": None, "after": "on_surrender"},
]  # fmt: skip


def build_hand_machine(model: HandModel | None = None, **kwargs: Any) -> Machine:
    """The hand's state machine; ``kwargs`` go to the Machine (e.g. a diagram class)."""
    cls = kwargs.pop("machine_class", Machine)
    machine: Machine = cls(
        model=model if model is not None else HandModel(),
        states=Phase,
        transitions=HAND_TRANSITIONS,
        initial=Phase.NEW_SHOOTER,
        auto_transitions=False,
        model_override=True,
        **kwargs,
    )
    return machine


RollTable = dict[tuple[Phase, int | None, int], tuple[str, str, int | None]]


def decision_table() -> RollTable:
    """(phase, point, total) -> (outcome, next phase's name, next point), read off the machine."""
    model = HandModel()
    machine = build_hand_machine(model)
    table: RollTable = {}
    starts: list[tuple[Phase, int | None]] = [(Phase.NEW_SHOOTER, None), (Phase.COME_OUT, None)]
    starts += [(Phase.POINT, p) for p in POINT_NUMBERS]
    for phase, point in starts:
        for total in range(2, 13):
            machine.set_state(phase, model)
            model.point, model.total, model.outcome = point, total, None
            if not model.roll():  # pragma: no cover - every total is decided
                raise RuntimeError(f"hand machine has no rule for {total} in {phase}")
            decided: RollOutcome | None = model.outcome  # (set by the roll's callback)
            if decided is None:  # pragma: no cover - every rule names its outcome
                raise RuntimeError(f"hand machine gave no outcome for {total} in {phase}")
            table[(phase, point, total)] = (decided, model.state.value, model.point)
    return table


# (phase, point, die 1, die 2) -> (total, outcome, next phase's name, next point)
DiceTable = dict[tuple[Phase, int | None, int, int], tuple[int, str, str, int | None]]


def dice_table(table: RollTable) -> DiceTable:
    """The machine's table again, keyed the way rolls come, for every legal pair of dice."""
    dice: DiceTable = {}
    for (phase, point, total), (outcome, after, next_point) in table.items():
        for d1 in range(max(1, total - 6), min(6, total - 1) + 1):
            dice[(phase, point, d1, total - d1)] = (total, outcome, after, next_point)
    return dice
