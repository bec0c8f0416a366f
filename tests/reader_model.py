"""A hostile-channel model of reader protocol 3 (issue 29), pure and fast: a reader that
keeps the protocol as ``docs/reader-protocol.md`` says, the real sans-IO
:class:`drivers.session.ReaderSession` and the real rules engine with the service's
answers (ACK after the record, WELCOME after the HELLO's record, NAK GAP/CONFLICT), joined
by a channel that may drop, duplicate, delay, reorder, corrupt and replay stretches of
frames in both directions. The reader restarts, the port closes and reopens, the service
is killed (what it had not written is lost, the journal's state is kept) and the table
idles for 100,000 heartbeats, fast-forwarded.

Invariant after every step: every throw the reader made is applied at most once and in
order; every throw the reader counts as recorded (ACKed, or said applied by a WELCOME) is
applied; nothing is in SEQ_CONFLICT (the reader is honest). At the end, with the channel
quiet, every throw is applied. ``tests/unit/test_reader_model.py`` runs it short;
``bench/soak_reader.py`` (``make soak-reader``) runs it long and prints its figures.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from controller.core.commands import Command, ReaderHello, Roll
from controller.core.engine import Engine
from controller.core.errors import Refusal
from controller.core.events import DuplicateRoll, RollAccepted, RollHeld, SeqConflict
from controller.core.table import TableState
from drivers import codec
from drivers.codec import FrameDecoder, FrameName, NakReason
from drivers.session import ReaderSession

FATES = ("deliver", "deliver", "drop", "duplicate", "delay", "corrupt")

FIGURES: Counter[str] = Counter()
"""What every run of the machine survived, summed (the soak prints it)."""


def delivered(
    frames: list[bytes],
    fates: list[str],
    late: list[bytes],
    corrupt: Callable[[bytes, int], bytes],
    counted: str = "",
) -> list[bytes]:
    """The frames as the channel delivers them, each by its fate (one not named is
    delivered): dropped, duplicated, delayed (appended to ``late``, to come behind the next
    ones) or corrupted (``corrupt(frame, its index)``). Each fault is counted in
    :data:`FIGURES` under ``counted`` ("" for this model, "service." for the service's)."""
    out: list[bytes] = []
    for i, frame in enumerate(frames):
        fate = fates[i] if i < len(fates) else "deliver"
        if fate == "corrupt":
            frame = corrupt(frame, i)
        if fate == "delay":
            late.append(frame)
        elif fate != "drop":
            out.append(frame)
        if fate == "duplicate":
            out.append(frame)
        if fate != "deliver":
            FIGURES[f"{counted}faults"] += 1
            FIGURES[f"{counted}fault.{fate}"] += 1
    return out


def flip(frame: bytes, bit: int) -> bytes:
    """The frame with bit ``bit % 8`` of byte ``bit % len`` flipped."""
    flipped = bytearray(frame)
    flipped[bit % len(flipped)] ^= 1 << (bit % 8)
    return bytes(flipped)


@dataclass
class Throw:
    """One throw the reader made: its place in order and its dice."""

    number: int
    d1: int
    d2: int


class ModelReader:
    """A protocol-3 reader, pure: what it sends is appended to :attr:`out`."""

    def __init__(self) -> None:
        self.drawn = 0
        self.session = ""
        self.welcomed = False
        self.number = 0  # the session's last roll number
        self.pending: tuple[str, int, Throw] | None = None
        self.queue: deque[Throw] = deque()
        self.done: list[int] = []  # throws it counts as recorded
        self.out: list[bytes] = []
        self.decoder = FrameDecoder(protocol=3)
        self.hello_frame = b""

    def power_on(self) -> None:
        """A new session (a restart keeps the un-ACKed roll: the dice lie on the table)."""
        self.drawn += 1
        self.session = f"{0xA0000000 + self.drawn:08X}"
        self.welcomed = False
        self.number = 0
        carried, number = codec.NO_SESSION, 0
        if self.pending is not None:
            carried, number = self.pending[0], self.pending[1]
        self.hello_frame = codec.encode_hello(0, "MODEL", "1", 3, self.session, carried, number)
        self.out.append(self.hello_frame)

    def tick(self) -> None:
        """Half a second: HELLO again until WELCOMEd, else the pending roll (or the next
        throw) and a heartbeat."""
        if not self.welcomed:
            self.out.append(self.hello_frame)
            return
        if self.pending is None and self.queue:
            self.number += 1
            self.pending = (self.session, self.number, self.queue.popleft())
        if self.pending is not None:
            session, number, throw = self.pending
            self.out.append(codec.encode_roll(number, throw.d1, throw.d2, 3, session))
        self.out.append(codec.encode_hb(self.number, 3, self.session))

    def heartbeats(self, count: int) -> list[bytes]:
        """``count`` heartbeats of an idle reader (none before its WELCOME: it says HELLO)."""
        if not self.welcomed:
            return []
        return [codec.encode_hb(self.number, 3, self.session)] * count

    def receive(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            if not frame.ok or frame.session != self.session:
                continue
            if frame.name is FrameName.ACK and self.pending is not None:
                if self.pending[0] == self.session and self.pending[1] == frame.seq:
                    self.done.append(self.pending[2].number)
                    self.pending = None
            elif frame.name is FrameName.WELCOME and not self.welcomed:
                self.welcomed = True
                if self.pending is not None and self.pending[0] != self.session:
                    _, number, throw = self.pending
                    self.pending = None
                    if number <= (frame.seq or 0):
                        self.done.append(throw.number)  # applied before the restart
                    else:
                        self.queue.appendleft(throw)
            elif frame.name is FrameName.NAK and (
                frame.text(2) == "SESSION"
                or (self.welcomed and frame.text(2) in codec.SESSION_NAKS)
            ):
                self.power_on()


class SeqReader:
    """A reader of protocol 2 (or 1), pure: every frame takes the next seq (modulo 65,536),
    a HELLO (seq 0) at power-on is said once and never repeated, an un-ACKed ROLL is
    repeated with its seq, and one still un-ACKed at a restart is reported again under the
    new numbering (the dice lie on the table), as ``drivers/sim_reader.py`` does.

    It never sends a ROLL whose seq and dice are those of a ROLL it sent before (it says a
    heartbeat first): that is the one thing protocols 1 and 2 cannot tell from a copy
    (``docs/reader-protocol.md``, "Sequencing"), a documented limit, not generated; each
    heartbeat said for it is counted (``FIGURES["service.p2_collisions_avoided"]``).
    :attr:`sendings` maps each throw to the (seq, dice) it was sent under: the model's
    dealer applies a held roll only when it is the next throw's."""

    welcomed = True  # (no session: nothing to wait for)

    def __init__(self, protocol: int = 2) -> None:
        self.protocol = protocol
        self.seq = 0
        self.pending: tuple[int, Throw, bytes] | None = None
        self.queue: deque[Throw] = deque()
        self.done: list[int] = []
        self.out: list[bytes] = []
        self.decoder = FrameDecoder(protocol=protocol)
        self.sent: set[tuple[int, int, int]] = set()  # every (seq, d1, d2) sent as a ROLL
        self.sendings: dict[int, set[tuple[int, int, int]]] = {}

    def _next(self) -> int:
        self.seq = (self.seq + 1) % (codec.MAX_SEQ + 1)
        return self.seq

    def power_on(self) -> None:
        """HELLO, the numbering from 0; the un-ACKed roll reported again after it."""
        self.seq = 0
        self.out.append(codec.encode_hello(0, "MODEL", "1", self.protocol))
        if self.pending is not None:
            self.queue.appendleft(self.pending[1])
            self.pending = None

    def tick(self) -> None:
        """Half a second: the pending roll (or the next throw) and a heartbeat."""
        if self.pending is None and self.queue:
            throw = self.queue[0]
            while ((self.seq + 1) % (codec.MAX_SEQ + 1), throw.d1, throw.d2) in self.sent:
                self.out.append(codec.encode_hb(self._next(), self.protocol))
                FIGURES["service.p2_collisions_avoided"] += 1
            self.queue.popleft()
            seq = self._next()
            self.sent.add((seq, throw.d1, throw.d2))
            self.sendings.setdefault(throw.number, set()).add((seq, throw.d1, throw.d2))
            self.pending = (seq, throw, codec.encode_roll(seq, throw.d1, throw.d2, self.protocol))
        if self.pending is not None:
            self.out.append(self.pending[2])
        self.out.append(codec.encode_hb(self._next(), self.protocol))

    def heartbeats(self, count: int) -> list[bytes]:
        """``count`` heartbeats of an idle reader: each takes a seq (past the half ring
        with enough of them: the next roll cannot be proven, it is held)."""
        return [codec.encode_hb(self._next(), self.protocol) for _ in range(count)]

    def receive(self, data: bytes) -> None:
        for frame in self.decoder.feed(data):
            if (
                frame.ok
                and frame.name is FrameName.ACK
                and self.pending is not None
                and frame.seq == self.pending[0]
            ):
                self.done.append(self.pending[1].number)
                self.pending = None


class ModelTable:
    """The table's side: the real ReaderSession and engine, with the service's answers."""

    def __init__(self) -> None:
        self.engine = Engine()
        self.state = TableState()  # the journal's: survives a kill
        self.applied: list[tuple[int, int]] = []  # dice of every roll applied, in order
        self.out: list[bytes] = []
        self.now = 0.0
        self.start()

    def start(self) -> None:
        """The service starts: a new session object, told the journal's session."""
        self.session = ReaderSession(3, heartbeat_timeout_s=3.0)
        self.session.resume(self.state.reader_session)
        self.session.opened(self.now)

    def receive(self, data: bytes) -> None:
        step = self.session.receive(data, self.now)
        self.out += step.send
        for command in step.commands:
            self.handle(command)

    def handle(self, command: Command) -> None:
        state = self.state
        if isinstance(command, Roll) and state.reader_conflict is not None:
            assert command.seq is not None
            self.out += self.session.refuse(command.seq, NakReason.CONFLICT, self.now).send
            return
        outcome = self.engine.apply(state, command)
        refused = outcome.refused
        if refused is None:
            self.state = outcome.state
        elif refused.code == Refusal.READER_GAP:
            assert isinstance(command, Roll) and command.seq is not None
            self.out += self.session.refuse(command.seq, NakReason.GAP, self.now).send
        if isinstance(command, ReaderHello) and command.session:
            if self.state.reader_session == command.session:
                self.out.append(self.session.welcome(command.session, self.state.reader_welcome))
            else:
                refused = outcome.refused
                over = refused is not None and refused.code == Refusal.READER_SESSION
                self.out += self.session.hello_refused(command.session, self.now, over=over).send
        if not isinstance(command, Roll) or command.seq is None:
            return
        for e in outcome.events:
            if isinstance(e, RollAccepted):
                self.applied.append((e.d1, e.d2))
        if any(isinstance(e, RollAccepted | RollHeld | DuplicateRoll) for e in outcome.events):
            self.out.append(self.session.ack(command.seq))
        elif any(isinstance(e, SeqConflict) for e in outcome.events):
            self.out += self.session.refuse(command.seq, NakReason.CONFLICT, self.now).send


class HostileChannel(RuleBasedStateMachine):
    """The reader, the channel and the table (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.reader = ModelReader()
        self.table = ModelTable()
        self.up: list[bytes] = []  # reader -> table, in flight
        self.down: list[bytes] = []  # table -> reader, in flight
        self.sent_up: list[bytes] = []  # everything ever sent, for replays
        self.sent_down: list[bytes] = []
        self.throws: list[Throw] = []
        self.reader.power_on()
        self._collect()
        FIGURES["runs"] += 1

    # -- plumbing ------------------------------------------------------------------------
    def _collect(self) -> None:
        self.up += self.reader.out
        self.sent_up += self.reader.out
        self.reader.out.clear()
        self.down += self.table.out
        self.sent_down += self.table.out
        self.table.out.clear()

    def _fault(self, name: str) -> None:
        FIGURES["steps"] += 1
        FIGURES["faults"] += 1
        FIGURES[f"fault.{name}"] += 1

    def _step(self) -> None:
        FIGURES["steps"] += 1

    # -- the reader and the table ----------------------------------------------------------
    @rule(d1=st.integers(1, 6), d2=st.integers(1, 6))
    def throw(self, d1: int, d2: int) -> None:
        throw = Throw(len(self.throws) + 1, d1, d2)
        self.throws.append(throw)
        self.reader.queue.append(throw)
        self._step()

    @rule(
        up=st.lists(st.sampled_from(FATES), max_size=6),
        down=st.lists(st.sampled_from(FATES), max_size=6),
        bit=st.integers(0, 10_000),
    )
    def half_second(self, up: list[str], down: list[str], bit: int) -> None:
        """The reader's half second and both ways delivered, each frame by its fate (one not
        named is delivered): dropped, duplicated, delayed behind the next ones (reordered),
        or corrupted (one bit flipped)."""
        self.reader.tick()
        self.table.now += 0.5
        self._collect()
        for fates, line, to in ((up, self.up, self.table), (down, self.down, self.reader)):
            frames, line[:] = list(line), []
            late: list[bytes] = []
            for frame in delivered(frames, fates, late, lambda f, _: flip(f, bit)):
                to.receive(frame)
            self._collect()
            line += late
        self._step()

    @rule(up=st.booleans(), back=st.integers(1, 5000), length=st.integers(1, 12))
    def replay(self, up: bool, back: int, length: int) -> None:
        history = self.sent_up if up else self.sent_down
        if history:
            start = max(0, len(history) - back)
            stretch = history[start : start + length]
            (self.up if up else self.down)[0:0] = stretch
        self._fault("replay")

    # -- restarts ----------------------------------------------------------------------------
    @rule()
    def restart_reader(self) -> None:
        self.reader.power_on()
        self._collect()
        self._fault("restart_reader")

    @rule()
    def reopen_port(self) -> None:
        self.up.clear()  # what was on the wire while the port was closed is gone
        self.table.session.opened(self.table.now)
        self._fault("reopen_port")

    @rule(unwritten=st.integers(0, 3))
    def kill_service(self, unwritten: int) -> None:
        """kill -9: the journal's state stays, the answers not yet written are lost."""
        if unwritten:
            del self.down[-unwritten:]
        self.up.clear()
        self.table.start()
        self._fault("kill_service")

    @rule()
    def idle(self) -> None:
        """100,000 heartbeats, fast-forwarded: the clocks run on, one heartbeat is read."""
        self.table.now += 100_000.0
        self.table.out += self.table.session.tick(self.table.now).send
        self.reader.out.append(codec.encode_hb(self.reader.number, 3, self.reader.session))
        self._collect()
        FIGURES["idle_heartbeats"] += 100_000
        self._fault("idle")

    # -- what must hold ----------------------------------------------------------------------------
    @invariant()
    def applied_once_in_order(self) -> None:
        applied = self.table.applied
        made = [(t.d1, t.d2) for t in self.throws]
        assert applied == made[: len(applied)], "a throw applied twice, out of order or lost"
        assert set(self.reader.done) <= set(range(1, len(applied) + 1)), (
            "the reader counts a throw as recorded that the table never applied"
        )
        assert self.table.state.reader_conflict is None

    def settle(self) -> None:
        """The channel goes quiet: every throw ends up applied, once."""
        for _ in range(200):
            if not self.reader.queue and self.reader.pending is None and self.reader.welcomed:
                break
            self.reader.tick()
            self.table.now += 0.5
            self._collect()
            while self.up or self.down:
                while self.up:
                    self.table.receive(self.up.pop(0))
                self._collect()
                while self.down:
                    self.reader.receive(self.down.pop(0))
                self._collect()
        assert self.table.applied == [(t.d1, t.d2) for t in self.throws], "a throw lost"
        assert sorted(self.reader.done) == list(range(1, len(self.throws) + 1))
        FIGURES["throws"] += len(self.throws)

    def teardown(self) -> None:
        self.settle()
