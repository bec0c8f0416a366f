"""The service: one queue, one engine thread, journal first, then outputs and the ACK.

Drivers (the dice reader, the dealer buttons, the control socket, the floor link, the
timers) only ever put commands on :attr:`Service.queue`. The engine thread
(:meth:`Service.serve`) takes them one at a time and hands each to the
:class:`~controller.service.table.Table`, the one owner of the game and the mode, which
decides with the pure rules engine, records the outcome durably in the journal, and only
then changes the lamps, ACKs the reader and answers the client. A crash anywhere re-does
the outputs from the journal at the next start (:meth:`Service.start` recovers and
re-lights the markers before it reports ready).

The service builds none of its parts: ``firebet run`` (the composition root,
:func:`controller.cli.run.assemble`) makes the reader, the lamps, the buttons, the
control socket and the floor link and hands them over (:class:`Parts`).
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.clock import now_iso
from controller.control.protocol import EncodedReply, Request
from controller.control.server import ControlServer
from controller.core.commands import Command, ReaderFaultCode
from controller.core.config import Config
from controller.core.errors import FirebetError, JournalIntegrityError
from controller.core.lamps import Mode
from controller.core.state import TableState
from controller.journal import Journal, ReadOnly, RequestIndex
from controller.link.report import disabled_status
from controller.service import answers, health, notify
from controller.service.integrity import ProgramCheck, check_program
from controller.service.jobs import Checked, Halt, Job, Stop
from controller.service.recall import HistoryRecall
from controller.service.status import Published, status_report
from controller.service.table import Table
from drivers.buttons import DealerButtons
from drivers.lights import MarkerLights
from drivers.reader import DiceReader
from drivers.session import RISKS

if TYPE_CHECKING:  # loaded only when used: the link (and paho) when [floor] names a
    # broker (SPEC section 7: start-up)
    from controller.link.link import FloorLink

log = logging.getLogger("firebet.service")

STORAGE_PROBE_S = 1.0  # in a storage fault, try writing the journal again this often
# idle, the engine thread looks at the journal's files this often (every append looks
# first as well): each wake-up of a thread is CPU on the Pi's idle budget (SPEC section 7),
# so it wakes only for that, systemd's watchdog (at half its interval, as systemd asks),
# and a status line that waited
IDLE_LOOK_S = 5.0


@dataclass
class Parts:
    """What the composition root made for the service (None: the table has none)."""

    reader: DiceReader | None = None
    lights: MarkerLights | None = None
    buttons: DealerButtons | None = None
    control: ControlServer | None = None
    link: FloorLink | None = None


class Service:
    """The service of one table: its queue, its engine thread and the parts it was given."""

    def __init__(
        self,
        config: Config,
        state_dir: Path,
        *,
        program: ProgramCheck | None = None,
        on_change: Callable[[Published], None] | None = None,
    ) -> None:
        self.config = config
        self.state_dir = Path(state_dir)
        self.program = program  # checked at start unless given
        self._on_change = on_change
        self.queue: queue.Queue[Command | Job | Stop | Halt | Checked] = queue.Queue()
        self.parts = Parts()
        self.journal = Journal.open(self.state_dir, config)
        self.table: Table | None = None
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.started_at = time.monotonic()
        self.ready_after_s: float | None = None
        self.recall = HistoryRecall(config.firebet, config.history_hands)  # the reading lane
        self._watchdog_s = notify.watchdog_interval()
        self.record_watch: health.RecordWatch | None = None  # screens the records (after ready)
        self.first_record = 0  # the newest record when this start recovered the journal
        self._requests: RequestIndex | None = None  # the socket's thread reads it
        self._checked_clears = 0  # the table's clear-halts when the newest full check began

    def attach(self, parts: Parts) -> None:
        """The parts the composition root made (before :meth:`start`)."""
        self.parts = parts

    # what other threads may read -------------------------------------------------------
    @property
    def reader(self) -> DiceReader | None:
        return self.parts.reader

    @property
    def lights(self) -> MarkerLights | None:
        return self.parts.lights

    @property
    def link(self) -> FloorLink | None:
        return self.parts.link

    @property
    def on_change(self) -> Callable[[Published], None] | None:
        """Called on the engine thread with each new snapshot (the sim's players)."""
        return self._on_change

    @on_change.setter
    def on_change(self, listener: Callable[[Published], None] | None) -> None:
        self._on_change = listener
        if self.table is not None:
            self.table.on_change = listener

    def program_digest(self) -> str:
        """The digest of the program's files (known once :meth:`start` checked them)."""
        return self.program.digest if self.program is not None else ""

    @property
    def published(self) -> Published | None:
        """The engine thread's last snapshot (None before start)."""
        return self.table.published if self.table is not None else None

    @property
    def mode(self) -> Mode:
        return self.table.mode if self.table is not None else Mode.HALTED

    @property
    def state(self) -> TableState:
        return self.table.state if self.table is not None else TableState()

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
        parts = self.parts
        table = Table(
            self.config,
            self.journal,
            self.program,
            lights=parts.lights,
            reader=parts.reader,
            on_change=self._on_change,
            state_changed=parts.link.state_changed if parts.link is not None else None,
        )
        table.recover()
        table.refresh()  # markers re-lit from the journal before anything else
        self.table = table
        self.first_record = self.journal.last_record
        if parts.control is not None:
            parts.control.desk.journaled = self.journaled  # a retry of any journaled request
            parts.control.start()
        table.journal_start()
        health.self_check(table, self.state_dir)
        if parts.reader is not None:
            parts.reader.resume(table.state.reader_session)  # the session the journal holds
            risk = RISKS.get(self.config.reader.protocol)
            if risk is not None:  # said once, at start: use protocol 3 where the reader can
                log.warning("%s; set [reader] protocol = 3 for a reader that speaks it", risk)
            parts.reader.start(self.post)
        self.ready_after_s = time.monotonic() - self.started_at
        self.ready.set()
        notify.ready()
        table.announce()
        if parts.link is not None:  # after ready: the floor never delays the table
            parts.link.start()
        self._check_whole_journal(table)
        self.record_watch = health.RecordWatch(
            self.journal,
            self.config.firebet,
            self.queue.put,
            self.stopping,
            self.config.journal.watch_sweep_s,
        )
        threading.Thread(target=self.record_watch.run, name="journal watch", daemon=True).start()
        if self.config.metrics.textfile_dir:  # node_exporter's textfile collector
            from controller.service.textfile import TextfileWriter  # prometheus_client: only here

            writer = TextfileWriter(self.config.metrics.textfile_dir, self.status, self.stopping)
            threading.Thread(target=writer.run, name="metrics file", daemon=True).start()

    def _check_whole_journal(self, table: Table) -> None:
        """The full check from genesis, on a thread of its own (after ready, and again
        after each clear-halt: what the check before it found was set aside)."""
        table.full_check = "running"
        self._checked_clears = table.clears
        threading.Thread(
            target=health.check_whole_journal,
            args=(self.journal, self.config.firebet, self.queue.put, table.clears, self.stopping),
            name="journal check",
            daemon=True,
        ).start()

    def journaled(self, uid: int, rid: str | int) -> tuple[str, int] | None:
        """On the socket's thread: ``(digest, record)`` of the request ``rid`` of ``uid``
        the journal holds (None: none), from its index, on a connection of its own.
        Raises :class:`FirebetError` when that cannot be told, so nothing is done twice;
        a halted journal that cannot be read holds nothing a command could be journaled
        after (the technician's clear-halt is not a command, and does nothing twice)."""
        try:
            if self._requests is None:
                self._requests = self.journal.requests()
            try:
                return self._requests.find(uid, rid)
            finally:
                if self.journal.read_only is ReadOnly.FILE_SYSTEM:
                    # not kept: a connection made on a read-only file system keeps
                    # SQLite's index of the WAL read-only for the writer reopened after it
                    self._requests.close()
                    self._requests = None
        except (JournalIntegrityError, sqlite3.Error) as exc:
            if self.journal.halted is not None:
                return None
            raise FirebetError(f"the journal's requests cannot be read: {exc}") from exc

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
        table = self.table
        assert table is not None, "start() first"
        tick = self._watchdog_s / 2 if self._watchdog_s else None
        last_ping = last_probe = 0.0
        while not self.stopping.is_set():  # checked each turn: a busy queue never empties
            now = time.monotonic()
            if tick is not None and now - last_ping >= tick:
                notify.watchdog()
                last_ping = now
            wait = IDLE_LOOK_S
            if table.storage_fault is not None:
                if now - last_probe >= STORAGE_PROBE_S:
                    last_probe = now
                    try:
                        table.probe_storage()
                    except Exception:  # the probe must never stop the engine
                        log.exception("storage probe failed")
                wait = STORAGE_PROBE_S
            if tick is not None:
                wait = min(wait, max(last_ping + tick - now, 0.0))
            due = table.systemd_status.due_in()
            if due is not None:
                wait = min(wait, due)
            try:
                item = self.queue.get(timeout=wait)
            except queue.Empty:
                if self.stopping.is_set():
                    break
                table.watch_journal()
                table.systemd_status.flush()  # the counts that waited (at most one a second)
                continue
            if isinstance(item, Stop):
                break
            try:
                if isinstance(item, Halt):
                    table.halt(item.record, item.reason)
                elif isinstance(item, Checked):
                    table.journal_checked(item.outcome, item.record, item.reason, item.clears)
                elif isinstance(item, Job):
                    answers.run_job(self, item)
                    if table.clears != self._checked_clears:  # a clear-halt: check anew
                        self._check_whole_journal(table)
                else:
                    table.handle(item)
            except Exception:  # one bad command must not stop the table
                log.exception("command failed: %r", item)
                if isinstance(item, Job):
                    item.finish({"ok": False, "error": "internal error; see the service log"})
            if self.queue.empty():
                self.journal.settle()  # the head file's sync, now the ACK is out
            if self.parts.link is not None:  # only now, after the lamps, the ACK and the reply
                self.parts.link.wake()

    def close(self) -> None:
        """Stop the drivers and release pins, socket and journal (and end a full check
        still running apart)."""
        self.stopping.set()
        notify.stopping()
        parts = self.parts
        for part in (parts.link, parts.reader, parts.control):
            if part is not None:
                try:
                    part.stop()
                except Exception:
                    log.exception("stopping %r", part)
        for closable in (parts.buttons, parts.lights, self.journal):
            if closable is not None:
                try:
                    closable.close()
                except Exception:
                    log.exception("closing %r", closable)
        self.recall.close()
        if self._requests is not None:
            self._requests.close()

    # answers ----------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """``status --json``: the last published snapshot, with the reader's counters now."""
        table = self.table
        p = table.published if table is not None else None
        if table is None or p is None:
            return {"ok": False, "error": "the service is still starting"}
        reader = (
            self.parts.reader.status().to_dict()
            if self.parts.reader is not None
            else {
                "connected": False,
                "fault": ReaderFaultCode.NO_READER,
                "counters": {},
                "port": "",
            }
        )
        reader["copies"] = dict(table.copies)
        link = self.parts.link
        report = status_report(
            p,
            table=self.config.table.id,
            ready=self.ready.is_set(),
            reader=reader,
            journal_check=table.full_check,
            program=self.program.to_dict() if self.program is not None else None,
            floor=link.status() if link is not None else disabled_status(),
            at=now_iso(),
        )
        watch = self.record_watch
        report["journal_watch"] = watch.report() if watch is not None else None
        return report

    def on_request(
        self, request: Request
    ) -> Mapping[str, Any] | EncodedReply | Future[Mapping[str, Any]]:
        """The control socket's handler (on its lane threads, never the engine's)."""
        return answers.on_request(self, request)

    def submit(self, command: Command, timeout: float = 10.0) -> dict[str, Any]:
        """Post ``command`` from a local tool (sim, scripts) and wait for the engine's reply.

        Not started within ``timeout``: answered "not done", and never done later.
        """
        return answers.submit(self, command, timeout)
