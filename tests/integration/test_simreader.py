"""The simulated reader device, seen from the controller's end of the cable with pyserial."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import serial

from drivers.codec import Frame, FrameDecoder, encode_ack
from drivers.sim_reader import SimulatedReader
from tests.support import wait_for


class Line:
    """The controller's end: a pyserial port and a decoder."""

    def __init__(self, url: str) -> None:
        self.port = serial.serial_for_url(url, timeout=0.02)
        self.decoder = FrameDecoder()
        self.raw = b""
        self.unread: list[Frame] = []  # decoded after the frame ``until`` looked for

    def frames(self, seconds: float) -> list[tuple[float, Frame]]:
        """The frames read in the next ``seconds`` (the unread ones first, at 0.0)."""
        out = [(0.0, f) for f in self.unread]
        self.unread = []
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            data = self.port.read(256)
            self.raw += data
            out.extend((time.monotonic() - start, f) for f in self.decoder.feed(data))
        return out

    def gather(self, enough: Callable[[list[Frame]], bool], timeout: float = 30.0) -> list[Frame]:
        """Read frames until ``enough(frames so far)`` holds (a deadline, not a duration)."""
        got: list[Frame] = []
        deadline = time.monotonic() + timeout
        while not enough(got):
            if time.monotonic() > deadline:
                raise AssertionError(f"not enough frames within {timeout} s: {got[-10:]}")
            got.extend(f for _, f in self.frames(0.02))
        return got

    def until(self, name: str, timeout: float = 30.0) -> Frame:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = [f for _, f in self.frames(0.02)]
            for i, frame in enumerate(got):
                if frame.ok and frame.name == name:
                    self.unread = got[i + 1 :]  # the next reader's, not dropped
                    return frame
        raise AssertionError(f"no {name} frame within {timeout} s")

    def ack(self, seq: int) -> None:
        self.port.write(encode_ack(seq))
        self.port.flush()


@pytest.fixture(params=["pty", "tcp"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def open_pair(transport: str, **kwargs: object) -> tuple[SimulatedReader, Line]:
    sim = SimulatedReader(transport=transport, **kwargs).start()  # type: ignore[arg-type]
    try:
        return sim, Line(sim.port)
    except BaseException:
        sim.stop()
        raise


@pytest.fixture
def pair(transport: str) -> Iterator[tuple[SimulatedReader, Line]]:
    sim, line = open_pair(transport, heartbeat_s=0.05, retransmit_s=0.1)
    try:
        line.until("HB", timeout=30.0)  # connected: over tcp, frames sent before are lost
        yield sim, line
    finally:
        line.port.close()
        sim.stop()


def test_pty_port_is_a_link_to_the_terminal_never_its_number() -> None:
    with SimulatedReader() as sim:
        assert Path(sim.port).is_symlink() and not sim.port.startswith("/dev/pts/")
        assert os.path.realpath(sim.port).startswith("/dev/pts/")


def test_heartbeats_count_up(pair: tuple[SimulatedReader, Line]) -> None:
    _sim, line = pair
    frames = line.gather(lambda got: len([f for f in got if f.name == "HB"]) >= 3)
    hbs = [f for f in frames if f.name == "HB"]
    assert all(f.ok for f in hbs)
    seqs = [f.seq for f in hbs if f.seq is not None]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_unacked_roll_repeats_with_same_seq_until_acked(
    pair: tuple[SimulatedReader, Line],
) -> None:
    sim, line = pair
    sim.throw(2, 3)
    frames = line.gather(lambda got: len([f for f in got if f.name == "ROLL"]) >= 3)
    rolls = [f for f in frames if f.name == "ROLL"]
    assert {f.seq for f in rolls} == {rolls[0].seq}
    assert all(f.dice == (2, 3) for f in rolls)
    seq = rolls[0].seq
    assert seq is not None and sim.pending_seq == seq
    line.ack(seq)
    assert sim.wait_acked(seq)
    sent = sim.transmissions[seq]
    line.frames(0.3)  # three repeat periods
    assert sim.transmissions[seq] == sent  # not sent again once ACKed
    assert sim.pending_seq is None


def test_ack_of_another_seq_does_not_stop_the_repeats(pair: tuple[SimulatedReader, Line]) -> None:
    sim, line = pair
    sim.throw(6, 6)
    seq = line.until("ROLL").seq
    assert seq is not None
    line.ack((seq + 1) % 65536)
    before = sim.transmissions[seq]
    # the second repeat from now comes from a tick that read the line after the ACK
    wait_for(lambda: sim.transmissions[seq] >= before + 2, what="the roll to be repeated")
    assert sim.pending_seq == seq


def test_script_then_seeded_random_rolls(transport: str) -> None:
    def play(seed: int) -> list[tuple[int, int]]:
        sim, line = open_pair(
            transport, script=[(1, 1), (6, 5)], seed=seed, interval_s=0.0, rolls=4
        )
        got: list[tuple[int, int]] = []
        try:
            while len(got) < 6:
                frame = line.until("ROLL")
                assert frame.dice is not None and frame.seq is not None
                got.append(frame.dice)
                line.ack(frame.seq)
                assert sim.wait_acked(frame.seq)
            assert not [f for _, f in line.frames(0.1) if f.name == "ROLL"]  # rolls=4 is the end
        finally:
            line.port.close()
            sim.stop()
        return got

    first = play(seed=11)
    assert first[:2] == [(1, 1), (6, 5)]
    assert play(seed=11) == first


def test_silence_then_speak(pair: tuple[SimulatedReader, Line]) -> None:
    sim, line = pair
    line.frames(0.05)
    sim.silence()
    line.frames(0.03)  # what was already on the wire
    assert line.frames(0.25) == []
    sim.speak()
    assert line.until("HB")


def test_silence_for_a_while(pair: tuple[SimulatedReader, Line]) -> None:
    sim, line = pair
    silent_until = time.monotonic() + 2.0
    sim.silence(2.0)
    line.frames(0.03)  # what was on its way already
    # quiet up to the last moment of its silence, however late this thread runs
    quiet = line.frames(silent_until - 0.1 - time.monotonic())
    assert quiet == []
    assert line.until("HB")


def test_faults_noroll_garbage_and_bad_checksum(pair: tuple[SimulatedReader, Line]) -> None:
    sim, line = pair
    sim.fault("CAMERA")
    sim.noroll("OFFTABLE")
    sim.clear_fault()
    sim.send_bad_checksum()
    garbage = sim.send_garbage(40)
    frames = line.gather(lambda got: len([f for f in got if f.name != "HB"]) >= 4)
    frames += line.gather(lambda _: garbage in line.raw)
    kinds = [(f.verdict, f.name) for f in frames if f.name != "HB"]
    assert kinds[:4] == [
        ("ok", "FAULT"),
        ("ok", "NOROLL"),
        ("ok", "OK"),
        ("bad_checksum", "ROLL"),
    ]
    assert [f.text(2) for f in frames if f.name == "FAULT"] == ["CAMERA"]
    assert garbage in line.raw


def test_power_cycle_says_hello_and_restarts_numbering(pair: tuple[SimulatedReader, Line]) -> None:
    sim, line = pair
    line.frames(0.12)
    sim.replug(power_cycle=True)
    hello = line.until("HELLO")
    assert hello.seq == 0 and hello.fields[2:] == ("SIMREADER", "1.0", "2")
    assert line.until("HB").seq == 1


def test_unplug_closes_the_port_and_replug_brings_it_back(tmp_path: Path) -> None:
    link = tmp_path / "ttyREADER"
    sim = SimulatedReader(link=link, heartbeat_s=0.05).start()
    try:
        assert sim.port == str(link) and link.is_symlink()
        line = Line(sim.port)
        assert line.until("HB")
        sim.unplug()
        assert not link.exists()
        with pytest.raises(serial.SerialException):
            for _ in range(50):
                line.port.read(1)
        line.port.close()
        sim.replug()
        line = Line(sim.port)
        assert line.until("HB")
        line.port.close()
    finally:
        sim.stop()


def test_throw_rejects_impossible_dice() -> None:
    sim = SimulatedReader()
    with pytest.raises(ValueError):
        sim.throw(0, 3)
    with pytest.raises(ValueError):
        SimulatedReader(script=[(3, 7)])
    with pytest.raises(ValueError):
        SimulatedReader(transport="carrier-pigeon")
