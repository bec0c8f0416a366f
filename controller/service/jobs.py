"""What goes on the service's one queue besides a driver's command, and the refusal log.

The engine thread (:meth:`controller.service.service.Service.serve`) takes a
:class:`~controller.core.commands.Command` from a driver, a :class:`Job` (a
control-socket request or a local tool's command, waiting for its reply), what the
background journal check found (:class:`Checked`, :class:`Halt`), or :class:`Stop`. See
``docs/architecture.md`` (one queue, one thread).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from controller.control.protocol import Request
from controller.core.commands import Command, Roll
from controller.core.events import (
    Acknowledged,
    CorrectionArmed,
    DuplicateRoll,
    Event,
    HandResult,
    ReaderFaultHolds,
    ReaderRestarted,
    RollCorrected,
    RollHeld,
    RollVoided,
    SeqConflict,
    Settlement,
    Surrendered,
    SurveillanceAlert,
)


class Stop:
    """Queue item: finish the command in hand and leave the loop."""


@dataclass(frozen=True)
class Halt:
    """Queue item: damage found off the engine thread; halt the table."""

    record: int | None
    reason: str


@dataclass(frozen=True)
class Checked:
    """Queue item: what the full journal check after ready found (``ok``, ``error``,
    ``damage`` at ``record`` for ``reason``); ``clears``: how many clear-halts the table
    had made when the check began (a check older than the newest clear-halt speaks of a
    journal that is no longer the table's, and is not acted on)."""

    outcome: str
    record: int | None
    reason: str
    clears: int = 0


@dataclass
class Job:
    """A control-socket request, or a command from a local tool, waiting for its reply.

    The engine never starts a job after its ``deadline`` (``time.monotonic()``): it
    answers "not done" instead, so a client told it failed is never proved wrong.
    """

    request: Request | None
    command: Command | None = None
    deadline: float = math.inf
    done: threading.Event = field(default_factory=threading.Event)
    reply: dict[str, Any] = field(default_factory=dict)
    future: Future[Mapping[str, Any]] = field(default_factory=Future)

    @property
    def what(self) -> str:
        """The request's op, or the command's name: how the job is named in a reply."""
        if self.request is not None:
            return self.request.op
        return self.command.name if self.command is not None else "request"

    def finish(self, reply: dict[str, Any]) -> None:
        """Hand the reply to whoever waits (any thread; the first reply counts)."""
        if self.done.is_set():
            return
        self.reply = reply
        self.done.set()
        self.future.set_result(reply)


class RepeatedRefusals:
    """Log a refused reader roll once, and count its repeats instead of logging each.

    The reader repeats an un-ACKed ROLL every 500 ms: a halted, paused or faulted
    table would otherwise write a line every half second (about 7,000 an hour).
    When another refusal comes, or the table takes a command again, the count of
    repeats is logged in one line.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self.key: tuple[Any, ...] | None = None
        self.repeats = 0
        self.total = 0  # every refused roll counted, repeats included

    def refused(self, key: tuple[Any, ...], level: int, text: str, *args: Any) -> None:
        """A refusal: logged when it is new, counted when it repeats the last one."""
        self.total += 1
        if key == self.key:
            self.repeats += 1
            return
        self.flush()
        self.key = key
        self.log.log(level, text, *args)

    def flush(self) -> None:
        """Log how often the last refusal repeated (if it did); forget it."""
        if self.repeats:
            self.log.warning("the refusal above was repeated %d more times", self.repeats)
        self.key, self.repeats = None, 0


def roll_key(command: Command) -> tuple[Any, ...]:
    """What makes a refused command "the same again" for :class:`RepeatedRefusals`."""
    if isinstance(command, Roll):
        return (command.name, command.source, command.seq, command.d1, command.d2)
    return (command.name,)


_READER_LOGGED = (SeqConflict, RollHeld, DuplicateRoll, ReaderRestarted, ReaderFaultHolds)
_GAME_LOGGED = (
    SurveillanceAlert,
    Settlement,
    RollVoided,
    CorrectionArmed,
    RollCorrected,
    Surrendered,
    Acknowledged,
)


def log_reader_events(logger: logging.Logger, events: Sequence[Event]) -> None:
    """Log what the table must hear about a reader's roll: a SEQ_CONFLICT, a roll held."""
    for event in events:
        if not isinstance(event, _READER_LOGGED):  # most rolls: one test, no line
            continue
        if isinstance(event, SeqConflict):
            logger.error(
                "dice reader SEQ_CONFLICT: ROLL seq %d came again with %d %d, recorded as "
                "%d %d; not applied, not ACKed; reader fault until it says HELLO",
                event.seq,
                event.d1,
                event.d2,
                event.recorded_d1,
                event.recorded_d2,
            )
        elif isinstance(event, RollHeld) and event.reason:
            logger.warning(
                "reader roll %d %d (seq %s) held as %d: %s (firebet held)",
                event.d1,
                event.d2,
                event.seq,
                event.number,
                event.reason,
            )
        elif isinstance(event, RollHeld):
            logger.warning(
                "reader roll %d %d (seq %s) held as %d: a roll was entered by hand, or the "
                "reader reports a fault; the dealer applies or discards it (firebet held)",
                event.d1,
                event.d2,
                event.seq,
                event.number,
            )
        elif isinstance(event, DuplicateRoll) and event.stale:
            logger.info(
                "reader ROLL seq %d is older than the last roll applied: a stale copy, "
                "ACKed, not applied",
                event.seq,
            )
        elif isinstance(event, ReaderRestarted):
            logger.info(
                "dice reader said HELLO: model %s, firmware %s (journaled)",
                event.model or "?",
                event.firmware or "?",
            )
        elif isinstance(event, ReaderFaultHolds):
            logger.warning(
                "dice reader reports the fault %s: its rolls are held for the dealer until "
                "it says OK",
                event.code,
            )


def _dollars(amount: int) -> str:
    return f"${amount:,}"


def settlement_text(e: Settlement) -> str:
    """``hand 3 settled: 4 different points (4, 5, 6, 8), win 24 to 1; #3 wins $120, #5
    lost $2``: one settlement in a line of the log."""
    made = ", ".join(map(str, e.points)) or "none"
    points = f"{e.unique_points} different point{'' if e.unique_points == 1 else 's'} ({made})"
    verdict = f"win {e.odds_to_one} to 1" if e.result == HandResult.WIN else "lose"
    paid = [
        f"#{p} wins {_dollars(won)}" if won else f"#{p} lost {_dollars(e.wagers.get(p, 0))}"
        for p, won in sorted(e.payouts.items())
    ]
    when = " at the 6th point" if e.immediate else ""
    return f"hand {e.hand} settled{when}: {points}, {verdict}; " + (", ".join(paid) or "no wagers")


def log_game_events(logger: logging.Logger, events: Sequence[Event]) -> None:
    """Log what the pit and surveillance look for in the service log: the surveillance
    alert, each settlement (every wager's payout), a void (and a settlement it reversed),
    a surrender, an acknowledgement. Called after the outputs and the ACK, never between
    a roll's commit and its ACK."""
    for e in events:
        if not isinstance(e, _GAME_LOGGED):  # most rolls: one test, no line
            continue
        if isinstance(e, SurveillanceAlert):
            logger.warning(
                "SURVEILLANCE ALERT: hand %d made its %d different points; surveillance "
                "confirms the fire bets and payouts (firebet ack when done)",
                e.hand,
                e.unique_points,
            )
        elif isinstance(e, Settlement):
            logger.info("%s", settlement_text(e))
        elif isinstance(e, RollVoided):
            logger.warning("roll %d %d voided by %s", e.d1, e.d2, e.actor)
            if e.reversed_settlement is not None:
                logger.warning(
                    "settlement of hand %d reversed by the void: the hand is back in play (%s)",
                    e.reversed_settlement.hand,
                    settlement_text(e.reversed_settlement),
                )
        elif isinstance(e, CorrectionArmed):
            logger.warning(
                "roll %d %d voided by %s for correction: the reader's rolls are held and "
                "wagers wait until the true dice are given (firebet correct D1 D2)",
                e.d1,
                e.d2,
                e.actor,
            )
        elif isinstance(e, RollCorrected):
            logger.warning(
                "roll corrected by %s: read as %d %d, taken as %d %d",
                e.actor,
                *e.was,
                *e.now,
            )
        elif isinstance(e, Surrendered):
            logger.info(
                "%s surrender by %s: shooter %d takes the dice; %s",
                e.surrender,
                e.actor,
                e.shooter,
                "the fire bets stay pending for the successor's loser 7"
                if e.pending
                else "no fire bets were riding",
            )
        elif isinstance(e, Acknowledged):
            logger.info("surveillance alert acknowledged by %s", e.actor)
