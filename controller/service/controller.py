"""The service: one queue, one engine thread, journal first, then outputs and the ACK.

Drivers (the dice reader, the dealer buttons, the control socket, the timers)
only ever put commands on :attr:`Controller.queue`. The engine thread
(:meth:`Controller.serve`) takes them one at a time, decides with the pure
rules engine, records the outcome durably in the journal, and only then
changes the lamps, ACKs the reader and answers the client. A crash anywhere
re-does the outputs from the journal at the next start (:meth:`Controller.start`
recovers and re-lights the markers before it reports ready).
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.control.server import ControlServer
from controller.core.commands import (
    Ack,
    ApplyHeld,
    Command,
    DiscardHeld,
    ReaderFault,
    ReaderOk,
    Roll,
    Surrender,
    Void,
)
from controller.core.config import Config, rules_settings
from controller.core.engine import Engine, Outcome
from controller.core.errors import FirebetError, JournalIntegrityError, TableHalted
from controller.core.events import DuplicateRoll, RollAccepted, RollHeld
from controller.core.lamps import Mode, desired_outputs
from controller.core.lamps import view_from_state as lights_view
from controller.core.state import TableState
from controller.journal import Journal, JournalHalted, JournalWriteError
from controller.link.link import FloorLink
from controller.service import answers, health, notify
from controller.service.integrity import ProgramCheck, check_program
from controller.service.jobs import Halt, Job, RepeatedRefusals, Stop, log_reader_events, roll_key
from controller.service.recall import HistoryRecall
from controller.service.status import (
    SEQ_CONFLICT,
    Published,
    ShownSettlement,
    status_line,
    status_of,
)
from drivers.buttons import DealerButtons
from drivers.lights import MarkerLights
from drivers.reader import DiceReader
from drivers.sim_reader import SimulatedReader

log = logging.getLogger("firebet.service")

STORAGE_PROBE_S = 1.0  # in a storage fault, try writing the journal again this often
# a client resends a request lost in a restart within its deadline and grace (seconds);
# the newest records this many cover that at any table (a roll every few seconds at most)
RETRY_RECORDS = 10_000


class Controller:
    """The whole controller of one table: engine, journal, reader, lamps, buttons, socket."""

    def __init__(
        self,
        config: Config,
        state_dir: Path,
        *,
        reader: DiceReader | None,
        pin_factory: Any,
        socket_path: Path | None,
        lights_timing: Any = None,
        on_change: Callable[[Published], None] | None = None,
        program: ProgramCheck | None = None,
        simulated_reader: SimulatedReader | None = None,
    ) -> None:
        self.config = config
        self.state_dir = Path(state_dir)
        self.reader = reader
        self.pin_factory = pin_factory
        self.socket_path = socket_path
        self.lights_timing = lights_timing
        self.on_change = on_change
        self.program = program  # checked at start unless given
        self.simulated_reader = simulated_reader  # the bench device ``sim-reader`` drives
        self.engine = Engine(config.firebet)
        self.queue: queue.Queue[Command | Job | Stop | Halt] = queue.Queue()
        self.full_check: str | None = None  # "running", "ok" or what it found
        self.journal: Journal | None = None
        self.lights: MarkerLights | None = None
        self.buttons: DealerButtons | None = None
        self.control: ControlServer | None = None
        self.floor: FloorLink | None = None
        self.live_from = 1  # the first record this run's engine decides (set by start)
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.reader_fault: str | None = None if reader is not None else "NO_READER"
        self.diagnostics = False
        self.storage_fault: str | None = None
        self.settlements = ShownSettlement()
        self.started_at = time.monotonic()
        self.ready_after_s: float | None = None
        self.published: Published | None = None  # the engine thread's last snapshot
        self.recall = HistoryRecall(config.firebet, config.history_hands)  # the reading lane
        self._watchdog_s = notify.watchdog_interval()
        self.refusals = RepeatedRefusals(log)

    # start-up ---------------------------------------------------------------------------
    def start(self) -> None:
        """Recover, re-light, open the socket, start the drivers; then report ready.

        Nothing is ACKed before this returns: the reader's frames wait on the queue
        until :meth:`serve` runs.
        """
        notify.status("checking the program")
        if self.program is None:
            self.program = check_program()
        if not self.program.ok:
            log.error("%s", self.program.describe())
        notify.status("recovering the journal")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.journal = Journal.open(self.state_dir, self.config)
        self.live_from = health.recover(self)  # the first record this run's engine decides
        self.lights = MarkerLights(self.config.lights, self.pin_factory, self.lights_timing)
        self.refresh()  # markers re-lit from the journal before anything else
        self.buttons = DealerButtons(self.config.buttons, self.pin_factory, self.post)
        if self.socket_path is not None:
            self.control = ControlServer(
                self.socket_path,
                functools.partial(answers.on_request, self),
                self.config.control.dealer_group,
                self.config.control.technician_group,
            )
            for record, tag in self._request_tags():
                self.control.desk.remember(record, tag)  # a retry from before this start
            self.control.start()
        if self.journal.halted is None:
            try:
                self.journal.append_system(
                    "start",
                    actor="service",
                    payload={"pid": os.getpid(), "program": self.program.to_dict()},
                )
                # the rules this start plays under, so the floor can re-check every settlement
                rules = rules_settings(self.config) | {"program": self.program.digest}
                self.journal.append_system("rules", actor="service", payload=rules)
            except JournalWriteError as exc:
                self.storage_fault = exc.reason
        health.self_check(self)
        if self.reader is not None:
            self.reader.start(self.post)
        self.ready_after_s = time.monotonic() - self.started_at
        self.ready.set()
        notify.ready()
        self.announce()
        if self.config.floor.enabled:  # after ready: the floor never delays the table
            self.floor = FloorLink(
                self.config.floor,
                self.config.table.id,
                self.journal.path,
                self.state_dir,
                status=self.status,
                post=self.post,
                program=self.program.digest,
                rules=self.engine.rules,  # the link folds the records with the table's engine
                live_from=self.live_from,
            )
            self.floor.start()
        threading.Thread(
            target=functools.partial(health.check_whole_journal, self),
            name="journal check",
            daemon=True,
        ).start()

    def _request_tags(self) -> list[tuple[int, str]]:
        """The journaled requests a retry may come for; none from a journal that cannot be
        read (it is halted: nothing is applied until a technician clears it)."""
        assert self.journal is not None
        try:
            return self.journal.request_tags(RETRY_RECORDS)
        except (JournalIntegrityError, sqlite3.Error) as exc:
            log.warning("the journal's recent requests cannot be read: %s", exc)
            return []

    # the queue ----------------------------------------------------------------------------
    def post(self, command: Command) -> None:
        """Put a command on the one queue (any thread)."""
        self.queue.put(command)

    def stop(self) -> None:
        """Ask the engine thread to finish the command in hand and leave (any thread)."""
        self.stopping.set()
        self.queue.put(Stop())

    def serve(self) -> None:
        """The engine thread: take commands one at a time until :meth:`stop`."""
        tick = min(self._watchdog_s / 2, 1.0) if self._watchdog_s else 1.0
        last_ping = last_probe = 0.0
        while not self.stopping.is_set():  # checked each turn: a busy queue never empties
            now = time.monotonic()
            if self._watchdog_s and now - last_ping >= tick:
                notify.watchdog()
                last_ping = now
            if self.storage_fault is not None and now - last_probe >= STORAGE_PROBE_S:
                last_probe = now
                try:
                    health.probe_storage(self)
                except Exception:  # the probe must never stop the engine
                    log.exception("storage probe failed")
            try:
                item = self.queue.get(timeout=min(tick, 0.25))
            except queue.Empty:
                if self.stopping.is_set():
                    break
                health.watch_journal(self)
                continue
            if isinstance(item, Stop):
                break
            try:
                if isinstance(item, Halt):
                    assert self.journal is not None
                    if self.journal.watch() is None:  # a removed file names itself first
                        self.journal.halt(item.record, item.reason, actor="journal check")
                    self.refresh()
                elif isinstance(item, Job):
                    answers.run_job(self, item)
                else:
                    self._handle(item)
            except Exception:  # one bad command must not stop the table
                log.exception("command failed: %r", item)
                if isinstance(item, Job):
                    item.finish({"ok": False, "error": "internal error; see the service log"})
            if self.journal is not None and self.queue.empty():
                self.journal.settle()  # the head file's sync, now the ACK is out
            if self.floor is not None:  # only now, after the lamps, the ACK and the reply
                self.floor.wake()

    def close(self) -> None:
        """Stop the drivers and release pins, socket and journal."""
        notify.stopping()
        for part in (self.floor, self.reader, self.control):
            if part is not None:
                try:
                    part.stop()
                except Exception:
                    log.exception("stopping %r", part)
        for closable in (self.buttons, self.lights, self.journal):
            if closable is not None:
                try:
                    closable.close()
                except Exception:
                    log.exception("closing %r", closable)
        self.recall.close()

    # commands from the drivers ---------------------------------------------------------
    @property
    def mode(self) -> Mode:
        if self.program_problem is not None:
            return Mode.HALTED
        if self.journal is not None and self.journal.halted is not None:
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
        """The reader fault in force: the driver's, or a journaled SEQ_CONFLICT (until HELLO)."""
        if self.reader_fault is not None:
            return self.reader_fault
        if self.journal is not None and self.journal.state.reader_conflict is not None:
            return SEQ_CONFLICT
        return None

    @property
    def program_problem(self) -> str | None:
        """Why the program failed its integrity check at start (None: it passed)."""
        if self.program is None or self.program.ok:
            return None
        return self.program.describe()

    @property
    def state(self) -> TableState:
        assert self.journal is not None
        return self.journal.state

    def _handle(self, command: Command) -> Outcome | None:
        """Apply a driver's command: journal it, then outputs, then the reader's ACK."""
        if isinstance(command, ReaderFault):
            self.reader_fault = command.code
        elif isinstance(command, ReaderOk):
            self.reader_fault = None
        game = isinstance(command, Roll | Void | Surrender | Ack | ApplyHeld | DiscardHeld)
        if self.mode == Mode.DIAGNOSTICS and game:
            self.refusals.refused(
                ("diagnostics", *roll_key(command)),
                logging.INFO,
                "diagnostics: %s paused (not applied, not ACKed)",
                command.name,
            )
            return None
        conflict = self.journal.state.reader_conflict if self.journal is not None else None
        if isinstance(command, Roll) and command.source == "reader" and conflict is not None:
            self.refusals.refused(  # not journaled again: the conflict is on record
                (SEQ_CONFLICT, *roll_key(command)),
                logging.WARNING,
                "reader roll %s %s (seq %s) refused: the reader is in SEQ_CONFLICT fault "
                "until it restarts (HELLO)",
                command.d1,
                command.d2,
                command.seq,
            )
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
            return None
        if not isinstance(command, ReaderFault | ReaderOk):
            self.refusals.flush()
        self.refresh(announce=False)
        recorded = any(
            isinstance(e, RollAccepted | DuplicateRoll | RollHeld) for e in outcome.events
        )
        if isinstance(command, Roll) and command.seq is not None and recorded and self.reader:
            self.reader.ack(command.seq)  # only now: the roll is durable and the lamps show it
        self.announce()
        log_reader_events(log, outcome.events)
        return outcome

    def record(self, command: Command) -> Outcome:
        """Decide and journal ``command`` durably; raises when it cannot be recorded."""
        assert self.journal is not None
        if self.program_problem is not None:
            raise TableHalted(
                f"the table is halted ({self.program_problem}): reinstall firebet "
                "(systemd/install.sh), then restart the service"
            )
        try:
            outcome, _ = self.journal.apply(self.engine, command)
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
        self.storage_fault = None
        self.settlements.note(outcome.events)
        return outcome

    # outputs ---------------------------------------------------------------------------
    def refresh(self, *, announce: bool = True) -> None:
        """Re-derive every output from the state and the mode; publish the snapshot.

        ``announce=False``: leave systemd's status line to :meth:`announce`, which a roll
        calls after its ACK (not an output the reader waits for). The lamps, the snapshot
        ``status`` reads and the ``on_change`` listener come first either way: the
        listener may post commands (the sim seats its players' bets for a new shooter)
        that must be queued before the reader, ACKed, throws again.
        """
        state = self.journal.state if self.journal is not None else TableState()
        mode = self.mode
        view = lights_view(state, mode)
        outputs = desired_outputs(view)
        if self.lights is not None:
            self.lights.apply(outputs)
        halted = self.journal.halted if self.journal is not None else None
        halt_text = halted.describe() if halted is not None else self.program_problem
        self.published = Published(
            state,
            mode,
            outputs,
            view,
            halt_text,
            self.storage_fault,
            self.settlements.last,
        )
        if self.floor is not None:
            self.floor.state_changed()  # a flag only: the link wakes after the outputs
        if self.on_change is not None:
            self.on_change(self.published)
        if announce:
            self.announce()

    def announce(self) -> None:
        """Tell systemd's status line the published snapshot."""
        if self.published is not None:
            notify.status(status_line(self.published))

    def status(self) -> dict[str, Any]:
        """``status --json``: the last published snapshot, with the reader's counters now."""
        return status_of(self)

    # the control socket and local tools ---------------------------------------------------
    def submit(self, command: Command, timeout: float = 10.0) -> dict[str, Any]:
        """Post ``command`` from a local tool (sim, scripts) and wait for the engine's reply.

        Not started within ``timeout``: answered "not done", and never done later.
        """
        return answers.submit(self, command, timeout)
