"""SerialDiceReader beyond the contract: opening, backoff, URLs, its supervisor."""

from __future__ import annotations

import errno
import itertools
import logging
import queue
import time
from pathlib import Path
from typing import Any

import pytest
import serial

from controller.core.commands import Command, ReaderFault, ReaderOk, Roll
from drivers.codec import Frame, encode_hb, encode_roll
from drivers.serial_reader import SerialDiceReader, port_problem
from drivers.sim_reader import SimulatedReader


def wait_for(q: queue.Queue[Command], kind: type[Command], timeout: float = 30.0) -> Command:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            command = q.get(timeout=0.05)
        except queue.Empty:
            continue
        if isinstance(command, kind):
            return command
    raise AssertionError(f"no {kind.__name__} within {timeout} s")


def test_missing_port_is_a_fault_until_the_reader_is_plugged_in(tmp_path: Path) -> None:
    link = tmp_path / "ttyUSB-reader"
    q: queue.Queue[Command] = queue.Queue()
    reader = SerialDiceReader(
        str(link), heartbeat_timeout_s=1.0, backoff_s=0.01, backoff_max_s=0.05
    )
    reader.start(q.put)
    try:
        fault = wait_for(q, ReaderFault)
        assert isinstance(fault, ReaderFault) and fault.code == "PORT_LOST"
        assert not reader.status().connected
        with SimulatedReader(link=link, heartbeat_s=0.05):
            wait_for(q, ReaderOk)
            assert reader.status().connected
            assert reader.status().fault is None
    finally:
        reader.stop()


def test_reopen_backoff_grows_and_is_capped(caplog: pytest.LogCaptureFixture) -> None:
    tries: list[float] = []

    def refuse(url: str, **kwargs: Any) -> Any:
        tries.append(time.monotonic())
        raise serial.SerialException(errno.ENOENT, f"could not open port {url}")

    caplog.set_level(logging.DEBUG, logger="drivers.serial_reader")
    reader = SerialDiceReader("/dev/ttyNOPE", backoff_s=0.01, backoff_max_s=0.08, open_fn=refuse)
    reader.start(lambda command: None)
    try:
        wait_for_tries = time.monotonic() + 30  # a busy machine runs the thread late
        while len(tries) < 7:
            assert time.monotonic() < wait_for_tries, f"only {len(tries)} tries"
            time.sleep(0.01)
    finally:
        reader.stop()
    waits = [r.args[1] for r in caplog.records if "next try in" in r.msg]  # type: ignore[index]
    assert waits[:6] == [0.01, 0.02, 0.04, 0.08, 0.08, 0.08]  # grows, then capped
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    for gap, wait in zip(gaps, waits, strict=False):
        assert gap >= wait * 0.9  # and it does wait that long between tries


def test_loop_url_and_on_frame_see_every_verdict() -> None:
    ports: list[Any] = []
    frames: list[Frame] = []

    def opener(url: str, **kwargs: Any) -> Any:
        port = serial.serial_for_url(url, **kwargs)
        ports.append(port)
        return port

    q: queue.Queue[Command] = queue.Queue()
    reader = SerialDiceReader("loop://", open_fn=opener, on_frame=frames.append)
    reader.start(q.put)
    try:
        deadline = time.monotonic() + 30
        while not ports:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        ports[0].write(b"junk$HB,1*00\r\n" + encode_hb(2) + encode_roll(3, 1, 2))
        roll = wait_for(q, Roll)
        assert isinstance(roll, Roll) and (roll.seq, roll.d1, roll.d2) == (3, 1, 2)
        reader.ack(3)  # loops back as an ACK frame: counted, never posted
        deadline = time.monotonic() + 30
        while len(frames) < 4:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert [(f.verdict, f.name) for f in frames] == [
            ("bad_checksum", "HB"),
            ("ok", "HB"),
            ("ok", "ROLL"),
            ("ok", "ACK"),
        ]
        assert reader.acks_sent == 1
    finally:
        reader.stop()


def test_a_failing_post_or_a_broken_port_never_ends_the_reader() -> None:
    calls: list[Command] = []

    def post(command: Command) -> None:
        calls.append(command)
        if len(calls) == 1:
            raise RuntimeError("queue full")

    class Haunted:
        """A port whose first read raises something unexpected, then behaves."""

        reads = 0
        in_waiting = 0

        def read(self, size: int = 1) -> bytes:
            Haunted.reads += 1
            if Haunted.reads == 1:
                raise RuntimeError("driver bug")
            if Haunted.reads in (2, 3):
                return encode_roll(Haunted.reads, 6, 6)
            time.sleep(0.01)
            return b""

        def write(self, data: bytes) -> int:
            return len(data)

        def flush(self) -> None:
            pass

        def close(self) -> None:
            pass

    reader = SerialDiceReader("haunted://", backoff_s=0.01, open_fn=lambda url, **kw: Haunted())
    reader.start(post)
    try:
        deadline = time.monotonic() + 30
        while len([c for c in calls if isinstance(c, Roll)]) < 2:
            assert time.monotonic() < deadline, calls
            time.sleep(0.01)
        assert reader.reopens == 1
        rolls = [c for c in calls if isinstance(c, Roll)]
        assert [r.seq for r in rolls] == [2, 3]  # the post that raised did not stop the next
    finally:
        reader.stop()


def test_port_problem_says_the_fix() -> None:
    denied = serial.SerialException(errno.EACCES, "could not open port /dev/ttyUSB0: denied")
    assert "sudo usermod -aG dialout $USER" in port_problem("/dev/ttyUSB0", denied)
    assert "/dev/ttyUSB0" in port_problem("/dev/ttyUSB0", denied)
    missing = serial.SerialException(errno.ENOENT, "could not open port /dev/ttyUSB0")
    assert "no such device" in port_problem("/dev/ttyUSB0", missing)
    refused = serial.SerialException("Could not open port socket://x:1: Connection refused")
    assert "refused" in port_problem("socket://x:1", refused)


def test_a_device_port_is_read_and_acked_on_its_descriptor_without_tcdrain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a tty the reader reads with one select and one read and writes the ACK with one
    write: no ``flush`` (tcdrain would hold the engine until a real UART sent the ACK)."""
    import termios

    from drivers.serial_reader import device_fd

    drained: list[int] = []
    real = termios.tcdrain
    monkeypatch.setattr(termios, "tcdrain", lambda fd: (drained.append(fd), real(fd))[1])
    q: queue.Queue[Command] = queue.Queue()
    with SimulatedReader(heartbeat_s=0.05) as device:
        reader = SerialDiceReader(device.port, heartbeat_timeout_s=5.0)
        reader.start(q.put)
        try:
            device.throw(3, 4)
            roll = wait_for(q, Roll)
            assert isinstance(roll, Roll) and (roll.d1, roll.d2) == (3, 4)
            assert reader._fd is not None and reader._fd == device_fd(reader._port)
            assert roll.seq is not None
            reader.ack(roll.seq)
            assert device.wait_acked(roll.seq, timeout=30)
            assert drained == []
        finally:
            reader.stop()
    loop = serial.serial_for_url("loop://", timeout=0.05)
    try:
        assert device_fd(loop) is None  # a URL handler: read and written through pyserial
    finally:
        loop.close()
