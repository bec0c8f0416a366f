"""``firebet diag``: the reader monitor as a real process, leds and buttons on mock pins."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.cli.diag.pins import run_leds, watch_buttons
from controller.core.config import load_config
from drivers.codec import checksum
from drivers.pins import make_pin_factory
from drivers.sim_reader import SimulatedReader
from tests.support import ROOT, read_line, wait_for

SUMMARY_KEYS = ["ok", "bad_checksum", "bad_value", "bad_frame", "overlong", "non_ascii"]
EXIT_S = 60.0
"""How long a ``firebet diag`` process may take to finish: a fresh interpreter takes
2 s to start on an idle machine and several times that on a busy one."""


def firebet(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "controller", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    )


@pytest.fixture
def sim() -> Iterator[SimulatedReader]:
    with SimulatedReader(heartbeat_s=0.05, retransmit_s=0.05) as device:
        yield device


def first_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line: str = read_line(proc.stdout, "firebet diag's first line")
    return line


def rest(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The rest of the output and the errors once ``proc`` ends. Unlike ``communicate``,
    which reads the pipes' file descriptors, it keeps what ``first_line`` read ahead."""
    assert proc.stdout is not None and proc.stderr is not None
    streams = {"out": proc.stdout, "err": proc.stderr}
    got: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda k=k, f=f: got.__setitem__(k, f.read()), daemon=True)
        for k, f in streams.items()
    ]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=EXIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
        for reader in readers:
            reader.join(EXIT_S)
        for stream in streams.values():
            stream.close()
    return got["out"], got["err"]


def test_reader_json_carries_the_hellos_model_and_firmware() -> None:
    with SimulatedReader(heartbeat_s=0.3, retransmit_s=0.05) as sim:
        proc = firebet("diag", "reader", "--serial", sim.port, "--json")
        seen = [first_line(proc)]  # the monitor reads: now the reader restarts
        sim.hello()
        while '"HELLO"' not in seen[-1]:
            seen.append(first_line(proc))
            assert seen[-1], "the monitor ended before the HELLO"
        proc.send_signal(signal.SIGTERM)
        rest(proc)
    hello = json.loads(seen[-1])
    assert hello["verdict"] == "ok" and hello["kind"] == "HELLO"
    assert hello["model"] and hello["firmware"], hello


@pytest.mark.slow
def test_reader_json_names_every_verdict() -> None:
    with SimulatedReader(heartbeat_s=0.3, retransmit_s=0.05) as sim:
        proc = firebet("diag", "reader", "--serial", sim.port, "--json")
        line = first_line(proc)  # the monitor reads: now put bad frames and a roll on the line
        sim.send_bad_checksum(2, 2)
        sim.send_raw(b"$ROLL,5,9,1*" + checksum("ROLL,5,9,1").encode() + b"\r\n")
        sim.send_raw(b"$HB,\x01\x02*00\r\n")
        sim.send_raw(b"$" + b"Z" * 90 + b"\r\n")
        sim.send_raw(b"$SPIN,1*" + checksum("SPIN,1").encode() + b"\r\n")
        sim.throw(3, 4)
        # heartbeats may come between them on a busy machine: read up to the good roll
        seen = [line]
        while '"ROLL"' not in seen[-1] or '"ok"' not in seen[-1]:
            seen.append(first_line(proc))
            assert seen[-1], "the monitor ended before the roll"
        proc.send_signal(signal.SIGTERM)
        out, err = rest(proc)
    assert proc.returncode == 0, err
    lines = [json.loads(x) for x in ("".join(seen) + out).splitlines()]
    frames, summary = lines[:-1], lines[-1]
    for frame in frames:  # and the NAK the service answers a frame with (issue 23)
        assert list(frame) in (
            ["verdict", "kind", "seq", "dice"],
            ["verdict", "kind", "seq", "dice", "nak"],
            ["verdict", "kind", "seq", "dice", "model", "firmware"],  # a HELLO's (issue 33)
        )
    assert [f["nak"] for f in frames if "nak" in f] == [
        {"seq": 5, "reason": "BAD_VALUE", "protocol": 2}
    ]
    assert frames[0] == {"verdict": "ok", "kind": "HB", "seq": frames[0]["seq"], "dice": None}
    not_hb = [f for f in frames[1:] if f["kind"] != "HB" or f["verdict"] != "ok"]
    verdicts = [f["verdict"] for f in not_hb]
    assert verdicts[:5] == ["bad_checksum", "bad_value", "non_ascii", "overlong", "bad_frame"]
    assert not_hb[5]["kind"] == "ROLL" and not_hb[5]["dice"] == [3, 4]
    assert isinstance(not_hb[5]["seq"], int)
    assert not_hb[1]["seq"] is None and not_hb[1]["dice"] is None
    assert list(summary) == ["summary"]
    assert list(summary["summary"]) == SUMMARY_KEYS
    assert summary["summary"]["bad_checksum"] == 1
    assert summary["summary"]["bad_value"] == 1
    assert sum(summary["summary"].values()) == len(frames)
    assert summary["summary"]["ok"] == [f["verdict"] for f in frames].count("ok")


@pytest.mark.slow
def test_reader_count_stops_after_that_many_frames(sim: SimulatedReader) -> None:
    proc = firebet("diag", "reader", "--serial", sim.port, "--json", "--count", "3")
    out, err = proc.communicate(timeout=EXIT_S)
    assert proc.returncode == 0, err
    *frames, summary = [json.loads(x) for x in out.splitlines()]
    assert len(frames) == 3
    assert sum(summary["summary"].values()) == 3


@pytest.mark.slow
def test_reader_sigterm_prints_the_summary(sim: SimulatedReader) -> None:
    proc = firebet("diag", "reader", "--serial", sim.port, "--json")
    frames = [json.loads(first_line(proc)), json.loads(first_line(proc))]
    assert [f["verdict"] for f in frames] == ["ok", "ok"]
    proc.send_signal(signal.SIGTERM)
    out, err = rest(proc)
    assert proc.returncode == 0, err
    last = json.loads(out.splitlines()[-1])
    assert last["summary"]["ok"] >= 2


@pytest.mark.slow
def test_reader_readable_output_and_ack(sim: SimulatedReader) -> None:
    sim.throw(6, 6)
    proc = firebet("diag", "reader", "--serial", sim.port, "--count", "6", "--ack")
    out, err = proc.communicate(timeout=EXIT_S)
    assert proc.returncode == 0, err
    lines = out.splitlines()
    assert any(x.startswith("ok") and "ROLL" in x and "dice 6 6" in x for x in lines)
    assert lines[-1].startswith("summary: ok ")
    assert sim.acked  # --ack answered the roll


@pytest.mark.slow
def test_reader_missing_port_says_which_and_the_fix(tmp_path: Path) -> None:
    proc = firebet("diag", "reader", "--serial", str(tmp_path / "ttyUSB7"), "--count", "1")
    _out, err = proc.communicate(timeout=EXIT_S)
    assert proc.returncode == 1
    assert "ttyUSB7" in err and "no such device" in err


@pytest.mark.slow
def test_reader_port_not_permitted_says_dialout(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may open any port")
    port = tmp_path / "ttyS9"
    port.write_text("")
    port.chmod(0)
    proc = firebet("diag", "reader", "--serial", str(port), "--count", "1")
    _out, err = proc.communicate(timeout=EXIT_S)
    assert proc.returncode == 1
    assert "sudo usermod -aG dialout $USER" in err


@pytest.mark.slow
def test_leds_without_gpio_names_the_pins_and_the_fix() -> None:
    proc = firebet("diag", "leds", "--pin-factory", "lgpio", "--step", "0")
    _out, err = proc.communicate(timeout=EXIT_S)
    try:
        import lgpio  # noqa: F401
    except ImportError:
        assert proc.returncode == 1
        assert "lights.markers.4 BCM 5" in err and "gpio group" in err
    else:  # pragma: no cover - on a Pi
        pytest.skip("lgpio is installed here")


@pytest.mark.slow
def test_leds_walk_each_marker_then_lamp_test() -> None:
    proc = firebet("diag", "leds", "--pin-factory", "mock", "--step", "0.01", "--json")
    out, err = proc.communicate(timeout=EXIT_S)
    assert proc.returncode == 0, err
    steps = [json.loads(x) for x in out.splitlines()]
    walked = [s["lamp"] for s in steps if s["lamp"].startswith("marker")]
    assert walked == [f"marker {p}" for p in (4, 5, 6, 8, 9, 10)]
    assert [s["pin"] for s in steps[:6]] == [5, 6, 13, 19, 26, 21]
    assert [s["state"] for s in steps if s["lamp"] == "lamp test"] == ["all on", "fault pattern"]
    assert steps[-1]["state"] == "off"


def test_leds_in_process_lights_each_pin() -> None:
    out = io.StringIO()
    args = Namespace(config=None, pin_factory="mock", step=0.0, count=1, relay=True, json=False)
    # run_leds makes its own mock factory; the pins' recorded history proves the walk
    from gpiozero.pins.mock import MockFactory

    made: list[MockFactory] = []
    original = MockFactory.__init__

    def spy(self: MockFactory, *a: object, **kw: object) -> None:
        original(self, *a, **kw)
        made.append(self)

    MockFactory.__init__ = spy  # type: ignore[method-assign]
    try:
        assert run_leds(args, out) == 0
    finally:
        MockFactory.__init__ = original  # type: ignore[method-assign]
    [factory] = made
    cfg = load_config()
    for pin in [*cfg.lights.markers.values(), cfg.lights.status, cfg.lights.surveillance]:
        states = [s.state for s in factory.pin(pin).states]
        assert 1 in states and states[-1] == 0, pin  # lit at some point, off at the end
    assert "surveillance relay" in out.getvalue()
    factory.reset()


def test_buttons_watch_until_count() -> None:
    cfg = load_config()
    factory = make_pin_factory("mock")
    out = io.StringIO()
    result: list[dict[str, dict[str, int]]] = []
    thread = threading.Thread(
        target=lambda: result.append(watch_buttons(cfg, factory, out, as_json=True, count=2))
    )
    thread.start()
    try:
        pins = (cfg.buttons.void, cfg.buttons.surrender, cfg.buttons.ack)
        wait_for(lambda: all(factory.pin(p).pull == "up" for p in pins), what="the buttons set up")
        time.sleep(0.05)
        factory.pin(cfg.buttons.void).drive_low()
        time.sleep(0.05)
        factory.pin(cfg.buttons.void).drive_high()  # a brush
        factory.pin(cfg.buttons.ack).drive_low()
        # released only once the hold is confirmed, however late gpiozero's thread runs
        wait_for(lambda: '"held"' in out.getvalue(), what="the hold to be confirmed")
        factory.pin(cfg.buttons.ack).drive_high()  # a confirmed hold
        thread.join(timeout=EXIT_S)
        assert not thread.is_alive()
    finally:
        factory.reset()
    assert result == [
        {
            "void": {"presses": 1, "held": 0},
            "surrender": {"presses": 0, "held": 0},
            "ack": {"presses": 1, "held": 1},
            "apply_held": {"presses": 0, "held": 0},
            "discard_held": {"presses": 0, "held": 0},
        }
    ]
    events = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [(e["button"], e["event"]) for e in events] == [
        ("void", "pressed"),
        ("void", "released"),
        ("ack", "pressed"),
        ("ack", "held"),
        ("ack", "released"),
    ]
    assert events[0]["pin"] == cfg.buttons.void


@pytest.mark.slow
def test_buttons_without_gpio_exit_1() -> None:
    proc = firebet("diag", "buttons", "--pin-factory", "pigpio", "--count", "1")
    _out, err = proc.communicate(timeout=EXIT_S)
    assert proc.returncode == 1
    assert "buttons.void BCM 17" in err and "pigpio" in err


@pytest.mark.slow
def test_reader_warns_when_nothing_at_all_came(tmp_path: Path) -> None:
    with SimulatedReader(heartbeat_s=None, hello=False) as silent:
        proc = firebet("diag", "reader", "--serial", silent.port)
        target = os.path.realpath(silent.port)

        def port_open() -> bool:
            fds = Path(f"/proc/{proc.pid}/fd")
            return any(os.path.realpath(fd) == target for fd in fds.iterdir())

        wait_for(port_open, what="the monitor to open the port")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=EXIT_S)
    assert out.splitlines()[-1].startswith("summary: ok 0")
    assert proc.returncode == 1
    assert "warning: nothing at all came from" in err and "reader.baud" in err


@pytest.mark.slow
def test_buttons_print_a_summary_when_stopped() -> None:
    proc = firebet("diag", "buttons", "--pin-factory", "mock")
    assert first_line(proc).startswith("press the buttons")
    proc.send_signal(signal.SIGTERM)
    out, err = rest(proc)
    assert proc.returncode == 0, err
    assert out.splitlines()[-1] == (
        "summary: void 0 pressed, 0 held, surrender 0 pressed, 0 held, ack 0 pressed, 0 held, "
        "apply_held 0 pressed, 0 held, discard_held 0 pressed, 0 held"
    )
