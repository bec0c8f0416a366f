"""The reader vendors' conformance kit (``firebet reader-check``, ``docs/reader-protocol.md``
"Conformance kit"): a controller that drives a real reader over its serial line through
protocol 3's cases and says, case by case, whether the reader kept the protocol.

It opens the port itself (the service must be stopped) and plays the controller's part on
purpose badly where a case needs it: it leaves the first HELLO unanswered, leaves a ROLL
un-ACKed, and sends the NAKs that tell a reader to start a new session. The dice must be
thrown while it runs (it says when); a reader that throws by itself (a bench device)
needs nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from drivers import codec
from drivers.codec import Frame, FrameDecoder, FrameName

PASS, FAIL, SKIP = "pass", "fail", "not checked"
REPEAT_MIN_S, REPEAT_MAX_S = 0.3, 1.5  # a repeat is due every 500 ms: the kit's slack


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
            lines.append(f"  {c.verdict.upper():12} {c.name:22} {c.detail}")
        failed = sum(c.verdict == FAIL for c in self.cases)
        lines.append(
            "PASS: the reader keeps the protocol" if self.ok else f"FAIL: {failed} case(s)"
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
    """The kit on an open ``port`` (pyserial-like: ``read(n)``, ``write(b)``)."""

    def __init__(
        self,
        port: Any,
        url: str,
        *,
        wait_s: float = 60.0,
        idle_s: float = 3.0,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.port = port
        self.wait_s = wait_s
        self.idle_s = idle_s
        self.say = say
        self.decoder = FrameDecoder(protocol=3)
        self.report = Report(url, 3)
        self.held: list[tuple[float, Frame]] = []

    # -- the line ---------------------------------------------------------------------------
    def _frames(self, seconds: float) -> list[tuple[float, Frame]]:
        """Every frame read in the next ``seconds`` (with the time each came)."""
        out: list[tuple[float, Frame]] = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            data = self.port.read(256)
            now = time.monotonic()
            out += [(now, f) for f in self.decoder.feed(data)]
        return out

    def _until(self, seconds: float, want: Callable[[Frame], bool]) -> tuple[float, Frame] | None:
        """The first good frame ``want`` takes within ``seconds``, reading on the way."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            data = self.port.read(256)
            now = time.monotonic()
            for frame in self.decoder.feed(data):
                if frame.ok and want(frame):
                    return now, frame
        return None

    def _send(self, data: bytes) -> None:
        self.port.write(data)
        self.port.flush()

    # -- the cases ----------------------------------------------------------------------------
    def run(self) -> Report:
        """Every case in order; a case whose ground is missing is not checked."""
        r = self.report
        first = self._until(3.0, lambda f: True)
        if not r.add(
            "line",
            first is not None,
            "a good protocol-3 frame within 3 s"
            if first
            else "no good protocol-3 frame in 3 s (cable, baud, protocol?)",
        ):
            return r
        assert first is not None
        frame = first[1]
        if frame.name is not FrameName.HELLO and frame.session:
            # a reader in a session already: tell it to start anew (the kit holds none)
            self._send(codec.encode_nak(frame.seq or 0, "SESSION", 3, frame.session))
        hello = frame if frame.name is FrameName.HELLO else None
        if hello is None:
            got = self._until(REPEAT_MAX_S + 1.0, lambda f: f.name is FrameName.HELLO)
            hello = got[1] if got else None
        if not r.add(
            "hello_on_nak_session",
            hello is not None,
            "said HELLO" if hello else "no HELLO after NAK SESSION naming its session",
        ):
            return r
        assert hello is not None
        r.model, r.firmware = hello.text(2), hello.text(3)
        session = hello.session or ""
        # the first HELLO is left unanswered: the reader must repeat it, and send no ROLL
        seen = self._frames(REPEAT_MAX_S)
        again = [f for _, f in seen if f.ok and f.name is FrameName.HELLO]
        rolls = [f for _, f in seen if f.ok and f.name is FrameName.ROLL]
        r.add(
            "hello_repeated",
            bool(again) and again[0].session == session,
            f"HELLO {session} repeated" if again else "HELLO not repeated within 1.5 s",
        )
        r.add(
            "no_roll_before_welcome",
            not rolls,
            "no ROLL before the WELCOME" if not rolls else f"ROLL before WELCOME: {rolls[0].raw!r}",
        )
        self._send(codec.encode_welcome(session, 0))
        after = self._frames(REPEAT_MAX_S)
        hellos = [
            f for _, f in after if f.ok and f.name is FrameName.HELLO and f.session == session
        ]
        r.add(
            "welcome_ends_hello",
            not hellos,
            "HELLO stops at the WELCOME" if not hellos else "HELLO repeated after its WELCOME",
        )
        beats = [f for _, f in after if f.ok and f.name is FrameName.HB]
        r.add(
            "heartbeat",
            bool(beats) and all(b.session == session for b in beats),
            "HB of the session at least once a second" if beats else "no HB within 1.5 s",
        )
        self._send(codec.encode_nak(0, "BAD_FRAME", 3, session))
        self._send(
            codec.encode_nak(0, "SESSION", 3, "0BADF00D" if session != "0BADF00D" else "0BADF00E")
        )
        quiet = self._frames(REPEAT_MAX_S)
        moved = [f for _, f in quiet if f.ok and f.name is FrameName.HELLO]
        r.add(
            "naks_ignored",
            not moved,
            "NAK BAD_FRAME and NAK SESSION of another session ignored"
            if not moved
            else "a new HELLO after a NAK it must ignore",
        )
        self._rolls(session)
        return r

    def _rolls(self, session: str) -> None:
        r = self.report
        self.say(f"throw the dice now (waiting up to {self.wait_s:g} s for a ROLL)")
        got = self._until(self.wait_s, lambda f: f.name is FrameName.ROLL and f.session == session)
        if got is None:
            for name in ("roll_repeated", "ack_ends_repeat", "next_number", "idle", "carried"):
                r.add(name, None, f"no ROLL within {self.wait_s:g} s")
            return
        at, roll = got
        number = roll.seq or 0
        r.add("first_number", number == 1, f"the session's first roll is number {number}")
        rep = self._until(REPEAT_MAX_S, lambda f: f.name is FrameName.ROLL and f.session == session)
        ok = rep is not None and rep[1].raw == roll.raw and rep[0] - at >= REPEAT_MIN_S
        r.add(
            "roll_repeated",
            ok,
            "the un-ACKed ROLL repeated, same frame, about every 500 ms"
            if ok
            else "the un-ACKed ROLL was not repeated as it was within 1.5 s",
        )
        self._send(codec.encode_ack(number, 3, session))
        seen = self._frames(REPEAT_MAX_S)
        again = [f for _, f in seen if f.ok and f.raw == roll.raw]
        r.add(
            "ack_ends_repeat",
            not again,
            "the ACK ends the repeats" if not again else "the ROLL was repeated after its ACK",
        )
        later = [f for _, f in seen if f.ok and f.name is FrameName.ROLL and f.raw != roll.raw]
        nxt = later[0] if later else None
        if nxt is None:
            self.say("throw the dice again")
            got = self._until(self.wait_s, lambda f: f.name is FrameName.ROLL and f.raw != roll.raw)
            nxt = got[1] if got else None
        if nxt is None:
            r.add("next_number", None, "no second ROLL")
            r.add("carried", None, "no second ROLL")
        else:
            r.add(
                "next_number",
                nxt.seq == number + 1 and nxt.session == session,
                f"the next roll is number {nxt.seq} of {nxt.session} (want {number + 1})",
            )
            # left un-ACKed, then told to start anew: the HELLO must carry it over
            self._send(codec.encode_nak(nxt.seq or 0, "SESSION", 3, session))
            hello = self._until(REPEAT_MAX_S + 1, lambda f: f.name is FrameName.HELLO)
            carried = hello is not None and (hello[1].text(6), hello[1].text(7)) == (
                session,
                str(nxt.seq),
            )
            r.add(
                "carried",
                carried,
                "the new HELLO carries the un-ACKed roll"
                if carried
                else "the new HELLO does not name the un-ACKed roll",
            )
            if hello is not None and hello[1].session:
                new = hello[1].session
                self._send(codec.encode_welcome(new, number))  # roll number+1 was not applied
                again2 = self._until(self.wait_s, lambda f: f.name is FrameName.ROLL)
                ok = (
                    again2 is not None
                    and again2[1].session == new
                    and again2[1].seq == 1
                    and (again2[1].dice == nxt.dice)
                )
                r.add(
                    "carried_resent",
                    ok,
                    "sent again as the new session's roll 1"
                    if ok
                    else "the carried roll was not sent again as roll 1 of the new session",
                )
                if again2 is not None:
                    self._send(codec.encode_ack(1, 3, new))
                session = new
        beats = [f for _, f in self._frames(self.idle_s) if f.ok and f.name is FrameName.HB]
        numbers = {b.seq or 0 for b in beats}
        r.add(
            "idle",
            len(beats) >= int(self.idle_s) and len(numbers) <= 1,
            f"{len(beats)} HB in {self.idle_s:g} s, numbers {sorted(numbers)} (one, unchanged)",
        )
        r.add(
            "wrap", None, "a new session after roll 65,535: needs 65,535 rolls (by design review)"
        )
