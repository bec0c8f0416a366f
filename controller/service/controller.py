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

import logging
import math
import os
import queue
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.control.protocol import CLIENT_GRACE_S, Request
from controller.control.server import ControlServer
from controller.core.commands import (
    Ack,
    ApplyHeld,
    Bet,
    Cancel,
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
from controller.core.errors import FirebetError, TableHalted, UsageError
from controller.core.events import (
    DuplicateRoll,
    Refused,
    RollAccepted,
    RollHeld,
    RollVoided,
    SeqConflict,
    Settlement,
)
from controller.core.lamps import (
    LightsView,
    Mode,
    Outputs,
    desired_outputs,
    marker_report,
)
from controller.core.lamps import view_from_state as lights_view
from controller.core.state import TableState
from controller.floor.link import FloorLink
from controller.journal import Journal, JournalHalted, JournalWriteError, describe_clear
from controller.journal.history import MAX_HANDS, Recall, connect_read_only
from controller.service import bench, notify
from controller.service.integrity import ProgramCheck, check_program
from drivers.buttons import DealerButtons
from drivers.lights import MarkerLights
from drivers.reader import DiceReader, now_iso
from drivers.sim_reader import SimulatedReader

log = logging.getLogger("firebet.service")

MIN_FREE_BYTES = 16 * 1024 * 1024  # below this the self-check warns: rolls may soon be refused
STORAGE_PROBE_S = 1.0  # in a storage fault, try writing the journal again this often
SEQ_CONFLICT = "SEQ_CONFLICT"


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


def _roll_key(command: Command) -> tuple[Any, ...]:
    if isinstance(command, Roll):
        return (command.name, command.source, command.seq, command.d1, command.d2)
    return (command.name,)


class _Stop:
    """Queue item: finish the command in hand and leave the loop."""


@dataclass(frozen=True)
class _Halt:
    """Queue item: the background check found damage; halt the table."""

    record: int | None
    reason: str


@dataclass
class _Job:
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

    def finish(self, reply: dict[str, Any]) -> None:
        """Hand the reply to whoever waits (any thread; the first reply counts)."""
        if self.done.is_set():
            return
        self.reply = reply
        self.done.set()
        self.future.set_result(reply)


@dataclass(frozen=True)
class Published:
    """What the engine thread last published for readers on other threads."""

    state: TableState
    mode: str
    outputs: Outputs
    view: LightsView
    halted: str | None
    storage_fault: str | None
    last_settlement: dict[str, Any] | None


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
        self.queue: queue.Queue[Command | _Job | _Stop | _Halt] = queue.Queue()
        self.full_check: str | None = None  # "running", "ok" or what it found
        self.journal: Journal | None = None
        self.lights: MarkerLights | None = None
        self.buttons: DealerButtons | None = None
        self.control: ControlServer | None = None
        self.floor: FloorLink | None = None
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.reader_fault: str | None = None if reader is not None else "NO_READER"
        self.diagnostics = False
        self.storage_fault: str | None = None
        self.last_settlement: dict[str, Any] | None = None
        self._settlement_before: dict[str, Any] | None = None  # shown again if a void reverses
        self.started_at = time.monotonic()
        self.ready_after_s: float | None = None
        self._published: Published | None = None
        self._recall = Recall(Engine(config.firebet))  # game recall: the reading lane only
        self._recall_conn: sqlite3.Connection | None = None
        self._recall_inode: tuple[int, int] | None = None
        # the last answer, by (last record, hands): asked again with nothing new, it stands
        self._recall_cache: tuple[tuple[int, int], list[dict[str, Any]]] | None = None
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
        recovered = self.journal.recover(self.engine)
        live_from = recovered.last_record + 1  # the first record this run's engine decides
        if recovered.halted is not None:
            log.error("journal halted: %s", recovered.halted.describe())
        elif self.journal.fs_read_only:
            self.storage_fault = f"{self.journal.path.parent} is on a read-only file system"
            log.error(
                "storage fault: %s; rolls are refused until it is writable", self.storage_fault
            )
        self.lights = MarkerLights(self.config.lights, self.pin_factory, self.lights_timing)
        self._refresh()  # markers re-lit from the journal before anything else
        self.buttons = DealerButtons(self.config.buttons, self.pin_factory, self.post)
        if self.socket_path is not None:
            self.control = ControlServer(
                self.socket_path,
                self._on_request,
                self.config.control.dealer_group,
                self.config.control.technician_group,
            )
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
        self._self_check()
        if self.reader is not None:
            self.reader.start(self.post)
        self.ready_after_s = time.monotonic() - self.started_at
        self.ready.set()
        notify.ready()
        self._notify_status()
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
                live_from=live_from,
            )
            self.floor.start()
        threading.Thread(
            target=self._check_whole_journal, name="journal check", daemon=True
        ).start()

    def _check_whole_journal(self) -> None:
        """After ready: verify every record from genesis (recovery read only the tail).

        Runs on its own read-only connection, so the table plays on meanwhile; damage
        found goes to the engine thread as a halt.
        """
        assert self.journal is not None
        self.full_check = "running"
        try:
            with Journal(
                self.journal.path, key_file=self.journal.key_file, read_only=True
            ) as reader:
                engine = Engine(self.config.firebet)
                reader.recover(engine)
                report = reader.verify(engine)
        except FirebetError as exc:
            self.full_check = f"could not run: {exc}"
            return
        if report.ok:
            self.full_check = "ok"
            return
        record, reason = report.problems[0]
        self.full_check = f"record {record}: {reason}"
        self.queue.put(_Halt(record, reason))

    def _self_check(self) -> None:
        try:
            free = shutil.disk_usage(self.state_dir).free
        except OSError as exc:
            self.storage_fault = f"state directory {self.state_dir}: {exc.strerror or exc}"
            return
        if free < MIN_FREE_BYTES:
            log.warning("only %d bytes free in %s", free, self.state_dir)

    # the queue ----------------------------------------------------------------------------
    def post(self, command: Command) -> None:
        """Put a command on the one queue (any thread)."""
        self.queue.put(command)

    def stop(self) -> None:
        """Ask the engine thread to finish the command in hand and leave (any thread)."""
        self.stopping.set()
        self.queue.put(_Stop())

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
                    self._probe_storage()
                except Exception:  # the probe must never stop the engine
                    log.exception("storage probe failed")
            try:
                item = self.queue.get(timeout=min(tick, 0.25))
            except queue.Empty:
                if self.stopping.is_set():
                    break
                self._watch_journal()
                continue
            if isinstance(item, _Stop):
                break
            try:
                if isinstance(item, _Halt):
                    assert self.journal is not None
                    if self.journal.watch() is None:  # a removed file names itself first
                        self.journal.halt(item.record, item.reason, actor="journal check")
                    self._refresh()
                elif isinstance(item, _Job):
                    self._run_job(item)
                else:
                    self._handle(item)
            except Exception:  # one bad command must not stop the table
                log.exception("command failed: %r", item)
                if isinstance(item, _Job):
                    item.finish({"ok": False, "error": "internal error; see the service log"})
            if self.floor is not None:  # only now, after the lamps, the ACK and the reply
                self.floor.wake()

    def _probe_storage(self) -> None:
        """In a storage fault: can the journal be written again? Then play resumes by itself.

        The probe is a journal record of its own (``mode``, the fault that ended), so the
        end of the fault is on record too.
        """
        journal = self.journal
        if journal is None or journal.halted is not None or self.storage_fault is None:
            return
        if journal.fs_read_only:
            if not journal.writable_again():
                return
            journal.recover(self.engine)  # open it again for writing (nothing was written)
            if journal.halted is not None or journal.fs_read_only:
                self._refresh()
                return
        was = self.storage_fault
        try:
            journal.append_system(
                "mode", actor="service", payload={"storage_fault": None, "was": was}
            )
        except JournalWriteError as exc:
            self.storage_fault = exc.reason
            return
        self.storage_fault = None
        log.warning("storage fault over (%s): the journal is written again, play resumes", was)
        self._refresh()

    def _watch_journal(self) -> None:
        """While idle: halt when a journal file was removed or replaced under the table."""
        if self.journal is None or self.journal.halted is not None:
            return
        if self.journal.watch() is not None:
            log.error("journal halted: %s", self.journal.halted)
            self._refresh()

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
        self._close_recall()

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
                ("diagnostics", *_roll_key(command)),
                logging.INFO,
                "diagnostics: %s paused (not applied, not ACKed)",
                command.name,
            )
            return None
        conflict = self.journal.state.reader_conflict if self.journal is not None else None
        if isinstance(command, Roll) and command.source == "reader" and conflict is not None:
            self.refusals.refused(  # not journaled again: the conflict is on record
                (SEQ_CONFLICT, *_roll_key(command)),
                logging.WARNING,
                "reader roll %s %s (seq %s) refused: the reader is in SEQ_CONFLICT fault "
                "until it restarts (HELLO)",
                command.d1,
                command.d2,
                command.seq,
            )
            return None
        try:
            outcome = self._record(command)
        except FirebetError as exc:
            self.refusals.refused(
                ("refused", *_roll_key(command)),
                logging.WARNING,
                "%s not applied: %s",
                command.name,
                exc,
            )
            self._refresh()
            return None
        if not isinstance(command, ReaderFault | ReaderOk):
            self.refusals.flush()
        self._refresh()
        for event in outcome.events:
            if isinstance(event, SeqConflict):
                log.error(
                    "dice reader SEQ_CONFLICT: ROLL seq %d came again with %d %d, recorded as "
                    "%d %d; not applied, not ACKed; reader fault until it says HELLO",
                    event.seq,
                    event.d1,
                    event.d2,
                    event.recorded_d1,
                    event.recorded_d2,
                )
            elif isinstance(event, RollHeld):
                log.warning(
                    "reader roll %d %d (seq %s) held as %d: a roll was entered by hand; "
                    "the dealer applies or discards it (firebet held)",
                    event.d1,
                    event.d2,
                    event.seq,
                    event.number,
                )
        recorded = any(
            isinstance(e, RollAccepted | DuplicateRoll | RollHeld) for e in outcome.events
        )
        if isinstance(command, Roll) and command.seq is not None and recorded and self.reader:
            self.reader.ack(command.seq)  # only now: the roll is durable and the lamps show it
        return outcome

    def _record(self, command: Command) -> Outcome:
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
        for event in outcome.events:
            if isinstance(event, Settlement):
                self._settlement_before = self.last_settlement
                self.last_settlement = event.report() | {
                    "immediate": event.immediate,
                    "wagers": {str(p): a for p, a in sorted(event.wagers.items())},
                }
            elif isinstance(event, RollVoided) and event.reversed_settlement is not None:
                # the seven-out is undone: its hand is back in play, nothing was settled
                self.last_settlement, self._settlement_before = self._settlement_before, None
        return outcome

    # outputs ---------------------------------------------------------------------------
    def _refresh(self) -> None:
        """Re-derive every output from the state and the mode; publish the snapshot."""
        state = self.journal.state if self.journal is not None else TableState()
        mode = self.mode
        view = lights_view(state, mode)
        outputs = desired_outputs(view)
        if self.lights is not None:
            self.lights.apply(outputs)
        halted = self.journal.halted if self.journal is not None else None
        halt_text = halted.describe() if halted is not None else self.program_problem
        self._published = Published(
            state,
            mode,
            outputs,
            view,
            halt_text,
            self.storage_fault,
            self.last_settlement,
        )
        self._notify_status()
        if self.floor is not None:
            self.floor.state_changed()  # a flag only: the link wakes after the outputs
        if self.on_change is not None:
            self.on_change(self._published)

    def _notify_status(self) -> None:
        p = self._published
        if p is None:
            return
        s = p.state
        point = f"point {s.point}" if s.point else s.phase.value.replace("_", " ")
        notify.status(
            f"{p.mode}: hand {s.hand}, {point}, {s.unique_points} different points, {s.rolls} rolls"
        )

    def status(self) -> dict[str, Any]:
        """``status --json``: the last published snapshot, with the reader's counters now."""
        p = self._published
        if p is None:
            return {"ok": False, "error": "the service is still starting"}
        s = p.state
        reader = (
            self.reader.status().to_dict()
            if self.reader is not None
            else {"connected": False, "fault": "NO_READER", "counters": {}, "port": ""}
        )
        if s.reader_conflict is not None and not reader.get("fault"):
            reader["fault"] = SEQ_CONFLICT
            reader["reason"] = (
                f"ROLL seq {s.reader_conflict} came again with other dice; the reader's rolls "
                "are refused until it restarts (HELLO)"
            )
        return {
            "table": self.config.table.id,
            "mode": p.mode,
            "ready": self.ready.is_set(),
            "phase": s.phase.value,
            "point": s.point,
            "hand": s.hand,
            "shooter": s.shooter,
            "points": list(s.points),
            "unique_points": s.unique_points,
            "betting_open": s.betting_open,
            "bets": {str(pos): amount for pos, amount in sorted(s.bets.items())},
            "surrender_pending": s.surrender_pending,
            "last_roll": list(s.last_roll) if s.last_roll else None,
            "rolls": s.rolls,
            "surveillance_alert": s.surveillance_alert,
            "alert_hand": s.alert_hand,
            "surveillance_confirmed": (
                {"hand": s.alert_hand, "by": s.confirmed_by} if s.confirmed_by is not None else None
            ),
            "held_rolls": [h.to_dict() for h in s.held],
            "holding_reader_rolls": s.hold_reader,
            "markers": marker_report(p.view, p.outputs),
            "reader": reader,
            "meters": s.meters.to_dict(s.rolls),
            "halted": p.halted,
            "storage_fault": p.storage_fault,
            "last_settlement": p.last_settlement,
            "journal_check": self.full_check,
            "program": self.program.to_dict() if self.program is not None else None,
            "floor": self.floor.status() if self.floor is not None else FloorLink.disabled_status(),
        }

    # the control socket ---------------------------------------------------------------
    def _on_request(self, request: Request) -> Mapping[str, Any] | Future[Mapping[str, Any]]:
        """Called on a socket lane thread, never the engine's.

        ``status`` is answered from the last published snapshot and ``history`` from
        the journal on a read-only connection of its own, both off the engine thread;
        whatever changes the table becomes an engine job, answered when done.
        """
        if request.op == "status":
            return self.status()
        if request.op == "sim-reader":
            return bench.act(self.simulated_reader, request.args)
        if request.op == "history":
            return self._history(request)
        job = _Job(request, deadline=request.deadline)
        self.queue.put(job)
        return job.future

    def submit(self, command: Command, timeout: float = 10.0) -> dict[str, Any]:
        """Post ``command`` from a local tool (sim, scripts) and wait for the engine's reply.

        Not started within ``timeout``: answered "not done", and never done later.
        """
        job = _Job(None, command, deadline=time.monotonic() + timeout)
        self.queue.put(job)
        if not job.done.wait(timeout + CLIENT_GRACE_S):
            return {
                "ok": False,
                "error": f"the engine did not finish {command.name} within "
                f"{timeout + CLIENT_GRACE_S:g} s; it may still: check the status",
            }
        return job.reply

    def _run_job(self, job: _Job) -> None:
        if time.monotonic() > job.deadline:
            what = job.command.name if job.command is not None else "request"
            if job.request is not None:
                what = job.request.op
            log.warning("%s not started: its deadline passed while the engine was busy", what)
            job.finish(
                {
                    "ok": False,
                    "expired": True,
                    "error": f"{what} not done: the table was busy past the request's "
                    "deadline; nothing was changed, try again",
                }
            )
            return
        try:
            if job.command is not None:
                reply = self._reply_to(job.command)
            else:
                assert job.request is not None
                reply = self._answer(job.request)
        except FirebetError as exc:
            reply = {"ok": False, "error": str(exc), "exit": exc.exit_code}
        job.finish(reply)

    # game recall, off the engine thread -------------------------------------------------
    def _history(self, request: Request) -> dict[str, Any]:
        """The last hands, from the journal on the recall's own read-only connection.

        Runs on the socket's reading lane (one thread): it never waits for the engine
        and the engine never waits for it (WAL readers do not block the writer).
        """
        hands = _int_arg(request.args, "hands", self.config.history_hands)
        if not 1 <= hands <= MAX_HANDS:
            raise UsageError(f"hands must be from 1 to {MAX_HANDS}, not {hands}")
        assert self.journal is not None
        key = (self.journal.last_record, hands)
        cached = self._recall_cache
        if cached is not None and cached[0] == key:  # nothing new: the same answer, no reading
            return {"ok": True, "hands": cached[1]}
        try:
            db = self._recall_db()
            lines = self._recall.history(db, hands, request.deadline)
            self._recall_cache = (key, lines)
            return {"ok": True, "hands": lines}
        except sqlite3.Error as exc:
            self._close_recall()
            raise FirebetError(f"the journal cannot be read for history: {exc}") from exc

    def _recall_db(self) -> sqlite3.Connection:
        """The recall's connection, reopened when the journal file was replaced."""
        assert self.journal is not None
        st = os.stat(self.journal.path)
        if self._recall_conn is None or self._recall_inode != (st.st_dev, st.st_ino):
            self._close_recall()
            self._recall_conn = connect_read_only(self.journal.path)
            self._recall_inode = (st.st_dev, st.st_ino)
        return self._recall_conn

    def _close_recall(self) -> None:
        if self._recall_conn is not None:
            self._recall_conn.close()
        self._recall_conn, self._recall_inode = None, None
        self._recall = Recall(Engine(self.config.firebet))
        self._recall_cache = None

    def _answer(self, request: Request) -> dict[str, Any]:
        op, args, actor = request.op, request.args, request.actor
        assert self.journal is not None
        if op == "clear-halt":
            if self.journal.halted is None and self.program_problem is not None:
                return {
                    "ok": False,
                    "error": f"{self.program_problem}: clear-halt cannot lift this; "
                    "reinstall firebet (systemd/install.sh) and restart the service",
                }
            if self.journal.halted is None:
                return {"ok": False, "error": "the table is not halted: nothing to clear"}
            was = self.journal.halted.describe()
            record = self.journal.clear_halt(actor, note=str(args.get("note", "")))
            self._refresh()
            done = describe_clear(record.data()) if record is not None else ""
            return {"ok": True, "cleared": was, "resumed": done, "status": self.status()}
        if op in ("diagnostics-on", "diagnostics-off"):
            on = op == "diagnostics-on"
            if on == self.diagnostics:
                return {
                    "ok": False,
                    "error": f"diagnostics mode is already {'on' if on else 'off'}",
                }
            self.journal.append_system("mode", actor=actor, payload={"diagnostics": on})
            self.diagnostics = on
            self._refresh()
            return {"ok": True, "status": self.status()}
        return self._reply_to(self._dealer_command(op, args, actor))

    def _reply_to(self, command: Command) -> dict[str, Any]:
        """Apply a dealer's command (journal first, then outputs) and say what it did."""
        if self.mode == Mode.DIAGNOSTICS:
            return {
                "ok": False,
                "error": "diagnostics mode: game input is paused until a technician ends it "
                "(firebet diagnostics off)",
            }
        outcome = self._record(command)
        self._refresh()
        refused = outcome.refused
        if isinstance(refused, Refused):
            return {"ok": False, "error": refused.reason}
        return {
            "ok": True,
            "events": [e.to_dict() for e in outcome.events],
            "status": self.status(),
        }

    def _dealer_command(self, op: str, args: Mapping[str, Any], actor: str) -> Command:
        at = now_iso()
        if op == "roll":
            # halted or in diagnostics the refusal names that mode (see _reply_to, _record)
            if self.mode is Mode.RUNNING:
                raise UsageError(
                    "the dice reader is working: rolls come from the reader; manual entry is "
                    "taken only while the reader is in fault"
                )
            return Roll(
                _int_arg(args, "d1"), _int_arg(args, "d2"), source="manual", actor=actor, at=at
            )
        if op == "void":
            return Void(actor=actor, at=at)
        if op == "surrender":
            return Surrender(kind=str(args.get("kind", "voluntary")), actor=actor, at=at)
        if op == "bet":
            return Bet(_int_arg(args, "position"), _int_arg(args, "amount"), actor=actor, at=at)
        if op == "cancel":
            return Cancel(_int_arg(args, "position"), actor=actor, at=at)
        if op == "ack":
            return Ack(actor=actor, at=at)
        if op in ("held-apply", "held-discard"):
            number = args.get("number")
            if number is not None:
                number = _int_arg(args, "number")
            if op == "held-apply":
                return ApplyHeld(number, actor=actor, at=at)
            return DiscardHeld(number, actor=actor, at=at)
        raise UsageError(f"unknown operation {op!r}")


def _int_arg(args: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be a whole number, not {value!r}")
    return value
