"""The table as the engine thread owns it: the state, the rules in force and the mode.

:class:`Table` is the one owner of the game on the service's engine thread
(:class:`~controller.service.service.Service`): where the replay of the journal stands
(the state after the last record and the rules in force), the mode (halted, storage
fault, diagnostics, reader fault), and the snapshot it publishes for every other thread.
It decides each command with the pure rules engine, journals it durably, and only then
changes the outputs (lamps, the reader's ACK), in that order (docs/architecture.md, the
path of a roll). Nothing here folds the journal: recovery did that once, at start
(:func:`controller.journal.recover`), and every command moves the state on by itself.

Rules: each start journals the rules it plays under (a ``rules`` record naming what
changed since the rules before, and who started the service with which file) before any
command is decided under them; an older record keeps the meaning it was journaled with
(SPEC section 6). A start that cannot journal them (a storage fault) journals them before
its first command once it can.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from controller.control.protocol import identify
from controller.core.commands import (
    Ack,
    ApplyHeld,
    Command,
    Correct,
    DiscardHeld,
    ReaderFault,
    ReaderFaultCode,
    ReaderHello,
    ReaderOk,
    Roll,
    RollSource,
    Surrender,
    Void,
)
from controller.core.config import Config, rules_settings
from controller.core.engine import Outcome
from controller.core.errors import FirebetError, JournalIntegrityError, Refusal, TableHalted
from controller.core.events import (
    DuplicateRoll,
    ReaderRestarted,
    RollAccepted,
    RollHeld,
    RollVoided,
    SeqConflict,
)
from controller.core.lamps import LightsView, Mode, Outputs, desired_outputs
from controller.core.lamps import view_from_state as lights_view
from controller.core.state import TableState
from controller.journal import (
    Halt,
    Journal,
    JournalHalted,
    JournalWriteError,
    ReadOnly,
    RecordKind,
    Replay,
    clear_halt,
    describe_clear,
    preview_clear_halt,
    recover,
)
from controller.journal.play import decide, journal_rules
from controller.journal.proof import Break
from controller.journal.system import (
    diagnostics_body,
    pending_why,
    start_body,
    storage_over_body,
)
from controller.journal.walk import replay_before
from controller.service import notify
from controller.service.integrity import ProgramCheck
from controller.service.jobs import (
    RepeatedRefusals,
    log_game_events,
    log_reader_events,
    roll_key,
)
from controller.service.status import (
    SEQ_CONFLICT,
    Published,
    ShownSettlement,
    status_line,
    verified_state,
)
from drivers.codec import NakReason
from drivers.lights import MarkerLights
from drivers.reader import DiceReader

log = logging.getLogger("firebet.service")

GAME_COMMANDS = (Roll, Void, Correct, Surrender, Ack, ApplyHeld, DiscardHeld)


class Table:
    """The game and the mode of one table, on the engine thread (see the module docstring).

    Other threads read only :attr:`published` (replaced whole) and :attr:`full_check`.
    """

    def __init__(
        self,
        config: Config,
        journal: Journal,
        program: ProgramCheck,
        *,
        lights: MarkerLights | None = None,
        reader: DiceReader | None = None,
        on_change: Callable[[Published], None] | None = None,
        state_changed: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.journal = journal
        self.program = program
        self.lights = lights
        self.reader = reader
        self.on_change = on_change
        self.state_changed = state_changed  # the floor link's flag (set, never waited on)
        self.replay = Replay(config.firebet)
        self.reader_fault: str | None = None if reader is not None else ReaderFaultCode.NO_READER
        self.diagnostics = False
        self.storage_fault: str | None = None
        # why a journal the storage probe opened again could not be written, as last
        # logged (said once a cause: the rolls refused meanwhile reword the fault)
        self.unwritable_said: str | None = None
        self.full_check: str | None = None  # "running", "ok" or what it found
        self.clears = 0  # clear-halts made since start (a full check runs again after each)
        self.rules_pending = False  # this start's rules are not journaled yet
        self.rules_shown: dict[str, Any] | None = None  # the rules in force, for status
        self._pending_seen: int | None = None  # a rules record waiting, as last published
        self.settlements = ShownSettlement()
        self.last_roll_record: int | None = None  # the record of the last roll accepted here
        # the record of the HELLO that named the reader's model and firmware (from the
        # journal at start), and whether that HELLO was heard since this start
        self.hello_record: int | None = None
        self.hello_heard = False
        self.published: Published | None = None  # the engine thread's last snapshot
        self.refusals = RepeatedRefusals(log)
        # the reader's copies ACKed and not applied since this start: of the last roll
        # (``repeated``) and of an older one (``stale``): status --json reader.copies
        self.copies: dict[str, int] = {"repeated": 0, "stale": 0}
        # the halt and the state the records before its break give (None: not known)
        self._proven: tuple[Halt, TableState | None] | None = None
        self.systemd_status = notify.StatusLine()  # systemd's, sent on a change (rate-limited)
        self._shown: tuple[LightsView, Outputs] | None = None  # the lamps' view and outputs now

    # what the table is now ----------------------------------------------------------------
    @property
    def state(self) -> TableState:
        """The table's state after the last record."""
        return self.replay.state

    @property
    def program_problem(self) -> str | None:
        """Why the program failed its integrity check at start (None: it passed)."""
        return None if self.program.ok else self.program.describe()

    @property
    def mode(self) -> Mode:
        if self.program_problem is not None or self.journal.halted is not None:
            return Mode.HALTED
        if self.storage_fault is not None:
            return Mode.STORAGE_FAULT
        if self.diagnostics:
            return Mode.DIAGNOSTICS
        if self.reader_fault_code is not None:
            return Mode.READER_FAULT
        return Mode.RUNNING

    @property
    def reader_fault_code(self) -> str | None:
        """The reader fault in force: the driver's, a journaled SEQ_CONFLICT (until HELLO),
        or the reader's own FAULT journaled before this start (until its OK or HELLO)."""
        if self.reader_fault is not None:
            return self.reader_fault
        if self.state.reader_conflict is not None:
            return SEQ_CONFLICT
        if self.state.reader_faulted:  # journaled before a restart, until its OK or HELLO
            return ReaderFaultCode.FAULT
        return None

    # start-up -----------------------------------------------------------------------------
    def recover(self) -> None:
        """Replay the journal's tail (a damaged journal halts by itself); a read-only file
        system is a storage fault."""
        recovered = recover(self.journal, self.config.firebet)
        self.replay = recovered.replay
        if not self.hello_heard:  # (a HELLO heard since this start is newer than any)
            state = self.replay.state
            self.hello_record = self.journal.last_hello(state.reader_model, state.reader_firmware)
        if recovered.halted is not None:
            log.error("journal halted: %s", recovered.halted.describe())
        elif self.journal.read_only is ReadOnly.FILE_SYSTEM:
            self.storage_fault = self.journal.read_only_reason()
            log.error(
                "storage fault: %s; rolls are refused until it is writable", self.storage_fault
            )

    def journal_start(self) -> None:
        """Journal this start and the rules it plays under (not while halted: then after
        the clear-halt, before the first command)."""
        self.rules_pending = True
        if self.journal.halted is not None:
            return
        try:
            self.journal.append_system(
                RecordKind.START,
                actor="service",
                state=self.state,
                payload=start_body(os.getpid(), self.program.to_dict()),
            )
            self._journal_rules()
        except JournalWriteError as exc:
            self.storage_fault = exc.reason
        self.refresh(announce=False)  # the status shows the rules in force from now on

    def _journal_rules(self) -> None:
        """The ``rules`` record of this start, what changed since the rules in force, and
        who started the service with which file; the rules are in force from it on."""
        settings = rules_settings(self.config) | {"program": self.program.digest}
        record, changed = journal_rules(
            self.journal,
            self.replay,
            self.config.firebet,
            settings,
            config=self.config.source,
            started_by=identify(os.getuid(), os.getgid()).actor,
        )
        self.rules_pending = False
        self.rules_shown = {"record": record.record, "at": record.at, "changed": changed}
        if changed:
            log.warning(
                "the rules changed since the last start (record %d): %s",
                record.record,
                "; ".join(f"{k} was {v['was']!r}, now {v['now']!r}" for k, v in changed.items()),
            )
        if self.replay.pending is not None:
            log.warning(
                "a rules change is pending (record %d): %s",
                record.record,
                pending_why(self.replay.state.hand, self.replay.rules_record),
            )

    # commands -------------------------------------------------------------------------------
    def handle(self, command: Command) -> Outcome | None:
        """A driver's command: journal it, then outputs, then the reader's ACK."""
        if isinstance(command, ReaderFault):
            self.reader_fault = command.code
        elif isinstance(command, ReaderOk):
            self.reader_fault = None
        if self.mode == Mode.DIAGNOSTICS and isinstance(command, GAME_COMMANDS):
            self.refusals.refused(
                ("diagnostics", *roll_key(command)),
                logging.INFO,
                "diagnostics: %s paused (not applied, not ACKed)",
                command.name,
            )
            return None
        conflict = self.state.reader_conflict
        if (
            isinstance(command, Roll)
            and command.source == RollSource.READER
            and conflict is not None
        ):
            self.refusals.refused(  # not journaled again: the conflict is on record
                (SEQ_CONFLICT, *roll_key(command)),
                logging.WARNING,
                "reader roll %s %s (seq %s) refused: the reader is in SEQ_CONFLICT fault "
                "until it restarts (HELLO)",
                command.d1,
                command.d2,
                command.seq,
            )
            if self.reader is not None and command.seq is not None:
                self.reader.refuse(command.seq, NakReason.CONFLICT)  # protocol 3: start anew
            return None
        try:
            outcome = self.record(command)
        except FirebetError as exc:
            self.refusals.refused(
                ("refused", *roll_key(command)),
                logging.WARNING,
                "%s not applied: %s",
                command.name,
                exc,
            )
            self.refresh()
            self._answer_hello(command, None)
            return None
        self._answer_hello(command, outcome)
        refused = outcome.refused
        if refused is not None and refused.code == Refusal.READER_GAP and self.reader:
            assert isinstance(command, Roll) and command.seq is not None
            self.refusals.refused(
                ("gap", *roll_key(command)), logging.WARNING, "%s", refused.reason
            )
            self.reader.refuse(command.seq, NakReason.GAP)
        elif refused is not None and refused.code == Refusal.READER_SESSION:
            self.refusals.refused(("session", command.name), logging.WARNING, "%s", refused.reason)
        if not isinstance(command, ReaderFault | ReaderOk):
            self.refusals.flush()
        self.refresh(announce=False)
        recorded = False
        for e in outcome.events:
            if isinstance(e, DuplicateRoll):
                self.copies["stale" if e.stale else "repeated"] += 1
                recorded = True
            elif isinstance(e, RollAccepted | RollHeld):
                recorded = True
        if isinstance(command, Roll) and command.seq is not None and recorded and self.reader:
            self.reader.ack(command.seq)  # only now: the roll is durable and the lamps show it
        elif (
            isinstance(command, Roll)
            and command.seq is not None
            and self.reader
            and any(isinstance(e, SeqConflict) for e in outcome.events)
        ):
            self.reader.refuse(command.seq, NakReason.CONFLICT)  # protocol 3: start anew
        self.announce()
        log_reader_events(log, outcome.events)  # after the ACK: the reader never waits
        log_game_events(log, outcome.events)
        return outcome

    def _answer_hello(self, command: Command, outcome: Outcome | None) -> None:
        """Protocol 3: a HELLO the table holds now (journaled, or the one it held) is
        answered with its WELCOME; any other is refused (the session held stays), and one
        of a session past is told so (``NAK ... SESSION``: a reader still saying it starts
        anew)."""
        if not isinstance(command, ReaderHello) or not command.session or self.reader is None:
            return
        state = self.state
        if state.reader_session == command.session:
            self.reader.welcome(command.session, state.reader_welcome)
            return
        refused = outcome.refused if outcome is not None else None
        over = refused is not None and refused.code == Refusal.READER_SESSION
        self.reader.hello_refused(command.session, over=over)

    def record(self, command: Command) -> Outcome:
        """Decide and journal ``command`` durably (the one step,
        :func:`~controller.journal.play.decide`); raises when it cannot be recorded."""
        if self.program_problem is not None:
            raise TableHalted(
                f"the table is halted ({self.program_problem}): reinstall firebet "
                "(systemd/install.sh), then restart the service"
            )
        try:
            if self.journal.halted is None and self.rules_pending:
                self._journal_rules()
            decided = decide(self.journal, self.replay, command)
        except JournalHalted as exc:
            raise TableHalted(
                f"the table is halted ({exc.describe()}): a technician must check the "
                "journal (firebet journal verify) and lift it with firebet clear-halt"
            ) from exc
        except JournalWriteError as exc:
            self.storage_fault = exc.reason
            raise FirebetError(
                f"{command.name} refused: the journal cannot be written ({exc.reason}); "
                "free disk space in the state directory, then try again"
            ) from exc
        outcome = decided.outcome
        events = outcome.events
        if decided.record is not None:
            outcome = self._name_rolls(outcome, decided.record.record)
            if any(isinstance(e, ReaderRestarted) and (e.model or e.firmware) for e in events):
                self.hello_record, self.hello_heard = decided.record.record, True
        self.storage_fault = None
        self.settlements.note(outcome.events)
        return outcome

    def _name_rolls(self, outcome: Outcome, record: int) -> Outcome:
        """Keep the record of the last roll accepted; a void names it (the roll it undid;
        None when that roll was accepted before this start)."""
        events = outcome.events
        if any(isinstance(e, RollAccepted) for e in events):
            if type(events[0]) is RollVoided:  # a correction: the misread roll's void first
                undone, self.last_roll_record = self.last_roll_record, record
                named = (replace(events[0], record=undone), *events[1:])
                return Outcome(outcome.state, named)
            self.last_roll_record = record
        elif any(isinstance(e, RollVoided) for e in events):
            undone = self.last_roll_record
            self.last_roll_record = None
            named = tuple(
                replace(e, record=undone) if isinstance(e, RollVoided) else e for e in events
            )
            return Outcome(outcome.state, named)
        return outcome

    # a technician's actions -----------------------------------------------------------------
    def clear_halt(self, actor: str, note: str, *, check_only: bool = False) -> dict[str, Any]:
        """Lift ``halted``: the game resumes on the state the chain proves (``check_only``:
        only the refusals, when there is nothing to lift)."""
        halted = self.journal.halted
        if halted is None and self.program_problem is not None:
            return {
                "ok": False,
                "error": f"{self.program_problem}: clear-halt cannot lift this; "
                "reinstall firebet (systemd/install.sh) and restart the service",
                "code": Refusal.HALTED,
                "exit": 4,
            }
        if halted is None:
            return {
                "ok": False,
                "error": "the table is not halted: nothing to clear",
                "code": Refusal.NOT_HALTED,
            }
        if check_only:
            return {"ok": True}
        done = clear_halt(self.journal, self.config.firebet, actor, note=note)
        self.last_roll_record = None  # the game resumes on a state the chain proves
        self.clears += 1  # a check begun before this speaks of the journal before it
        self.full_check = None  # until the service's new check begins
        if done is not None:
            self.replay = done[0]
            self.rules_pending = True
            try:
                self._journal_rules()
            except JournalWriteError as exc:  # journaled before the first command instead
                self.storage_fault = exc.reason
        self.refresh()
        resumed = describe_clear(done[1].data()) if done is not None else ""
        return {"ok": True, "cleared": halted.describe(), "resumed": resumed}

    def preview_clear_halt(self) -> dict[str, Any]:
        """What :meth:`clear_halt` would set aside (by the same walk), nothing changed: read
        on a read-only view of the journal of its own, so the halted journal stays as it is."""
        if self.journal.halted is None:
            return self.clear_halt("preview", "", check_only=True)
        view = Journal.open(self.journal.path.parent, self.config, read_only=True)
        with view:
            recover(view, self.config.firebet)
            aside = preview_clear_halt(view, self.config.firebet)
        if aside is None:  # halted in this process only (a file removed under the table)
            return {"ok": True, "cleared": self.journal.halted.describe(), "preview": None}
        return {"ok": True, "cleared": self.journal.halted.describe(), "preview": aside.to_dict()}

    def switch_diagnostics(self, on: bool, actor: str) -> dict[str, Any]:
        """Diagnostics mode on or off (journaled with who)."""
        if on == self.diagnostics:
            return {
                "ok": False,
                "error": f"diagnostics mode is already {'on' if on else 'off'}",
                "code": Refusal.DIAGNOSTICS,
            }
        self.journal.append_system(
            RecordKind.MODE, actor=actor, state=self.state, payload=diagnostics_body(on)
        )
        self.diagnostics = on
        self.refresh()
        return {"ok": True}

    def halt(self, record: int | None, reason: str) -> None:
        """The background check found damage: halt (a removed file names itself first),
        in the words of the start-up check."""
        if self.journal.halted is not None:
            return
        if self.journal.watch() is None:
            halted = self.journal.halt(record, reason, actor="journal check")
            log.error("journal halted: %s", halted.describe())
        self.refresh()

    def journal_checked(
        self, outcome: str, record: int | None, reason: str, clears: int | None = None
    ) -> None:
        """What the full check after ready found (``ok``, ``error`` or ``damage``).

        ``clears``: the count of clear-halts when that check began. A check begun before
        the newest clear-halt found what the technician has since set aside: it neither
        halts the table again nor stands as the table's check (the check that began with
        the clear-halt answers instead)."""
        if clears is not None and clears != self.clears:
            log.info(
                "a journal check begun before the clear-halt ended (%s); the one begun "
                "after it answers for the journal",
                outcome if record is None else f"record {record}: {reason}",
            )
            return
        if outcome == "ok":
            self.full_check = "ok"
        elif outcome == "error":
            self.full_check = f"could not run: {reason}"
        else:
            self.full_check = f"record {record}: {reason}"
            self.halt(record, reason)

    def probe_storage(self) -> None:
        """In a storage fault: can the journal be written again? Then play resumes by
        itself. The probe is a ``mode`` record of its own (the fault that ended)."""
        journal = self.journal
        if journal.halted is not None or self.storage_fault is None:
            return
        reopened = False
        if journal.read_only is ReadOnly.FILE_SYSTEM:
            if not journal.writable_again():
                return
            self.recover()  # open it again for writing (nothing was written)
            if journal.halted is not None or journal.read_only_reason() is not None:
                self.refresh()
                return
            reopened = True
        was = self.storage_fault
        try:
            journal.append_system(
                RecordKind.MODE,
                actor="service",
                state=self.state,
                payload=storage_over_body(was),
            )
            if self.rules_pending:
                self._journal_rules()
        except JournalWriteError as exc:
            if reopened and exc.reason != self.unwritable_said:  # once a cause, not each try
                self.unwritable_said = exc.reason
                log.warning(
                    "the journal was opened again for writing but cannot be written yet "
                    "(%s); the table tries again",
                    exc.reason,
                )
            self.storage_fault = exc.reason
            return
        self.storage_fault = self.unwritable_said = None
        log.warning("storage fault over (%s): the journal is written again, play resumes", was)
        self.refresh()

    def watch_journal(self) -> None:
        """While idle: halt when a journal file was removed or replaced under the table."""
        if self.journal.halted is not None:
            return
        if self.journal.watch() is not None:
            log.error("journal halted: %s", self.journal.halted)
            self.refresh()

    # outputs ----------------------------------------------------------------------------------
    def refresh(self, *, announce: bool = True) -> None:
        """Re-derive every output from the state and the mode; publish the snapshot.

        ``announce=False``: leave systemd's status line to :meth:`announce`, which a roll
        calls after its ACK (not an output the reader waits for). The lamps, the snapshot
        ``status`` reads and the ``on_change`` listener come first either way: the
        listener may post commands (the sim seats its players' bets for a new shooter)
        that must be queued before the reader, ACKed, throws again.
        """
        state, mode = self.state, self.mode
        view = lights_view(state, mode)
        if self._shown is not None and self._shown[0] == view:
            outputs = self._shown[1]  # the lamps show it already: nothing to drive
        else:
            outputs = desired_outputs(view)
            if self.lights is not None:
                self.lights.apply(outputs)
            self._shown = (view, outputs)
        halted = self.journal.halted
        halt_text = halted.describe() if halted is not None else self.program_problem
        self.published = Published(
            state,
            mode,
            outputs,
            view,
            halt_text,
            self.storage_fault,
            self.settlements.last,
            self._rules_status(state),
            proof=self._proof(halted),
            hello_record=self.hello_record,
            hello_heard=self.hello_heard,
        )
        if self.state_changed is not None:
            self.state_changed()  # a flag only: the link wakes after the outputs
        if self.on_change is not None:
            self.on_change(self.published)
        if announce:
            self.announce()

    def _rules_status(self, state: TableState) -> dict[str, Any] | None:
        """The rules record in force for ``status``, with the one that waits for the hand
        in play to end (``pending``: journaled while its wagers rode); the log says when
        a waiting change takes effect."""
        shown = self.rules_shown
        pending = self.replay.pending
        if pending != self._pending_seen:
            if pending is None and self._pending_seen is not None:
                log.warning(
                    "the rules of record %d are in force from hand %d on",
                    self._pending_seen,
                    state.hand,
                )
            self._pending_seen = pending
        if shown is None or pending is None:
            return shown
        return shown | {
            "pending": {
                "record": pending,
                "hand": state.hand,
                "in_force": self.replay.rules_record,
                "why": pending_why(state.hand, self.replay.rules_record),
            }
        }

    def _proof(self, halted: Halt | None) -> dict[str, Any] | None:
        """Halted: whether the state shown rests only on records before the break (the
        state the records before it give, replayed once a halt), and that state."""
        if halted is None:
            self._proven = None
            return None
        at = Break(halted.record)
        if self._proven is None or self._proven[0] != halted:
            before: TableState | None = None
            if at.verified_through >= 1:
                try:
                    with self.journal.view() as db:
                        db.execute("BEGIN")
                        try:
                            replay, known = replay_before(
                                db, self.config.firebet, at.verified_through + 1
                            )
                        finally:
                            if db.in_transaction:
                                db.execute("ROLLBACK")
                    before = replay.state if known else None
                except (sqlite3.Error, JournalIntegrityError, ValueError) as exc:
                    log.warning("the last verified state cannot be read: %s", exc)
            self._proven = (halted, before)
        before = self._proven[1]
        verified = before is not None and before.to_dict() == self.state.to_dict()
        last = None if verified or before is None else verified_state(before, at.verified_through)
        return {"verified": verified, "break": at.record, "last_verified": last}

    def announce(self) -> None:
        """Tell systemd's status line the published snapshot: at once when the mode changed,
        the counts at most once a second (:class:`~controller.service.notify.StatusLine`)."""
        published = self.published
        if published is not None:
            self.systemd_status.offer(published.mode, lambda: status_line(published))
