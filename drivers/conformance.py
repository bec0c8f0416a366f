"""The reader vendors' conformance kit (``firebet reader-check``, ``docs/reader-protocol.md``
"Conformance kit"): a controller that drives a real reader over its serial line through
protocol 3's cases and says, case by case, whether the reader kept the protocol.

It opens the port itself (the service must be stopped) and plays the controller's part on
purpose badly where a case needs it: it leaves a HELLO unanswered, leaves a ROLL un-ACKed,
sends every NAK reason the protocol defines (and one it does not) and the NAKs that tell a
reader to start a new session, and answers a carried roll both ways. The operator throws
the dice, makes the reader fault and clear, and makes an invalid throw when it asks (on
``say``); a bench device that does these by itself needs nothing.

Its cases are :data:`CASES`, in the order they run. A case whose ground never came (no
throw within ``wait_s``, an earlier case that left nothing to check on) is ``not
checked``, never a pass. ``wrap=True`` runs the wrap instead (:meth:`ReaderCheck.run_wrap`):
every roll ACKed up to the session's last number, 65,535, then the new session.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from drivers import codec
from drivers.codec import Frame, FrameDecoder, FrameName, NakReason

PASS, FAIL, SKIP = "pass", "fail", "not checked"
REPEAT_MIN_S, REPEAT_MAX_S = 0.3, 1.5  # a repeat is due every 500 ms: the kit's slack
NAK_WATCH_S = 0.6  # how long the kit watches the reader after an informational NAK, at least
OTHER_SESSION = "0BADF00D"  # a session no reader under test holds (one of its own is avoided)
UNKNOWN_REASON = "LATER"  # a NAK reason the protocol does not define: a reader ignores it

INFORMATIONAL_NAKS: tuple[tuple[str, str], ...] = (
    ("nak_protocol", NakReason.PROTOCOL),
    ("nak_bad_hello", NakReason.BAD_HELLO),
    ("nak_bad_frame", NakReason.BAD_FRAME),
    ("nak_bad_value", NakReason.BAD_VALUE),
    ("nak_unknown_reason", UNKNOWN_REASON),
)
"""The NAKs that name the reader's own session and that it must only show and log (its
un-ACKed ROLL repeated as before, no new session): case name, reason."""

CASES: tuple[str, ...] = (
    "line",
    "hello_on_nak_session",
    "hello_repeated",
    "no_roll_before_welcome",
    "hello_anew_on_nak_session",
    "welcome_ends_hello",
    "heartbeat",
    "first_number",
    "roll_repeated",
    *(name for name, _ in INFORMATIONAL_NAKS),
    "nak_other_session",
    "ack_ends_repeat",
    "next_number",
    "nak_session",
    "carried",
    "carried_resent",
    "nak_gap",
    "carried_dropped",
    "nak_conflict",
    "fault",
    "fault_cleared",
    "noroll",
    "idle",
    "idle_then_roll",
    "wrap",
)
"""Every case of the kit's run, in order (what passes each: ``docs/reader-protocol.md``,
"Conformance kit")."""

WRAP_CASES: tuple[str, ...] = (
    *CASES[:2],
    "wrap_numbering",
    "wrap_new_session",
    "wrap_first_number",
)
"""The cases of the wrap run (``--wrap``), in order."""


class _Stop(Exception):
    """The run cannot go on: the cases after it are not checked, for this reason."""


@dataclass
class Case:
    """One case's verdict and what the kit saw."""

    name: str
    verdict: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"case": self.name, "verdict": self.verdict, "detail": self.detail}


@dataclass
class Report:
    """Every case, in order, and what the reader said of itself."""

    port: str
    protocol: int
    cases: list[Case] = field(default_factory=list)
    model: str = ""
    firmware: str = ""

    @property
    def ok(self) -> bool:
        """No case failed (cases not checked do not fail the reader)."""
        return all(c.verdict != FAIL for c in self.cases)

    def add(self, name: str, ok: bool | None, detail: str) -> bool:
        """Record the case ``name``: passed (True), failed (False) or not checked (None)."""
        verdict = SKIP if ok is None else PASS if ok else FAIL
        self.cases.append(Case(name, verdict, detail))
        return bool(ok)

    def text(self) -> str:
        """The report a vendor can send, one line a case."""
        lines = [
            f"firebet reader-check: {self.port}, reader protocol {self.protocol}, "
            f"model {self.model or '?'}, firmware {self.firmware or '?'}"
        ]
        for c in self.cases:
            lines.append(f"  {c.verdict.upper():12} {c.name:26} {c.detail}")
        failed = [c.name for c in self.cases if c.verdict == FAIL]
        lines.append(
            "PASS: the reader keeps the protocol"
            if self.ok
            else f"FAIL: {len(failed)} case(s): {', '.join(failed)}"
        )
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "protocol": self.protocol,
            "model": self.model,
            "firmware": self.firmware,
            "ok": self.ok,
            "cases": [c.to_json() for c in self.cases],
        }


class ReaderCheck:
    """The kit on an open ``port`` (pyserial-like: ``read(n)``, ``write(b)``, ``flush()``,
    optionally ``in_waiting``). ``wait_s``: how long to wait for each thing the operator
    is asked to do; ``idle_s``: the idle line watched; ``exitfirst``: stop at the first
    failed case (the rest not checked); ``wrap``: the wrap run instead of the cases."""

    def __init__(
        self,
        port: Any,
        url: str,
        *,
        wait_s: float = 60.0,
        idle_s: float = 3.0,
        say: Callable[[str], None] = lambda _: None,
        exitfirst: bool = False,
        wrap: bool = False,
    ) -> None:
        self.port = port
        self.wait_s = wait_s
        self.idle_s = idle_s
        self.say = say
        self.exitfirst = exitfirst
        self.wrap = wrap
        self.decoder = FrameDecoder(protocol=3)
        self.report = Report(url, 3)
        self.session = ""  # the session the kit holds (WELCOMEd)
        self.last = 0  # the number of the session's last roll the kit took
        self.backlog: list[tuple[float, Frame]] = []  # frames read, not yet looked at

    # -- the line ---------------------------------------------------------------------------
    def _read(self) -> list[tuple[float, Frame]]:
        """The frames of what the port holds now (waiting up to its read timeout), after
        any that :meth:`_until` left unlooked at."""
        if self.backlog:
            out, self.backlog = self.backlog, []
            return out
        waiting = getattr(self.port, "in_waiting", 0) or 0
        data = self.port.read(max(1, waiting))
        now = time.monotonic()
        return [(now, f) for f in self.decoder.feed(data)]

    def _frames(self, seconds: float) -> list[tuple[float, Frame]]:
        """Every good frame read in the next ``seconds`` (with the time each came)."""
        out: list[tuple[float, Frame]] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            out += [(t, f) for t, f in self._read() if f.ok]
        return out

    def _until(
        self, seconds: float, want: Callable[[Frame], bool], seen: list[Frame] | None = None
    ) -> tuple[float, Frame] | None:
        """The first good frame ``want`` takes within ``seconds`` (the others on the way are
        appended to ``seen``)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            frames = self._read()
            for i, (now, frame) in enumerate(frames):
                if not frame.ok:
                    continue
                if want(frame):
                    self.backlog = frames[i + 1 :] + self.backlog  # read with it: next
                    return now, frame
                if seen is not None:
                    seen.append(frame)
        return None

    def _send(self, data: bytes) -> None:
        self.port.write(data)
        self.port.flush()

    def _add(self, name: str, ok: bool | None, detail: str) -> bool:
        passed = self.report.add(name, ok, detail)
        if ok is False and self.exitfirst:
            raise _Stop(f"stopped at the first failure ({name})")
        return passed

    def _roll_of(self, session: str) -> Callable[[Frame], bool]:
        return lambda f: f.name is FrameName.ROLL and f.session == session

    def _throw(self, session: str, why: str) -> Frame:
        """Ask for a throw and wait for its ROLL of ``session``."""
        self.say(f"throw the dice now ({why}; waiting up to {self.wait_s:g} s for a ROLL)")
        got = self._until(self.wait_s, self._roll_of(session))
        if got is None:
            raise _Stop(f"no ROLL of session {session} within {self.wait_s:g} s of asking")
        return got[1]

    def _new_hello(self, old: str, seconds: float = REPEAT_MAX_S + 0.5) -> Frame | None:
        """The first HELLO of a session other than ``old`` within ``seconds``."""
        got = self._until(seconds, lambda f: f.name is FrameName.HELLO and f.session != old)
        return got[1] if got else None

    def _welcome(self, hello: Frame, applied: int) -> None:
        """WELCOME the HELLO's session: it is the one the kit holds from now on."""
        self.session = hello.session or ""
        self.last = 0
        self._send(codec.encode_welcome(self.session, applied))

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> Report:
        """Every case in order (or the wrap run); the cases the run could not reach are
        recorded as not checked, with why."""
        cases = WRAP_CASES if self.wrap else CASES
        try:
            if self.wrap:
                self.run_wrap()
            else:
                self._run_cases()
        except _Stop as stop:
            done = {c.name for c in self.report.cases}
            for name in cases:
                if name not in done:
                    self.report.add(name, None, str(stop))
        return self.report

    def _hello(self) -> Frame:
        """The line and the reader's HELLO (told ``NAK ... SESSION`` when it is in a
        session already): the ``line`` and ``hello_on_nak_session`` cases."""
        first = self._until(3.0, lambda f: True)
        if not self._add(
            "line",
            first is not None,
            "a good protocol-3 frame within 3 s"
            if first
            else "no good protocol-3 frame in 3 s (cable, baud, protocol?)",
        ):
            raise _Stop("no line")
        assert first is not None
        frame = first[1]
        if frame.name is not FrameName.HELLO and frame.session:
            # a reader in a session already: tell it to start anew (the kit holds none)
            self._send(codec.encode_nak(frame.seq or 0, NakReason.SESSION, 3, frame.session))
        hello = frame if frame.name is FrameName.HELLO else None
        if hello is None:
            got = self._until(REPEAT_MAX_S + 1.0, lambda f: f.name is FrameName.HELLO)
            hello = got[1] if got else None
        if not self._add(
            "hello_on_nak_session",
            hello is not None,
            ("saying HELLO already" if frame.name is FrameName.HELLO else "said HELLO")
            if hello
            else f"no HELLO after NAK SESSION naming its session {frame.session}",
        ):
            raise _Stop("no HELLO")
        assert hello is not None
        self.report.model, self.report.firmware = hello.text(2), hello.text(3)
        return hello

    def _run_cases(self) -> None:
        hello = self._hello()
        session = hello.session or ""
        # the HELLO is left unanswered: the reader must repeat it, and send nothing else
        seen = self._frames(REPEAT_MAX_S)
        again = [f for _, f in seen if f.name is FrameName.HELLO]
        others = [f for _, f in seen if f.name in (FrameName.ROLL, FrameName.HB)]
        self._add(
            "hello_repeated",
            bool(again) and again[0].raw == hello.raw,
            f"HELLO {session} repeated as it was"
            if again and again[0].raw == hello.raw
            else f"HELLO of another session ({again[0].session}) instead of a repeat"
            if again
            else "HELLO not repeated within 1.5 s",
        )
        self._add(
            "no_roll_before_welcome",
            not others,
            "no ROLL, no HB before the WELCOME"
            if not others
            else f"{others[0].raw!r} before the WELCOME",
        )
        # the table does not hold it (a past session): the reader must start anew
        self._send(codec.encode_nak(0, NakReason.SESSION, 3, session))
        anew = self._new_hello(session)
        if self._add(
            "hello_anew_on_nak_session",
            anew is not None,
            f"a new HELLO, session {anew.session}"
            if anew
            else f"no HELLO of a new session within 2 s of NAK,0,SESSION,{session}",
        ):
            assert anew is not None
            hello = anew
        self._welcome(hello, 0)
        after = self._frames(REPEAT_MAX_S)
        hellos = [f for _, f in after if f.name is FrameName.HELLO and f.session == self.session]
        self._add(
            "welcome_ends_hello",
            not hellos,
            "HELLO stops at the WELCOME" if not hellos else "HELLO repeated after its WELCOME",
        )
        beats = [t for t, f in after if f.name is FrameName.HB and f.session == self.session]
        gaps = [b - a for a, b in itertools.pairwise(beats)]
        self._add(
            "heartbeat",
            bool(beats) and all(g <= 1.0 + 0.25 for g in gaps),
            f"{len(beats)} HB of the session in 1.5 s"
            if beats
            else "no HB of the session within 1.5 s of the WELCOME",
        )
        self._rolls()

    def _pending_nak(self, name: str, roll: Frame, nak: bytes, what: str) -> None:
        """Send ``nak`` while ``roll`` is un-ACKed: the reader must go on repeating it, the
        same frame, and start no new session."""
        self._send(nak)
        sent = time.monotonic()
        copy: float | None = None
        wrong: Frame | None = None
        end = sent + REPEAT_MAX_S
        while time.monotonic() < end:
            for now, f in self._read():
                if not f.ok:
                    continue
                if f.raw == roll.raw:
                    copy = copy or now
                elif f.name in (FrameName.HELLO, FrameName.ROLL):
                    wrong = wrong or f
            if wrong is not None or (copy is not None and time.monotonic() - sent >= NAK_WATCH_S):
                break
        self._add(
            name,
            wrong is None and copy is not None,
            f"{what} ignored: the ROLL repeated as it was"
            if wrong is None and copy is not None
            else f"after {what}: {wrong.raw!r}"
            if wrong is not None
            else f"after {what}: the un-ACKed ROLL not repeated within 1.5 s",
        )

    def _rolls(self) -> None:
        session = self.session
        roll = self._throw(session, "the session's first roll")
        number = roll.seq or 0
        self._add("first_number", number == 1, f"the session's first roll is number {number}")
        at = time.monotonic()
        rep = self._until(REPEAT_MAX_S, lambda f: f.raw == roll.raw)
        ok = rep is not None and rep[0] - at >= REPEAT_MIN_S - 0.25
        self._add(
            "roll_repeated",
            ok,
            "the un-ACKed ROLL repeated, same frame, about every 500 ms"
            if ok
            else "the un-ACKed ROLL was not repeated as it was within 1.5 s",
        )
        for name, reason in INFORMATIONAL_NAKS:
            nak = codec.encode_nak(number, reason, 3, session)
            self._pending_nak(name, roll, nak, f"NAK,{number},{reason},{session}")
        other = OTHER_SESSION if session != OTHER_SESSION else "0BADF00E"
        for reason in (NakReason.SESSION, NakReason.GAP, NakReason.CONFLICT):
            self._send(codec.encode_nak(number, reason, 3, other))
        self._pending_nak(
            "nak_other_session",
            roll,
            codec.encode_nak(number, NakReason.SESSION, 3, other),
            f"NAK SESSION, GAP and CONFLICT of session {other}",
        )
        self._send(codec.encode_ack(number, 3, session))
        self.last = number
        seen = self._frames(REPEAT_MAX_S)
        again = [f for _, f in seen if f.raw == roll.raw]
        self._add(
            "ack_ends_repeat",
            not again,
            "the ACK ends the repeats" if not again else "the ROLL was repeated after its ACK",
        )
        nxt = self._throw(session, "the session's next roll")
        self._add(
            "next_number",
            nxt.seq == number + 1,
            f"the next roll is number {nxt.seq} (want {number + 1})",
        )
        self._carry(nxt)

    def _told_anew(self, name: str, pending: Frame, reason: str) -> Frame:
        """Tell the reader ``NAK <reason>`` of its own session while ``pending`` is un-ACKed:
        its new HELLO must carry ``pending`` (the ``carried`` case for SESSION, part of the
        case ``name`` for the others). Returns the new HELLO."""
        session, number = self.session, pending.seq or 0
        self._send(codec.encode_nak(number, reason, 3, session))
        hello = self._new_hello(session)
        carries = hello is not None and (hello.text(6), hello.text(7)) == (session, str(number))
        named = f"carrying {session},{number}" if carries else "not carrying the un-ACKed roll"
        if name == "nak_session":
            self._add(
                name,
                hello is not None,
                f"a new HELLO, session {hello.session}"
                if hello
                else f"no new HELLO within 2 s of NAK,{number},SESSION,{session}",
            )
            if hello is not None:
                self._add(
                    "carried",
                    carries,
                    f"the HELLO carries {session},{number}"
                    if carries
                    else f"the HELLO carries {hello.text(6)},{hello.text(7)}, "
                    f"not the un-ACKed roll {session},{number}",
                )
        else:
            self._add(
                name,
                hello is not None and carries,
                f"a new HELLO ({hello.session}), {named}"
                if hello
                else f"no new HELLO within 2 s of NAK,{number},{reason},{session}",
            )
        if hello is None:
            raise _Stop(f"no new session after NAK {reason}")
        return hello

    def _carry(self, pending: Frame) -> None:
        # NAK SESSION: the new session's WELCOME says the carried roll was not applied
        hello = self._told_anew("nak_session", pending, NakReason.SESSION)
        self._welcome(hello, (pending.seq or 1) - 1)
        got = self._until(REPEAT_MAX_S + 1.0, self._roll_of(self.session))
        ok = got is not None and got[1].seq == 1 and got[1].dice == pending.dice
        self._add(
            "carried_resent",
            ok,
            "sent again as the new session's roll 1, the same dice"
            if ok
            else f"not sent again as roll 1 with dice {pending.dice}: "
            + (f"{got[1].raw!r}" if got else "no ROLL within 2.5 s"),
        )
        if got is not None:
            self._send(codec.encode_ack(got[1].seq or 0, 3, self.session))
            self.last = got[1].seq or 0
        # NAK GAP: the WELCOME says it was applied (its ACK was lost): dropped
        pending = self._throw(self.session, "for NAK GAP")
        hello = self._told_anew("nak_gap", pending, NakReason.GAP)
        self._welcome(hello, pending.seq or 0)
        resent = self._until(1.0, self._roll_of(self.session))
        if resent is not None:
            self._add("carried_dropped", False, f"sent again: {resent[1].raw!r}")
            self._send(codec.encode_ack(resent[1].seq or 0, 3, self.session))
            pending = resent[1]
        else:
            pending = self._throw(self.session, "the new session's first roll")
            self._add(
                "carried_dropped",
                pending.seq == 1,
                f"not sent again; the next throw is number {pending.seq} (want 1)",
            )
        # NAK CONFLICT: carried and sent again
        hello = self._told_anew("nak_conflict", pending, NakReason.CONFLICT)
        self._welcome(hello, 0)
        got = self._until(REPEAT_MAX_S + 1.0, self._roll_of(self.session))
        if got is None:
            raise _Stop("the roll carried after NAK CONFLICT never came again")
        self._send(codec.encode_ack(got[1].seq or 0, 3, self.session))
        self.last = got[1].seq or 0
        self._faults()

    def _faults(self) -> None:
        session, last = self.session, self.last
        self.say(f"make the reader report a fault, then clear it (waiting up to {self.wait_s:g} s)")
        got = self._until(
            self.wait_s, lambda f: f.name in (FrameName.FAULT, FrameName.ROLL, FrameName.NOROLL)
        )
        fault = got[1] if got else None
        if fault is None or fault.name is not FrameName.FAULT:
            self._add(
                "fault",
                None if fault is None else False,
                f"no FAULT within {self.wait_s:g} s"
                if fault is None
                else f"{fault.raw!r} instead of a FAULT",
            )
            self._add("fault_cleared", None, "no FAULT to clear")
        else:
            ok = fault.session == session and fault.seq == last
            self._add(
                "fault",
                ok,
                f"FAULT {fault.text(2)} of its session, number {fault.seq}"
                if ok
                else f"{fault.raw!r}: want session {session}, number {last}",
            )
            got = self._until(self.wait_s, lambda f: f.name is FrameName.OK)
            okf = got[1] if got else None
            self._add(
                "fault_cleared",
                None if okf is None else okf.session == session and okf.seq == last,
                f"no OK within {self.wait_s:g} s"
                if okf is None
                else f"OK of session {okf.session}, number {okf.seq} (want {session}, {last})",
            )
        self.say(f"make an invalid throw (a die cocked or off the table; {self.wait_s:g} s)")
        got = self._until(self.wait_s, lambda f: f.name in (FrameName.NOROLL, FrameName.ROLL))
        noroll = got[1] if got else None
        self._add(
            "noroll",
            None
            if noroll is None
            else noroll.name is FrameName.NOROLL
            and (noroll.session, noroll.seq) == (session, last),
            f"no NOROLL within {self.wait_s:g} s"
            if noroll is None
            else f"{noroll.raw!r} (want NOROLL of {session}, number {last})",
        )
        if noroll is not None and noroll.name is FrameName.ROLL:  # taken, so it stops
            self._send(codec.encode_ack(noroll.seq or 0, 3, session))
            self.last = last = noroll.seq or 0
        seen = self._frames(self.idle_s)
        beats = [f for _, f in seen if f.name is FrameName.HB]
        numbers = sorted({(b.session, b.seq) for b in beats})
        rolls = [f for _, f in seen if f.name is FrameName.ROLL]
        self._add(
            "idle",
            len(beats) >= int(self.idle_s) and numbers == [(session, last)] and not rolls,
            f"{len(beats)} HB in {self.idle_s:g} s, numbers {[n for _, n in numbers]} "
            f"(want {last}, unchanged)" + (f"; a ROLL: {rolls[0].raw!r}" if rolls else ""),
        )
        roll = self._throw(session, "after the idle line")
        ok = roll.seq == last + 1
        self._send(codec.encode_ack(roll.seq or 0, 3, session))
        stopped = not [f for _, f in self._frames(REPEAT_MAX_S) if f.raw == roll.raw]
        self._add(
            "idle_then_roll",
            ok and stopped,
            f"roll number {roll.seq} (want {last + 1})"
            + (", taken at its ACK" if stopped else ", repeated after its ACK"),
        )
        self._add(
            "wrap",
            None,
            "a new session after roll 65,535: run reader-check --wrap (65,535 rolls)",
        )

    # -- the wrap run -------------------------------------------------------------------------
    def run_wrap(self) -> None:
        """ACK every roll of the session as it comes, checking each is numbered +1, up to
        65,535; then the reader must say HELLO of a new session carrying nothing, and number
        that session's first roll 1. A reader that throws by itself is needed (65,535 rolls:
        a vendor's test mode, or one that starts its first session's numbering near the end)."""
        hello = self._hello()
        self._welcome(hello, 0)
        self.say(f"the reader must throw by itself now, up to roll {codec.MAX_SEQ:,}")
        expected: int | None = None
        numbering: str | None = None
        while expected is None or expected <= codec.MAX_SEQ:
            got = self._until(
                self.wait_s,
                lambda f: f.name in (FrameName.ROLL, FrameName.HELLO),
            )
            if got is None:
                raise _Stop(f"no ROLL within {self.wait_s:g} s (at number {expected})")
            roll = got[1]
            if roll.name is FrameName.HELLO or roll.session != self.session:
                numbering = f"{roll.raw!r} before roll {codec.MAX_SEQ:,}"
                break
            n = roll.seq or 0
            if expected is not None and n == expected - 1:  # a repeat (an ACK in flight)
                self._send(codec.encode_ack(n, 3, self.session))
                continue
            if expected is not None and n != expected:
                numbering = f"roll {n} after {expected - 1} (want {expected})"
                break
            if expected is None:
                self.say(f"the session's rolls start at number {n}")
            self._send(codec.encode_ack(n, 3, self.session))
            self.last, expected = n, n + 1
            if n % 10_000 == 0:
                self.say(f"roll {n:,} ACKed")
        old = self.session
        if not self._add(
            "wrap_numbering",
            numbering is None,
            numbering or f"every roll +1 up to {codec.MAX_SEQ:,}, each taken at its ACK",
        ):
            raise _Stop("the numbering broke before the wrap")
        seen: list[Frame] = []
        got = self._until(
            REPEAT_MAX_S + 0.5, lambda f: f.name is FrameName.HELLO and f.session != old, seen
        )
        stray = [f for f in seen if f.name is FrameName.ROLL]
        new = got[1] if got else None
        self._add(
            "wrap_new_session",
            new is not None and (new.text(6), new.text(7)) == (codec.NO_SESSION, "0") and not stray,
            f"a ROLL after {codec.MAX_SEQ:,}: {stray[0].raw!r}"
            if stray
            else f"HELLO of {new.session}, carrying {new.text(6)},{new.text(7)} (want nothing: "
            f"{codec.NO_SESSION},0)"
            if new
            else f"no HELLO of a new session within 2 s of ACK {codec.MAX_SEQ}",
        )
        if new is None:
            raise _Stop("no new session after the wrap")
        self._welcome(new, 0)
        got = self._until(self.wait_s, self._roll_of(self.session))
        self._add(
            "wrap_first_number",
            None if got is None else got[1].seq == 1,
            f"no ROLL of the new session within {self.wait_s:g} s"
            if got is None
            else f"the new session's first roll is number {got[1].seq}",
        )
        if got is not None:
            self._send(codec.encode_ack(got[1].seq or 0, 3, self.session))
