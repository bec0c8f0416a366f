"""The bench device's op: the simulated reader of a bench service, driven through the socket.

A bench tester has no dice reader: ``firebet run --simulated-reader`` and ``firebet sim``
start a :class:`~drivers.sim_reader.SimulatedReader` device on a pseudo-terminal and read
it with the real :class:`~drivers.serial_reader.SerialDiceReader`, so every frame goes
through the same driver, engine, journal and ACK as at a live table. The ``sim-reader``
request (``firebet sim-reader ACTION``, technician) makes the device throw, fault, go
silent, be unplugged or send garbage; see ``docs/bench.md``.

Only those two compositions register the op (:func:`with_bench_device`, from
:func:`controller.cli.run.assemble`): the table's service knows nothing of it, and a real
table's socket answers ``sim-reader`` as an unknown op.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from controller.control.ops import BENCH_ROLES, ROLES, Op, Role
from controller.control.protocol import Handler, Request
from controller.core.errors import UsageError
from controller.core.lamps import Mode
from controller.core.table import HeldRoll
from controller.service.status import Published

if TYPE_CHECKING:
    from drivers.sim_reader import SimulatedReader

ACTIONS: dict[str, str] = {
    "throw": "throw the dice (D1 D2, or random); waits for the controller's ACK",
    "fault": "the reader raises a fault (CODE, default CAMERA)",
    "ok": "the reader clears its fault (OK frame)",
    "noroll": "an invalid throw (REASON, default COCKED)",
    "garbage": "N random bytes of line noise (default 48) and a ROLL with a bad checksum",
    "silence": "say nothing for S seconds (default: until speak): a HEARTBEAT fault",
    "speak": "end a silence",
    "unplug": "pull the cable: the port vanishes (PORT_LOST)",
    "replug": "plug the cable back in",
    "hello": "the reader restarts: HELLO, sequence numbers from 0",
}

ACK_WAIT_S = 5.0  # how long a throw waits for its ACK before saying it is still pending
SEND_WAIT_S = 2.0  # how long a throw waits for the reader to put it on the line


def _text(args: Mapping[str, Any], name: str, default: str) -> str:
    value = args.get(name, default)
    if not isinstance(value, str) or not value or not value.isascii() or not value.isalnum():
        raise UsageError(f"{name} must be letters and digits, not {value!r}")
    return value.upper()


def _number(args: Mapping[str, Any], name: str, default: float | None, low: float) -> float | None:
    """A number of at least ``low``: ``name`` as a whole number, or ``name_ms`` in whole
    thousandths (the socket takes whole numbers only: ``silence 0.5`` is 500 ms)."""
    millis = args.get(f"{name}_ms")
    if millis is not None:
        if isinstance(millis, bool) or not isinstance(millis, int) or millis < low * 1000:
            raise UsageError(f"{name}_ms must be a whole number of at least {low * 1000:g}")
        return millis / 1000
    value = args.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < low:
        raise UsageError(f"{name} must be a number of at least {low:g}, not {value!r}")
    return float(value)


def _die(args: Mapping[str, Any], name: str) -> int:
    value = args.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 6:
        raise UsageError(f"{name} must be a die from 1 to 6, not {value!r}")
    return value


def _throw(
    device: SimulatedReader, args: Mapping[str, Any], held: Callable[[], Sequence[HeldRoll]]
) -> dict[str, Any]:
    if args.get("d1") is None and args.get("d2") is None:
        rng = random.Random()
        d1, d2 = rng.randint(1, 6), rng.randint(1, 6)
    else:
        d1, d2 = _die(args, "d1"), _die(args, "d2")
    wait_s = _number(args, "wait", ACK_WAIT_S, 0.0) or 0.0
    before = set(device.transmissions)
    device.throw(d1, d2)
    seq: int | None = None
    deadline = time.monotonic() + min(wait_s, SEND_WAIT_S)
    while True:
        fresh = set(device.transmissions) - before
        if fresh:
            seq = max(fresh)
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.005)
    said = f"thrown {d1} {d2}"
    if seq is None:
        if not device.plugged:
            why = "the reader is unplugged: it goes out when plugged back in"
        elif device.silent:
            why = "the reader is silent: it goes out when it speaks again"
        else:
            why = "the reader still waits for the ACK of an earlier roll"
        # pending: the bench tester unplugged or silenced the reader, which keeps the throw
        # and sends it later; otherwise an earlier roll still waits for its ACK (halted)
        pending = not device.plugged or device.silent
        return {
            "ok": True, "dice": [d1, d2], "seq": None, "acked": False, "pending": pending,
            "said": f"{said}; {why}",
        }  # fmt: skip
    acked = device.wait_acked(seq, timeout=wait_s)
    # the snapshot is published before the ACK goes out: a roll held is in it by now
    number = next((h.number for h in held() if (h.seq, h.d1, h.d2) == (seq, d1, d2)), None)
    if acked and number is not None:
        said += (
            f" (seq {seq}): ACKed but HELD by the controller as held roll {number}, not "
            f"counted: a roll was keyed by hand. firebet held apply {number} counts it, "
            f"firebet held discard {number} drops it"
        )
    elif acked:
        said += f" (seq {seq}): ACKed by the controller"
    else:
        said += (
            f" (seq {seq}): not ACKed within {wait_s:g} s; the reader repeats it until it is "
            "(the controller does not ACK while halted or in diagnostics mode)"
        )
    return {
        "ok": True, "dice": [d1, d2], "seq": seq, "acked": acked, "held": number, "said": said
    }  # fmt: skip


def _until(done: Callable[[], bool], timeout: float) -> bool:
    """Wait until ``done()`` (on the socket's lane thread, never the engine's); False at
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def with_bench_device(
    handler: Handler, device: SimulatedReader, published: Callable[[], Published | None]
) -> tuple[Handler, dict[str, Role]]:
    """The control socket's handler and roles of a bench service: ``sim-reader`` answered
    by :func:`act` on ``device``, every other op by the service's ``handler``."""

    def on_request(request: Request) -> Any:
        if request.op == Op.SIM_READER:
            return act(device, request.args, published)
        return handler(request)

    return on_request, ROLES | BENCH_ROLES


def act(
    device: SimulatedReader,
    args: Mapping[str, Any],
    published: Callable[[], Published | None] = lambda: None,
) -> dict[str, Any]:
    """Carry out one ``sim-reader`` request on the device; the reply says what happened.
    ``published``: the table's last snapshot (a throw it holds says so; a fault or its end
    is waited for until the table shows it, so the next command finds the table there)."""

    def held() -> Sequence[HeldRoll]:
        now = published()
        return now.state.held if now is not None else ()

    def table_in_fault() -> bool | None:
        now = published()
        return None if now is None else now.mode == Mode.READER_FAULT

    action = args.get("action")
    if action not in ACTIONS:
        known = ", ".join(ACTIONS)
        raise UsageError(f"unknown simulated reader action {action!r}; one of: {known}")
    if action == "throw":
        return _throw(device, args, held)
    if action == "fault":
        code = _text(args, "code", "CAMERA")
        device.fault(code)
        said = f"reader fault {code} raised: manual rolls are taken (firebet roll D1 D2)"
        if not _until(lambda: table_in_fault() is not False, ACK_WAIT_S):
            said = f"reader fault {code} sent, but the table does not show it yet (status)"
    elif action == "ok":
        device.clear_fault()
        said = "reader fault cleared (OK frame sent)"
        if not _until(lambda: table_in_fault() is not True, ACK_WAIT_S):
            said += "; the table is still in reader fault (status says why)"
    elif action == "noroll":
        reason = _text(args, "reason", "COCKED")
        device.noroll(reason)
        said = f"NOROLL {reason} sent"
    elif action == "garbage":
        size = int(_number(args, "size", 48, 1) or 48)
        device.send_garbage(min(size, 4096))
        device.send_bad_checksum()
        said = f"{min(size, 4096)} bytes of garbage and a ROLL with a bad checksum sent"
    elif action == "silence":
        seconds = _number(args, "seconds", None, 0.0)
        device.silence(seconds)
        said = "reader silent " + (f"for {seconds:g} s" if seconds is not None else "until speak")
    elif action == "speak":
        device.speak()
        said = "reader speaks again"
    elif action == "unplug":
        device.unplug()
        said = "reader unplugged: the port is gone"
    elif action == "replug":
        device.replug()
        said = "reader plugged back in"
    else:
        device.hello()
        said = "reader restarted: HELLO sent"
    return {"ok": True, "said": said}
