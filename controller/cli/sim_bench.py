"""The bench behind ``firebet sim``: the real service on a simulated reader and mock pins.

:class:`Bench` starts the whole controller (engine, journal, the real serial reader
driver, lamps, buttons, control socket) against a
:class:`~drivers.sim_reader.SimulatedReader` on a pseudo-terminal, puts seeded players'
fire bets on each new shooter, keeps the lines the screen shows, and turns each key
into what a dealer or technician would do. :mod:`controller.cli.sim` draws it.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

from controller.cli import options as paths
from controller.cli.run import assemble, serial_reader, simulated_reader
from controller.cli.wording import count, hand_line, paid_line
from controller.core.commands import (
    Ack,
    ApplyHeld,
    Bet,
    Command,
    DiscardHeld,
    Roll,
    Surrender,
    Void,
)
from controller.core.config import with_broker
from controller.core.errors import UsageError
from controller.core.lamps import Mode
from controller.core.script import parse_script, script_lines
from controller.core.state import Phase
from controller.service.service import Service
from controller.service.status import Published
from drivers.pins import make_pin_factory
from drivers.sim_reader import SimulatedReader

MANUAL_PROMPT = "manual roll (Esc cancels), type the two dice:"
HELP = (  # two rows of at most 76 columns: inside the table's border on 80
    "keys: [v]oid [s]urrender [a]ck [t]hrow [f]ault [g]arbage [u]nplug/replug\n"
    "      [m]anual roll  held: [h] apply [x] discard (oldest) [X] all  [q]uit"
)


class Bench:
    """The simulated table: the controller, its simulated reader, and seeded players."""

    def __init__(self, args: argparse.Namespace) -> None:
        where = paths.locate(args, simulated=True)
        self.state_dir = where.state_dir
        config = where.config
        self.config = with_broker(config, args.broker) if getattr(args, "broker", None) else config
        self.seed = args.seed if args.seed is not None else random.randrange(1_000_000)
        self.players = random.Random(self.seed + 1)
        self.bets_on = not args.no_bets
        script: list[tuple[int, Command]] = []
        if args.script:
            try:
                with Path(args.script).open(encoding="utf-8", newline="") as f:
                    text = f.read()  # newline="": only "\n" ends a script line
            except (OSError, UnicodeDecodeError) as exc:
                why = getattr(exc, "strerror", None) or exc
                raise UsageError(f"{args.script}: cannot read the script: {why}") from exc
            script = list(parse_script(script_lines(text), args.script))
        self.script = script
        self.target = args.rolls
        # on the same stable link as run --simulated-reader: unplug and replug recover,
        # and the driver never opens a terminal that is not this reader's
        self.device: SimulatedReader = simulated_reader(
            self.config,
            self.state_dir,
            seed=self.seed,
            interval_s=None if script else args.interval,
            rolls=args.rolls,
            heartbeat_s=0.5,
        )
        self.recent: list[tuple[int, int]] = []
        self.settlements: list[dict[str, Any]] = []  # this session's, reversed ones taken out
        self._before_latest: dict[str, Any] | None = None
        self.lines: list[str] = []  # what --plain prints: settlements and their reversals
        self.session_rolls = 0
        self.manual: str | None = None  # the dice typed so far while entering a manual roll
        self.changed = threading.Event()
        self.script_done = threading.Event()
        self.controller: Service | None = None
        self._last_rolls: int | None = None
        self._last_hand: int | None = None
        self.paused: str | None = None  # why the thrower waits (None: it throws)
        self.holding = False  # the thrower waits until release() (see start)

    # wiring ---------------------------------------------------------------------------
    def start(self, *, hold: bool = False) -> Service:
        """Start the reader device and the service (on a thread of its own); whatever
        fails on the way stops what was started, and is raised. ``hold``: the shooter
        throws nothing until :meth:`release` (the sim first says where the table it
        resumes stands: read after a throw, it was off by that throw)."""
        self.holding = hold
        self.device.pause_throws(hold)
        self.device.start()
        try:
            controller = assemble(
                self.config,
                self.state_dir,
                reader=serial_reader(self.config, self.device.port, self.device),
                pin_factory=make_pin_factory("mock"),
                socket_path=paths.socket_path(self.config, None, self.state_dir),
                on_change=self._on_change,
                bench_device=self.device,
            )
        except BaseException:
            self.device.stop()
            raise
        self.controller = controller
        started = threading.Event()
        failure: list[BaseException] = []

        def engine_thread() -> None:
            try:
                controller.start()
            except BaseException as exc:
                failure.append(exc)
                started.set()
                return
            started.set()
            controller.serve()

        self.thread = threading.Thread(target=engine_thread, name="engine", daemon=True)
        self.thread.start()
        started.wait()
        if failure:
            self.controller = None
            controller.close()
            self.device.stop()
            raise failure[0]
        return controller

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.thread.join(timeout=10)
            self.controller.close()
        self.device.stop()

    def _on_change(self, published: Published) -> None:
        """On the engine thread after every change: keep the roll list, seat new bets."""
        state = published.state
        if self._last_rolls is not None and state.rolls > self._last_rolls and state.last_roll:
            self.recent.append(state.last_roll)
            self.session_rolls += 1
        elif self._last_rolls is not None and state.rolls < self._last_rolls and self.recent:
            self.recent.pop()  # voided: it never counted
            self.session_rolls -= 1
        self._last_rolls = state.rolls
        self._pause_thrower(published)
        settlement = published.last_settlement
        latest = self.settlements[-1] if self.settlements else None
        if latest is not None and settlement is not latest and settlement is self._before_latest:
            # a void reversed the seven-out: that hand plays on, nothing was settled
            self.settlements.pop()
            self._before_latest = None
            self.lines.append(f"hand {latest['hand']}: settlement reversed by a void; it plays on")
        elif settlement is not None and settlement is not latest:
            self._before_latest = latest
            self.settlements.append(settlement)
            self.lines.append(_settlement_line(settlement))
        if (
            self.bets_on
            and not self.script
            and state.phase is Phase.NEW_SHOOTER
            and state.betting_open
            and state.hand != self._last_hand
        ):
            self._last_hand = state.hand
            assert self.controller is not None
            rules = self.config.firebet
            seats = self.players.sample(range(1, rules.positions + 1), self.players.randint(1, 4))
            for seat in sorted(seats):
                steps = (rules.max_wager - rules.min_wager) // rules.wager_increment
                amount = rules.min_wager + self.players.randint(0, steps) * rules.wager_increment
                self.controller.post(Bet(seat, amount, actor="sim-player"))
        self.changed.set()

    def _pause_thrower(self, published: Published) -> None:
        """The shooter waits while the reader is in fault (the dealer keys the rolls: m)
        and while held rolls wait for the dealer (h, x, X): a throw then would only be
        held too (docs/bench.md)."""
        held = len(published.state.held)
        if published.mode == Mode.READER_FAULT:
            why: str | None = "thrower waits: reader fault (key the rolls with m)"
        elif held:
            why = f"thrower waits: {count(held, 'held roll')} to decide (h, x, X)"
        else:
            why = None
        if why != self.paused:
            self.paused = why
            self.device.pause_throws(why is not None or self.holding)

    def release(self) -> None:
        """Let the shooter throw (after ``start(hold=True)``), unless the table makes him
        wait."""
        self.holding = False
        self.device.pause_throws(self.paused is not None)

    # the script ---------------------------------------------------------------------------
    def run_script(self) -> None:
        """Throw the script's dice through the simulated reader; post its dealer actions."""
        assert self.controller is not None
        try:
            self._run_script_lines()
        finally:
            self.script_done.set()

    def _run_script_lines(self) -> None:
        assert self.controller is not None
        for no, command in self.script:
            if self.controller.stopping.is_set():
                return
            if isinstance(command, Roll):
                before = self.device.transmissions.copy()
                self.device.throw(command.d1, command.d2)
                seq = self._new_seq(before)
                if seq is None or not self.device.wait_acked(seq, timeout=10):
                    print(f"{no}: roll {command.d1} {command.d2} was not ACKed", file=sys.stderr)
            else:
                reply = self.controller.submit(command)
                if not reply.get("ok"):
                    print(f"{no}: refused: {reply.get('error')}", file=sys.stderr)

    def _new_seq(self, before: dict[int, int], timeout: float = 5.0) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fresh = [s for s in self.device.transmissions if s not in before]
            if fresh:
                return fresh[-1]
            time.sleep(0.005)
        return None

    def done(self) -> bool:
        """With ``--rolls N`` or a script: every roll thrown and ACKed."""
        if self.script:
            return self.script_done.is_set() and self.device.rolls_waiting == 0
        if self.target is None:
            return False
        return self.device.rolls_left == 0 and self.device.rolls_waiting == 0

    # keys -------------------------------------------------------------------------------
    def key(self, ch: str) -> str:
        """Act on one key; returns a line for the footer.

        ``m`` starts a manual roll: the next keys are its two dice (spaces ignored,
        Esc cancels), read by :meth:`manual_key` while the table keeps drawing.
        """
        c = self.controller
        assert c is not None
        if self.manual is not None:
            return self.manual_key(ch)
        if ch == "v":
            return _said(c.submit(Void(actor="sim-dealer")), "last roll voided")
        if ch == "s":
            return _said(c.submit(Surrender(actor="sim-dealer")), "surrender: new shooter")
        if ch == "a":
            return _said(c.submit(Ack(actor="sim-dealer")), "alert acknowledged")
        if ch == "t":
            rng = random.Random()
            self.device.throw(rng.randint(1, 6), rng.randint(1, 6))
            return "dice thrown"
        if ch == "f":
            if not self.device.plugged:
                return "the reader is unplugged: plug it back in (u) before a fault"
            # the toggle follows the reader itself, not a count of presses
            if c.status()["reader"]["fault"] is None:
                self.device.pause_throws()  # before the fault: no throw slips in between
                self.device.fault("CAMERA")
                return "reader fault injected (CAMERA): manual rolls allowed (m)"
            self.device.clear_fault()
            return "reader fault cleared (OK frame)"
        if ch == "g":
            self.device.send_garbage(48)
            self.device.send_bad_checksum()
            return "garbage and a bad checksum sent"
        if ch == "u":
            if self.device.plugged:
                self.device.unplug()
                return "reader unplugged"
            self.device.replug()
            return "reader plugged back in"
        if ch in ("h", "x"):  # the oldest reader roll held after manual entry
            if ch == "h":
                return _said(c.submit(ApplyHeld(actor="sim-dealer")), "held roll applied")
            return _said(c.submit(DiscardHeld(actor="sim-dealer")), "held roll discarded")
        if ch == "X":
            return self.discard_all()
        if ch == "m":
            self.manual = ""
            return MANUAL_PROMPT
        return HELP

    def discard_all(self) -> str:
        """Discard every held roll, each journaled as the dealer's discard (``X``)."""
        assert self.controller is not None
        numbers = [h["number"] for h in self.controller.status()["held_rolls"]]
        if not numbers:
            return "no held rolls to discard"
        for n in numbers:
            reply = self.controller.submit(DiscardHeld(number=n, actor="sim-dealer"))
            if not reply.get("ok"):
                return f"refused: {reply.get('error')}"
        return f"{count(len(numbers), 'held roll')} discarded"

    def manual_key(self, ch: str) -> str:
        """One key of a manual roll's entry; the roll goes in at its second die."""
        assert self.controller is not None and self.manual is not None
        if ch in ("\x1b", "q"):
            self.manual = None
            return "manual roll cancelled"
        if ch in " ,\r\n":
            return f"{MANUAL_PROMPT} {self.manual}"
        if ch not in "123456":
            return f"{MANUAL_PROMPT} {self.manual}  (dice show 1 to 6, not {ch!r})"
        self.manual += ch
        if len(self.manual) < 2:
            return f"{MANUAL_PROMPT} {self.manual}"
        d1, d2 = int(self.manual[0]), int(self.manual[1])
        self.manual = None
        reply = self.controller.submit(Roll(d1, d2, source="manual", actor="sim-dealer"))
        return _said(reply, f"manual roll {d1} {d2} entered")


def _settlement_line(s: dict[str, Any]) -> str:
    """``hand 3: 2 different points (4, 6) - lose - #3 lost $5``: as the table shows it."""
    hand = hand_line(s["hand"], s["unique_points"], s["points"], s["result"], s["odds_to_one"])
    return f"{hand} - {paid_line(s)}"


def _said(reply: dict[str, Any], done: str) -> str:
    return done if reply.get("ok") else f"refused: {reply.get('error')}"
