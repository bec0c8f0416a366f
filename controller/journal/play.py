"""The one decide-and-journal step: a command decided by the pure engine and journaled.

The service's table (:meth:`controller.service.table.Table.record`) takes every command
through :func:`decide`, and so do the tests and tools that drive a journal without the
service: the command is decided by the engine of the rules in force on the state the
records made (the :class:`~controller.journal.replay.Replay`), journaled durably with
the state after it, and only then does the replay stand on that state; the events go
back to the caller for the outputs (lamps, the reader's ACK, a reply). Not journaled: a
copy of a roll already applied (the reader's retransmission: the original is durable), a
reader's sequence sync (an old record's) or a protocol-3 HELLO that changed nothing (a
repeat of the session held), and a refused HELLO of a past session or roll past the
next number (nothing changes; the reader is told by a NAK), and a floor confirm of a hand
already confirmed (a repeat of the command id, or a second console's: the first is on
record; the floor hears the table's state).
:func:`journal_rules` is the same step for a ``rules`` record: journaled (its body by
:mod:`controller.journal.system`), then in force.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.core.commands import Command, ReaderHello, ReaderSync
from controller.core.config import FireBetRules
from controller.core.engine import Outcome
from controller.core.errors import Refusal
from controller.journal.journal import Journal
from controller.journal.recipe import RecordKind
from controller.journal.record import Record
from controller.journal.replay import Replay
from controller.journal.system import rules_body


@dataclass(frozen=True)
class Decided:
    """What :func:`decide` did: the engine's outcome and the record it was journaled as
    (None: a copy of a roll already applied, or a sync with nothing to keep)."""

    outcome: Outcome
    record: Record | None


def decide(journal: Journal, replay: Replay, command: Command) -> Decided:
    """Decide ``command`` on ``replay``'s state with the engine of its rules, journal it
    (durable when this returns), then move ``replay`` on. Raises what
    :meth:`Journal.append <controller.journal.journal.Journal.append>` raises (halted,
    not writable): then nothing was journaled and ``replay`` stands where it stood."""
    outcome = replay.engine.apply(replay.state, command)
    events = outcome.events
    copy = bool(events) and not any(e.journaled for e in events)  # a DuplicateRoll
    refused = outcome.refused
    in_step = (isinstance(command, ReaderSync | ReaderHello) and not events) or (
        refused is not None
        and refused.code in (Refusal.READER_SESSION, Refusal.READER_GAP, Refusal.ALREADY_CONFIRMED)
    )  # nothing to keep
    record = None if copy or in_step else journal.append(command, outcome.state)
    replay.resume(outcome.state)
    return Decided(outcome, record)


def journal_rules(
    journal: Journal,
    replay: Replay,
    rules: FireBetRules,
    settings: Mapping[str, Any],
    *,
    config: str | None,
    started_by: str,
    actor: str = "service",
) -> tuple[Record, dict[str, dict[str, Any]]]:
    """Journal a ``rules`` record of ``settings`` (``rules``, as the engine takes them;
    who started the service with which ``config`` file), then put it in force in
    ``replay``: the record and what changed since the rules in force before. Journaled
    while wagers ride, the rules wait for the next hand (``holds_for_hand``): the hand in
    play keeps the rules it opened under (SPEC section 2, settled questions)."""
    changed = replay.copy().take_rules(rules, settings, None)
    state = replay.state
    holds = state.hand if state.bets else None
    body = rules_body(
        settings, changed=changed, previous=replay.latest_record, config=config,
        started_by=started_by, holds_for_hand=holds,
    )  # fmt: skip
    record = journal.append_system(RecordKind.RULES, actor=actor, state=state, payload=body)
    replay.take_rules(rules, settings, record.record, holds)
    return record, changed
