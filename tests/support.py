"""What the tests share: paths, a patient ``wait_for``, the ``firebet`` runner, a rules
table driven by script lines, and a running table on a pseudo-terminal.

Fixtures that wrap these live in ``tests/conftest.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import pytest
from gpiozero.pins.mock import MockFactory, MockPWMPin

from controller.cli.run import assemble
from controller.control.client import ControlClient
from controller.control.protocol import Handler
from controller.control.server import ControlServer
from controller.core.config import Config, FireBetRules, load_config
from controller.core.engine import Engine, Outcome
from controller.core.events import Event, Refused, Settlement
from controller.core.script import parse_line
from controller.core.state import TableState
from controller.journal import (
    Journal,
)
from controller.journal.files import HeadWriter
from controller.journal.history import history
from controller.service.integrity import ProgramCheck
from controller.service.service import Service
from drivers.serial_reader import SerialDiceReader
from drivers.sim_reader import SimulatedReader
from tests import schemas

ROOT = Path(__file__).resolve().parent.parent
FENCE_DIR = ROOT / "tests" / "isolation"  # its sitecustomize fences off the host's table

# a real process on a busy machine: generous, since only a hang should ever reach it
PROCESS_DEADLINE_S = 120.0


# a condition in this process or one beside it: generous too, since the suite runs its tests
# in parallel workers on a machine that may have busy loops beside it
WAIT_DEADLINE_S = 60.0


def wait_for(
    predicate: Callable[[], object], timeout: float = WAIT_DEADLINE_S, what: str = ""
) -> None:
    """Poll ``predicate`` until it is true; fail after ``timeout`` seconds (a hang, not luck).

    The first polls come every 10 ms, then further apart (up to 0.1 s): a condition that
    holds at once costs nothing, and a long wait does not spend a core asking."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:g} s waiting{' for ' + what if what else ''}"
            )
        time.sleep(pause)
        pause = min(pause * 1.5, 0.1)


def read_line(stream: IO[Any], what: str, timeout: float = PROCESS_DEADLINE_S) -> Any:
    """The next line of ``stream`` (a process's pipe; ``""`` or ``b""`` at its end), or an
    AssertionError naming ``what`` when none comes within ``timeout`` seconds.

    A bare ``readline`` on a process that hangs waits for ever, and neither a signal nor
    pytest-timeout's alarm reliably wakes a thread blocked in a read (the signal may land
    on another thread): the read runs in a daemon thread the test stops waiting for. The
    process's kill by the test's clean-up then ends that read."""
    got: list[Any] = []
    failed: list[BaseException] = []

    def read() -> None:
        try:
            got.append(stream.readline())
        except BaseException as error:  # handed to the test's thread, raised there
            failed.append(error)

    reader = threading.Thread(target=read, name=f"read {what}", daemon=True)
    reader.start()
    reader.join(timeout)
    if failed:
        raise failed[0]
    if not got:
        raise AssertionError(f"no line from {what} within {timeout:g} s")
    return got[0]


def lines_of(stream: IO[Any], what: str, timeout: float = PROCESS_DEADLINE_S) -> Iterator[Any]:
    """Each line of ``stream`` until its end, each within ``timeout`` (:func:`read_line`)."""
    while line := read_line(stream, what, timeout):
        yield line


def run_firebet(
    *args: str,
    timeout: float = PROCESS_DEADLINE_S,
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``firebet ARGS`` as a real process from the checkout; its output captured. What it
    prints as JSON is checked against the shipped schemas (``tests/schemas.py``)."""
    done = subprocess.run(
        [sys.executable, "-m", "controller", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        input=input,
    )
    schemas.check_cli(args, done.stdout)
    return done


@contextmanager
def python_process(script: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``python -c SCRIPT ARGS`` from the checkout, its standard input and output piped
    (text): killed and reaped when the block ends, whatever happened in it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=PROCESS_DEADLINE_S)
        proc.stdin.close()
        proc.stdout.close()


def recall_firebet(*args: str) -> subprocess.CompletedProcess[str]:
    """``firebet history ARGS`` through a service, asked again while it answers that the
    request's deadline passed: the service's recall worker starts at the first request,
    which on a machine this busy may take longer than a request's 5 s."""
    deadline = time.monotonic() + PROCESS_DEADLINE_S
    while True:
        done = run_firebet("history", *args)
        late = done.returncode == 1 and "deadline" in done.stderr
        if not late or time.monotonic() > deadline:
            return done


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


MARKER_PINS = {4: 5, 5: 6, 6: 13, 8: 19, 9: 26, 10: 21}
DICE = {4: (2, 2), 5: (2, 3), 6: (3, 3), 8: (4, 4), 9: (4, 5), 10: (5, 5)}


def recall(journal: Journal, hands: int, rules: FireBetRules | None = None) -> list[dict[str, Any]]:
    """``firebet history`` of the newest ``hands`` hands of ``journal`` (under ``rules``
    where it holds no rules record: the defaults unless told)."""
    with journal.view() as db:
        return history(db, rules if rules is not None else FireBetRules(), hands)


@dataclass
class RunningTable:
    controller: Service
    device: SimulatedReader
    factory: MockFactory
    socket: Path

    def throw(self, d1: int, d2: int, *, acked: bool = True) -> int:
        """Throw through the simulated reader; wait for the ACK (or for the first send)."""
        before = len(self.device.rolls_sent)
        self.device.throw(d1, d2)
        wait_for(lambda: len(self.device.rolls_sent) > before, what=f"roll {d1} {d2} sent")
        session, seq, _, _ = self.device.rolls_sent[before]
        if acked:
            assert self.device.wait_acked(seq, timeout=30, session=session), (
                f"roll {d1} {d2} (seq {seq}) not ACKed"
            )
        return seq

    def make(self, *points: int) -> None:
        for p in points:
            self.throw(*DICE[p])
            self.throw(*DICE[p])

    def status(self) -> dict:  # type: ignore[type-arg]
        return self.controller.status()

    def ask(self, op: str, **args: object) -> dict:  # type: ignore[type-arg]
        with ControlClient(self.socket) as client:
            return client.request(op, **args)

    def pin(self, number: int) -> MockPWMPin:
        return self.factory.pin(number)


TEST_CONFIG = '[journal]\nkey_file = "journal.key"\n'


def table_config() -> Config:
    """The defaults with the journal's key in the state directory (see conftest)."""
    return load_config(os.environ.get("FIREBET_CONFIG"))


def start_table(
    state: Path,
    sock: Path,
    config: Config | None = None,
    program: ProgramCheck | None = None,
    protocol: int | None = None,
) -> tuple[RunningTable, threading.Thread]:
    """A table on a simulated reader over a pty, mock pins and a real journal, its engine on
    a thread of its own: ready, and its reader's port open, when this returns.

    A set-up that fails (the service refuses to start, or is not ready in time) stops every
    thread, the device and the pins it started before the error is raised, so one failure
    never turns into an unrelated one in the next test. ``protocol``: the reader protocol
    the device, the driver and the config speak (the config's by default).
    """
    config = config or table_config()
    if protocol is not None:
        config = replace(config, reader=replace(config.reader, protocol=protocol))
    speaks = config.reader.protocol
    with ExitStack() as undo:
        device = SimulatedReader(heartbeat_s=0.1, retransmit_s=0.1, protocol=speaks)
        device.start()
        undo.callback(device.stop)
        reader = SerialDiceReader(
            device.port, 9600, heartbeat_timeout_s=2.0, backoff_max_s=0.2, protocol=speaks
        )
        factory = MockFactory(pin_class=MockPWMPin)
        undo.callback(factory.close)
        controller = assemble(
            config,
            state,
            reader=reader,
            pin_factory=factory,
            socket_path=sock,
            program=program,
        )
        undo.callback(controller.close)
        failed: list[BaseException] = []

        def engine() -> None:
            try:
                controller.start()
            except BaseException as exc:  # said by start_table, on the test's thread
                failed.append(exc)
                return
            controller.serve()

        thread = threading.Thread(target=engine, name="test table engine", daemon=True)
        thread.start()
        undo.callback(stop_engine, controller, thread)
        wait_for(lambda: controller.ready.is_set() or failed, what="the table to start")
        if failed:
            raise failed[0]
        # the driver opens the port on its own thread, and opening flushes what was sent
        # before: a test's first frame (a FAULT, a throw) must not race it
        wait_for(lambda: reader.status().connected, what="the reader's port to open")
        undo.pop_all()  # set up: the caller stops it (table_running)
    return RunningTable(controller, device, factory, sock), thread


def stop_engine(controller: Service, thread: threading.Thread) -> None:
    """Ask the engine thread to leave and wait for it (a hang fails, never waits forever)."""
    controller.stop()
    thread.join(timeout=PROCESS_DEADLINE_S)
    if thread.is_alive():
        raise AssertionError(f"the engine thread did not stop in {PROCESS_DEADLINE_S:g} s")


@contextmanager
def table_running(
    state: Path,
    sock: Path,
    config: Config | None = None,
    program: ProgramCheck | None = None,
    protocol: int | None = None,
) -> Iterator[RunningTable]:
    """:func:`start_table`, stopped and released when the block ends (each part even when
    stopping another fails)."""
    table, thread = start_table(state, sock, config, program, protocol)
    with ExitStack() as undo:
        undo.callback(table.factory.close)
        undo.callback(table.device.stop)
        undo.callback(table.controller.close)
        undo.callback(stop_engine, table.controller, thread)
        yield table


DEALERS, TECHS = "firebet-dealer", "firebet-tech"  # the control tests' group names


@contextmanager
def control_servers(
    path: Path, handler: Callable[[], Handler], **defaults: Any
) -> Iterator[Callable[..., ControlServer]]:
    """A maker of started control servers (at ``path`` unless told ``path=``; a fresh
    ``handler()`` unless given one; ``defaults`` under the keywords), all stopped after."""
    servers: list[ControlServer] = []

    def make(given: Handler | None = None, **kwargs: Any) -> ControlServer:
        where = kwargs.pop("path", path)
        server = ControlServer(
            where, given if given is not None else handler(), DEALERS, TECHS, **defaults | kwargs
        )
        server.start()
        servers.append(server)
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.stop()


class Tmux:
    """A program on an 80x24 terminal in its own tmux server, read as a person sees it."""

    def __init__(self, name: str, command: str, width: int = 80, height: int = 24) -> None:
        self.server = f"firebet-test-{name}-{os.getpid()}"
        # the shell stays after the program, to say how it ended
        shell = f"cd {ROOT} && {command}; echo EXIT=$?; sleep 600"
        self._tmux("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), shell)

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.server, *args], capture_output=True, text=True, check=True
        )
        return out.stdout

    def screen(self) -> str:
        """The visible screen, one line of text a row."""
        return self._tmux("capture-pane", "-p", "-t", "t")

    def keys(self, *keys: str) -> None:
        """Type keys (tmux names: "q", "C-c", "Enter", "3 5" types three characters)."""
        self._tmux("send-keys", "-t", "t", *keys)

    def wait(self, text: str, timeout: float = 30.0) -> str:
        """Wait until ``text`` is on the screen; the screen then."""
        wait_for(lambda: text in self.screen(), timeout, what=f"{text!r} on the screen")
        return self.screen()

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.server, "kill-server"], capture_output=True)


def head_syncs(monkeypatch: pytest.MonkeyPatch, writer: HeadWriter) -> list[str]:
    """The names of the threads that ``fdatasync`` ``writer``'s head file from now on."""
    synced: list[str] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        if fd == writer._fd:
            synced.append(threading.current_thread().name)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    return synced
