"""Reader protocol 3 on a hostile channel through the REAL service (issue 29): a real
``firebet run`` subprocess reads a pseudo-terminal whose master side this machine owns,
and plays the reader from it (:class:`tests.reader_model.ModelReader`, the protocol-3
reader ``docs/reader-protocol.md`` describes: HELLO repeated until WELCOME, an un-ACKed
ROLL repeated, carried across a reader restart). Between the two, the channel may drop,
duplicate, delay (reorder), corrupt and replay stretches of frames both ways; the reader
restarts; the port is closed and reopened (the pty unplugged and replugged behind its
stable symlink); the service is killed with SIGKILL and restarted on the same state
directory and port; and the reader idles (a burst of real heartbeats).

Nothing of the service's answer logic is copied here: what the table applied is read from
its own journal (folded by the rules engine, as recovery does), what it says from
``status`` on its control socket, and its answers from the pty. Every step ends at a
barrier (every line written is counted by the driver, then a request on the engine's lane
is answered, then the answers on the pty are read), never a sleep.

Invariant after every step: the throws applied are a prefix of the throws made, in order,
none twice; every throw the reader counts as recorded (ACKed, or said applied by a
WELCOME) is applied, or held where the dealer sees it (``status``); the reader is never
in SEQ_CONFLICT (it is honest). At the end, with the channel quiet, every throw is applied
once. ``tests/unit/test_reader_service_model.py`` runs it short; ``make soak-reader
SOAK_ARGS=--service`` long.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from controller.core.commands import ApplyHeld
from controller.core.config import load_config
from controller.core.engine import Engine
from controller.core.events import RollAccepted, RollHeld
from controller.core.table import TableState
from controller.journal import Journal, recover
from drivers import codec
from drivers.sim_link import PtyLink
from tests.reader_model import FATES, FIGURES, ModelReader, SeqReader, Throw, delivered

DEADLINE_S = 60.0
"""How long any one condition may take on a busy machine before the step fails."""

IDLE_HEARTBEATS = 300
"""Heartbeats in one idle burst (the soak sends 100,000: ``--idle``)."""

FATE_LISTS = st.lists(st.sampled_from(FATES), max_size=4)
BITS = st.integers(0, 10_000)
VERDICTS = tuple(v.value for v in codec.Verdict)


def wait_until(predicate: Any, what: str, service: ServiceProcess | None = None) -> Any:
    """``predicate()``'s first true value, looked at every 20 ms; fails after
    :data:`DEADLINE_S` (or at once when ``service`` died), naming ``what``."""
    end = time.monotonic() + DEADLINE_S
    while True:
        value = predicate()
        if value:
            return value
        if service is not None:
            service.check_alive()
        if time.monotonic() > end:
            raise AssertionError(f"not within {DEADLINE_S:.0f} s: {what}")
        time.sleep(0.02)


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the process that started it dies
    (Linux PR_SET_PDEATHSIG), so no service outlives a test that was stopped."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=DEADLINE_S)


class ServiceProcess:
    """``firebet run`` as a subprocess on ``port``: started, killed with SIGKILL and started
    again on the same state directory; the control socket asked directly."""

    def __init__(self, folder: Path, port: str, protocol: int = 3) -> None:
        self.folder = folder
        self.port = port
        self.state = folder / "state"
        self.sock = folder / "control.sock"
        self.config = folder / "table.toml"
        self.config.write_text(f"[reader]\nprotocol = {protocol}\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        """Start it and wait until it answers ``status`` with its port open; stopped again
        if it does not."""
        self.starts += 1
        with contextlib.suppress(FileNotFoundError):
            self.sock.unlink()  # a killed service leaves its socket file
        log = open(self.folder / f"service-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "controller", "run", "--config", str(self.config),
                "--serial", self.port, "--pin-factory", "mock",
                "--state-dir", str(self.state), "--socket", str(self.sock),
            ],
            stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent,
        )  # fmt: skip
        log.close()
        weakref.finalize(self, _kill, self.proc)  # a machine dropped without its teardown
        try:
            wait_until(self.connected, "the service up, its port open", self)
        except AssertionError as exc:
            said = self.status()
            self.kill()
            log = (self.folder / f"service-{self.starts}.log").read_text(errors="replace")
            raise AssertionError(f"{exc}; status {said}; its log:\n{log[-3000:]}") from None
        except BaseException:
            self.kill()
            raise

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            tail = (self.folder / f"service-{self.starts}.log").read_text(errors="replace")
            raise AssertionError(f"the service exited:\n{tail[-2000:]}")

    def kill(self) -> None:
        """SIGKILL and reap (nothing if it is not running)."""
        if self.proc is not None:
            _kill(self.proc)

    def ask(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """One request on a fresh connection: its reply, or None when the socket is not
        there (yet)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(DEADLINE_S)
                s.connect(str(self.sock))
                s.sendall(json.dumps(request).encode() + b"\n")
                reply: dict[str, Any] = json.loads(s.makefile("rb").readline())
                return reply
        except (FileNotFoundError, ConnectionRefusedError):
            return None

    def status(self) -> dict[str, Any] | None:
        """``status --json``, or None while the service is starting."""
        reply = self.ask({"op": "status"})
        return reply if reply is not None and "mode" in reply else None

    def connected(self) -> bool:
        s = self.status()
        return s is not None and bool(s["reader"]["connected"])

    def lines(self) -> int:
        """Lines the driver has counted since this start (every verdict)."""
        s = self.status()
        return 0 if s is None else sum(s["reader"]["counters"].get(v, 0) for v in VERDICTS)

    def engine_barrier(self) -> None:
        """A request answered on the engine's thread, behind every command queued before it
        (``clear-halt --preview`` changes nothing)."""
        reply = wait_until(
            lambda: self.ask({"op": "clear-halt", "args": {"preview": 1}}),
            "the engine answers",
            self,
        )
        assert reply.get("ok") or reply.get("code") == "not_halted", (
            f"not answered by the engine: {reply}"
        )

    def journal(self) -> tuple[list[tuple[int, int]], int, TableState]:
        """From the journal, folded by the rules engine as recovery does: the dice of every
        reader roll applied (by itself, or held and applied by the dealer), in order; how
        many were held; the table's state."""
        config = load_config(self.config)
        engine, state = Engine(config.firebet), TableState()
        applied: list[tuple[int, int]] = []
        held = 0
        with Journal.open(self.state, config, read_only=True) as journal:
            recover(journal, config.firebet)
            for record in journal.records():
                if record.kind != "command":
                    continue
                outcome = engine.apply(state, record.command())
                state = outcome.state
                held_apply = isinstance(record.command(), ApplyHeld)
                for e in outcome.events:
                    if isinstance(e, RollAccepted) and (record.actor == "reader" or held_apply):
                        applied.append((e.d1, e.d2))
                    held += isinstance(e, RollHeld)
        return applied, held, state


class ServiceChannel(RuleBasedStateMachine):
    """The reader (this process), the hostile channel, and the real service on a pty."""

    PROTOCOL = 3

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="firebet-model-"))
        self.link = PtyLink(self.folder / "reader.tty")
        self.link.open()
        self.service = ServiceProcess(self.folder, self.link.port, self.PROTOCOL)
        try:
            self.service.start()
        except BaseException:
            self._release()
            raise
        self.reader: ModelReader | SeqReader = (
            ModelReader() if self.PROTOCOL >= 3 else SeqReader(self.PROTOCOL)
        )
        self.throws: list[Throw] = []
        self.written = 0  # lines written to the pty since the service's start
        self.late_up: list[bytes] = []  # delayed: written after the next ones
        self.late_down: list[bytes] = []
        self.replay_up: list[bytes] = []  # a stretch replayed before the next ones
        self.sent_up: list[bytes] = []  # every frame the reader sent, for replays
        self.sent_down: list[bytes] = []
        self.partial = b""  # the start of a line read from the pty
        self.broken = False
        self.reader.power_on()
        FIGURES["service.runs"] += 1

    # -- the wire --------------------------------------------------------------------------
    def _write(self, frames: list[bytes]) -> None:
        """Write whole lines to the pty master, waiting while its buffer is full."""
        data = b"".join(frames)
        end = time.monotonic() + DEADLINE_S
        while data:
            master = self.link.master
            assert master is not None, "the pty is unplugged"
            _, ready, _ = select.select([], [master], [], 0.1)
            if ready:
                with contextlib.suppress(BlockingIOError):
                    data = data[os.write(master, data) :]
            self.service.check_alive()
            assert time.monotonic() < end, "the service stopped reading its port"
        self.written += len(frames)

    def _read(self) -> list[bytes]:
        """Every whole line the service has written to the pty so far."""
        chunks = []
        while (master := self.link.master) is not None:
            ready, _, _ = select.select([master], [], [], 0)
            if not ready:
                break
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        *lines, self.partial = (self.partial + b"".join(chunks)).split(b"\n")
        return [line + b"\n" for line in lines]

    def _barrier(self) -> None:
        """Every line written is counted by the driver and every command it made is decided
        (and answered on the pty)."""
        wait_until(
            lambda: self.service.lines() >= self.written,
            f"the driver counts the {self.written} lines written",
            self.service,
        )
        self.service.engine_barrier()

    @staticmethod
    def _corrupt(frame: bytes, bit: int) -> bytes:
        """One bit flipped inside the frame (never into a ``$`` or a line end, which would
        make it two lines or none: the noise is the line's, the count the barrier's)."""
        body = max(1, len(frame) - 3)  # after the "$", before the line end
        at = 1 + bit % body
        flipped = bytearray(frame)
        for b in range(8):
            flipped[at] = frame[at] ^ (1 << ((bit + b) % 8))
            if flipped[at] not in b"$\r\n":
                break
        return bytes(flipped)

    def _fated(
        self, frames: list[bytes], fates: list[str], bit: int, late: list[bytes]
    ) -> list[bytes]:
        """The frames as the channel delivers them; the delayed ones appended to ``late``."""
        if self.PROTOCOL < 3:  # a late HELLO restarts protocol 2's numbering: its limit
            fates = [
                "deliver" if fate == "delay" and frame.startswith(b"$HELLO") else fate
                for frame, fate in zip(frames, fates, strict=False)
            ]
        return delivered(frames, fates, late, lambda f, i: self._corrupt(f, bit + i), "service.")

    def _exchange(self, up: list[str] = [], down: list[str] = [], bit: int = 0) -> None:  # noqa: B006
        """What the reader has to send goes up through the channel, then the barrier, then
        the answers come down through it."""
        frames, self.reader.out = self.reader.out, []
        self.sent_up += frames
        late, self.late_up = self.late_up, []
        now = self.replay_up + self._fated(frames, up, bit, self.late_up) + late
        self.replay_up = []
        if now:
            self._write(now)
        self._barrier()
        answers = self._read()
        self.sent_down += answers
        late, self.late_down = self.late_down, []
        for frame in self._fated(answers, down, bit, self.late_down) + late:
            self.reader.receive(frame)

    def _fault(self, name: str) -> None:
        FIGURES["service.steps"] += 1
        FIGURES["service.faults"] += 1
        FIGURES[f"service.fault.{name}"] += 1

    # -- rules ----------------------------------------------------------------------------
    @rule(d1=st.integers(1, 6), d2=st.integers(1, 6), up=FATE_LISTS, down=FATE_LISTS, bit=BITS)
    def throw(self, d1: int, d2: int, up: list[str], down: list[str], bit: int) -> None:
        """A throw, then the reader's half second (:meth:`half_second`)."""
        throw = Throw(len(self.throws) + 1, d1, d2)
        self.throws.append(throw)
        self.reader.queue.append(throw)
        self.half_second(up, down, bit)

    @rule(up=FATE_LISTS, down=FATE_LISTS, bit=BITS)
    def half_second(self, up: list[str], down: list[str], bit: int) -> None:
        """The reader's half second (HELLO again, or its roll and a heartbeat), each frame
        both ways by its fate: delivered, dropped, duplicated, delayed behind the next ones
        (reordered) or corrupted (one bit)."""
        self.reader.tick()
        self._exchange(up, down, bit)
        FIGURES["service.steps"] += 1

    @rule(up=st.booleans(), back=st.integers(1, 500), length=st.integers(1, 8))
    def replay(self, up: bool, back: int, length: int) -> None:
        """A stretch of old frames sent again (a bridge replaying its buffer). Protocols 1
        and 2: never an old HELLO (it restarts their numbering) and never old ACKs to the
        reader (an ACK names no session: a reader cannot tell an old one), their documented
        limits; old ROLLs are, and are ACKed as copies or held for the dealer."""
        if self.PROTOCOL < 3:
            up = True
        history = self.sent_up if up else self.sent_down
        start = max(0, len(history) - back)
        stretch = history[start : start + length]
        if self.PROTOCOL < 3:
            stretch = [f for f in stretch if not f.startswith(b"$HELLO")]
        if up:
            self.replay_up += stretch
        else:
            for frame in stretch:
                self.reader.receive(frame)
        self._fault("replay")

    @precondition(lambda self: self.PROTOCOL >= 3 or self.reader.pending is None)
    @rule(hello_lost=st.booleans())
    def restart_reader(self, hello_lost: bool) -> None:
        """The reader powers up again: a new session, its un-ACKed roll carried (protocol
        3); protocols 1 and 2: numbering from 0, with no roll un-ACKed (one applied whose
        ACK was lost would be applied again: their documented limit). ``hello_lost``: the
        channel drops the HELLO (protocol 3 repeats it; protocol 2's next rolls cannot be
        proven: held for the dealer, or a SEQ_CONFLICT)."""
        self.reader.power_on()
        self._exchange(["drop"] if hello_lost else [])
        self._fault("restart_reader_unseen" if hello_lost else "restart_reader")

    @rule()
    def reopen_port(self) -> None:
        """Unplug (the pty closed: the service's port fails) and plug in again behind the
        same symlink: the service reopens it."""
        self._barrier()
        self.link.close()
        wait_until(lambda: not self.service.connected(), "the service sees the port go")
        self.late_up.clear()  # what was on the wire is gone with it
        self.partial = b""
        self.link.open()
        wait_until(self.service.connected, "the service reopens the port", self.service)
        self._fault("reopen_port")

    @rule(in_flight=st.booleans())
    def kill_service(self, in_flight: bool) -> None:
        """``kill -9``, with the reader's frames perhaps still on the wire, and a start on
        the same state directory and port."""
        if in_flight:
            self.reader.tick()
            frames, self.reader.out = self.reader.out, []
            self.sent_up += frames
            self._write(frames)
        self.service.kill()
        for frame in self._read():  # what it wrote before it died still reaches the reader
            self.reader.receive(frame)
        self.partial = b""
        self.service.start()
        self.written = 0
        self._fault("kill_service")
        FIGURES["service.kills"] += 1

    @rule()
    def idle(self) -> None:
        """A burst of :data:`IDLE_HEARTBEATS` heartbeats, written as fast as the pty takes
        them (protocol 3: the number does not move; protocols 1 and 2: each takes a seq, and
        100,000 of them run past half the ring, so the next roll is held for the dealer)."""
        beats = self.reader.heartbeats(IDLE_HEARTBEATS)
        self.reader.out += beats
        FIGURES["service.idle_heartbeats"] += len(beats)
        self._exchange()
        self._fault("idle")

    @rule()
    def dealer(self) -> None:
        """The dealer looks at ``firebet held`` and decides each held roll, oldest first:
        applies it when it is the next throw (its seq and dice are what the reader sent
        that throw as), discards it otherwise (a relic: an old copy)."""
        self._barrier()
        self._decide_held()
        FIGURES["service.steps"] += 1

    def _decide_held(self) -> None:
        status = wait_until(self.service.status, "status", self.service)
        for held in status["held_rolls"]:
            applied, _, _ = self.service.journal()
            nxt = len(applied)
            sent = getattr(self.reader, "sendings", {}).get(nxt + 1, set())
            key = (held["seq"], *held["dice"])
            op = "held-apply" if nxt < len(self.throws) and key in sent else "held-discard"
            reply = self.service.ask({"op": op, "args": {"number": held["number"]}})
            assert reply is not None and reply.get("ok"), f"{op} {held}: {reply}"
            FIGURES[f"service.{op.replace('-', '_')}"] += 1

    # -- what must hold --------------------------------------------------------------------
    @invariant()
    def applied_once_in_order(self) -> None:
        self.broken = True  # until it holds: then the teardown only stops the service
        applied, held, state = self.service.journal()
        FIGURES["service.held_max"] = max(FIGURES["service.held_max"], held)
        made = [(t.d1, t.d2) for t in self.throws]
        assert applied == made[: len(applied)], (
            f"applied {applied} is not a prefix of the throws made {made}: one applied "
            "twice, out of order, or another's"
        )
        unapplied = set(self.reader.done) - set(range(1, len(applied) + 1))
        if unapplied:
            s = wait_until(self.service.status, "status", self.service)
            assert s["held_rolls"] or s["mode"] != "running", (
                f"throws {sorted(unapplied)} ACKed, not applied, and status says "
                f"{s['mode']} with no roll held"
            )
        if self.PROTOCOL >= 3:
            assert state.reader_conflict is None, "an honest reader in SEQ_CONFLICT"
        self.broken = False

    def settle(self) -> None:
        """The channel goes quiet: the reader repeats until every throw is recorded."""
        end = time.monotonic() + DEADLINE_S
        for frame in self.late_up:
            self.reader.out.append(frame)
        self.late_up.clear()
        while True:
            self._decide_held()
            if not self.reader.queue and self.reader.pending is None and self.reader.welcomed:
                break
            assert time.monotonic() < end, "the reader's throws were never all recorded"
            if self.PROTOCOL < 3 and self.service.journal()[2].reader_conflict is not None:
                # SEQ_CONFLICT (protocol 2's unseen restart): the technician power-cycles it
                self.reader.power_on()
                FIGURES["service.conflicts"] += 1
            self.reader.tick()
            self._exchange()
        self._decide_held()
        applied, _, _ = self.service.journal()
        assert applied == [(t.d1, t.d2) for t in self.throws], "a throw lost or doubled"
        assert sorted(self.reader.done) == list(range(1, len(self.throws) + 1))
        FIGURES["service.throws"] += len(self.throws)

    def teardown(self) -> None:
        try:
            if not self.broken:  # (a broken invariant is the report: no settling after it)
                self.settle()
        finally:
            self._release()

    def _release(self) -> None:
        """Stop the service this machine started, unplug, remove the folder."""
        with contextlib.suppress(Exception):
            self.service.kill()
        self.link.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class ServiceChannelP2(ServiceChannel):
    """The same, with a reader and a service of protocol 2 (no session): a restart whose
    HELLO is lost, and an idle line past half the seq ring, make rolls the table cannot
    prove; they are held for the dealer (``firebet held``), who applies or discards each
    (:meth:`ServiceChannel.dealer`), or the reader is in SEQ_CONFLICT (a fault ``status``
    shows) until the technician power-cycles it. What protocol 2 documents it cannot
    protect against is not generated (``SeqReader``, :meth:`ServiceChannel.replay`)."""

    PROTOCOL = 2

    @rule(d1=st.integers(1, 6), d2=st.integers(1, 6))
    def idle_then_throw(self, d1: int, d2: int) -> None:
        """The table idle (:meth:`idle`: past half the seq ring in the soak), then a throw:
        the table cannot prove it new, so it is held for the dealer."""
        self.idle()
        self.throw(d1, d2, [], [], 0)

    @precondition(lambda self: self.reader.pending is None)
    @rule(d1=st.integers(1, 6), d2=st.integers(1, 6))
    def unseen_restart_then_throw(self, d1: int, d2: int) -> None:
        """The reader restarts, its HELLO lost on the line, then a throw: held, or (its seq
        one the table applied, other dice) a SEQ_CONFLICT."""
        self.restart_reader(hello_lost=True)
        self.throw(d1, d2, [], [], 0)
