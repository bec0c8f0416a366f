"""The dice reader contract (drivers/reader.py), one suite for every transport.

:class:`ReaderContract` runs the real :class:`SerialDiceReader` against the
simulated reader device; each subclass plugs them together differently: a
pseudo-terminal (the path a USB adapter would have) and a TCP serial server
(``socket://``). STYLE item 10: one contract suite, every implementation.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.core.commands import Command, ReaderFault, ReaderHello, ReaderOk, Roll
from drivers.codec import encode
from drivers.reader import DiceReader, ReaderStatus
from drivers.serial_reader import SerialDiceReader
from drivers.sim_reader import SimulatedReader
from tests.support import wait_for

# long enough that a busy machine's pauses never look like a silent reader
HB_TIMEOUT = 2.0
DEADLINE = 30.0  # for what must happen: only a hang reaches it


class Posted:
    """The controller's queue, as a test sees it."""

    def __init__(self) -> None:
        self.q: queue.Queue[Command] = queue.Queue()

    def __call__(self, command: Command) -> None:
        self.q.put(command)

    def next(self, kind: type[Command], timeout: float = DEADLINE) -> Command:
        """The next command of ``kind``; anything else on the way must not be a Roll."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {kind.__name__} within {timeout} s")
            try:
                command = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if isinstance(command, kind):
                return command
            assert not isinstance(command, Roll), f"unexpected {command!r}"

    def drain(self) -> list[Command]:
        out = []
        while True:
            try:
                out.append(self.q.get_nowait())
            except queue.Empty:
                return out


class ReaderContract:
    """What every transport must pass. Subclasses say how to make the pair."""

    transport = ""

    @pytest.fixture
    def sim(self, tmp_path: Path) -> Iterator[SimulatedReader]:
        device = SimulatedReader(
            transport=self.transport,
            heartbeat_s=0.05,
            retransmit_s=0.1,
            link=tmp_path / "ttyREADER" if self.transport == "pty" else None,
            seed=7,
        )
        with device:
            yield device

    @pytest.fixture
    def reader(self, sim: SimulatedReader) -> Iterator[SerialDiceReader]:
        driver = SerialDiceReader(
            sim.port, 9600, HB_TIMEOUT, backoff_s=0.02, backoff_max_s=0.1, read_timeout_s=0.02
        )
        yield driver
        driver.stop()

    @pytest.fixture
    def posted(self, reader: SerialDiceReader, sim: SimulatedReader) -> Posted:
        out = Posted()
        reader.start(out)
        deadline = time.monotonic() + DEADLINE
        while reader.status().counters["ok"] == 0:  # wait until heartbeats flow
            assert time.monotonic() < deadline, "no frame from the simulated reader"
            time.sleep(0.01)
        return out

    def test_is_a_dice_reader(self, reader: SerialDiceReader) -> None:
        assert isinstance(reader, DiceReader)

    def test_roll_is_posted_and_acked(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        sim.throw(3, 4)
        roll = posted.next(Roll)
        assert isinstance(roll, Roll)
        assert (roll.d1, roll.d2, roll.source, roll.actor) == (3, 4, "reader", "reader")
        assert roll.seq is not None and roll.at
        reader.ack(roll.seq)
        assert sim.wait_acked(roll.seq)
        assert sim.pending_seq is None

    def test_rolls_arrive_in_order_one_ack_at_a_time(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        throws = [(1, 1), (6, 5), (2, 3)]
        for d1, d2 in throws:
            sim.throw(d1, d2)
        seen = []
        for _ in throws:
            roll = posted.next(Roll)
            assert isinstance(roll, Roll) and roll.seq is not None
            seen.append((roll.d1, roll.d2))
            reader.ack(roll.seq)
            assert sim.wait_acked(roll.seq)
        assert seen == throws

    def test_every_copy_of_an_unacked_roll_is_posted_with_the_same_seq(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        sim.throw(5, 5)
        copies = [posted.next(Roll) for _ in range(3)]
        assert all(isinstance(c, Roll) for c in copies)
        seqs = {c.seq for c in copies if isinstance(c, Roll)}
        assert len(seqs) == 1
        (seq,) = seqs
        assert seq is not None
        # the controller ACKs every copy; the first ACK stops the repeats
        for _ in copies:
            reader.ack(seq)
        assert sim.wait_acked(seq)
        wait_for(lambda: sim.acked.count(seq) == 3, what="three ACKs")
        sent = sim.transmissions[seq]
        time.sleep(0.3)
        assert sim.transmissions[seq] == sent
        assert not [c for c in posted.drain() if isinstance(c, Roll) and c.seq != seq]

    def test_heartbeat_loss_is_a_fault_and_recovers(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        sim.silence()
        fault = posted.next(ReaderFault)
        assert isinstance(fault, ReaderFault) and fault.code == "HEARTBEAT"
        assert reader.status().fault == "HEARTBEAT"
        assert reader.status().connected
        sim.speak()
        posted.next(ReaderOk)
        assert reader.status().fault is None

    def test_fault_frame_and_ok_frame(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        sim.fault("CAMERA")
        fault = posted.next(ReaderFault)
        assert isinstance(fault, ReaderFault) and fault.code == "CAMERA"
        assert fault.reported  # the reader's own: its rolls are held until OK (issue 23)
        assert reader.status().fault == "CAMERA"
        time.sleep(0.1)  # heartbeats keep flowing: the reader's fault stands until OK
        assert reader.status().fault == "CAMERA"
        sim.clear_fault()
        posted.next(ReaderOk)
        assert reader.status().fault is None

    def test_hello_restarts_numbering(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        sim.hello()
        hello = posted.next(ReaderHello)
        assert isinstance(hello, ReaderHello) and hello.seq == 0
        assert (hello.model, hello.firmware) == (sim.model, sim.firmware)

    def test_a_wrong_hello_is_answered_with_a_nak(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        sim.send_raw(encode("HELLO,4,DR-7,,2"))  # an empty firmware
        assert sim.wait_nak("BAD_HELLO", timeout=DEADLINE)
        assert sim.naks == [(4, "BAD_HELLO")]
        assert reader.status().naks["BAD_HELLO"] == 1
        assert "HELLO,4,DR-7,,2" in (reader.status().last_nak or "")
        assert not [c for c in posted.drain() if isinstance(c, ReaderHello)]

    def test_a_flood_of_wrong_frames_is_counted_not_all_answered(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        sim.send_raw(encode("ROLL,9,7,1") * 100)  # 100 sealed frames with a die 7
        wait_for(
            lambda: reader.status().naks["BAD_VALUE"] + reader.status().naks["withheld"] == 100,
            what="every frame judged",
        )
        naks = reader.status().naks
        assert naks["withheld"] > 0 and naks["BAD_VALUE"] >= 1  # at most 4 a second answered
        wait_for(lambda: len(sim.naks) == naks["BAD_VALUE"], what="the NAKs sent to arrive")

    def test_noroll_and_bad_frames_post_nothing(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        sim.noroll("COCKED")
        sim.send_bad_checksum(6, 6)
        sim.send_raw(b"$ROLL,9,7,1*" + b"00\r\n")
        sim.send_raw(b"$ROLL,9,\xff,1*00\r\n")
        sim.send_raw(b"$" + b"7" * 200 + b"\r\n")
        deadline = time.monotonic() + DEADLINE
        while reader.status().counters["overlong"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        counters = reader.status().counters
        assert counters["bad_checksum"] == 2
        assert counters["non_ascii"] == 1
        assert counters["overlong"] == 1
        assert not [c for c in posted.drain() if isinstance(c, Roll)]

    def test_garbage_storm_does_not_stop_the_reader(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        for _ in range(40):
            sim.send_garbage(256)
        sim.throw(2, 6)
        roll = posted.next(Roll)
        assert isinstance(roll, Roll) and (roll.d1, roll.d2) == (2, 6)
        status = reader.status()
        assert status.connected and status.fault is None
        assert sum(v for k, v in status.counters.items() if k != "ok") > 0

    def test_unplugged_port_is_a_fault_and_is_reopened(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        sim.throw(4, 4)
        first = posted.next(Roll)
        sim.unplug()
        fault = posted.next(ReaderFault)
        assert isinstance(fault, ReaderFault) and fault.code == "PORT_LOST"
        assert not reader.status().connected
        assert reader.status().fault == "PORT_LOST"
        reader.ack(1)  # a port that is gone: logged, never raised
        time.sleep(0.2)  # a few reopen tries fail
        sim.replug()
        posted.next(ReaderOk)
        assert reader.status().connected
        # the un-ACKed roll comes again with its seq
        again = posted.next(Roll)
        assert isinstance(first, Roll) and isinstance(again, Roll)
        assert (again.seq, again.d1, again.d2) == (first.seq, 4, 4)
        assert again.seq is not None
        reader.ack(again.seq)
        assert sim.wait_acked(again.seq)

    def test_status_snapshot(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        status = reader.status()
        assert isinstance(status, ReaderStatus)
        assert status.port == sim.port
        assert status.connected and status.fault is None
        assert status.counters["ok"] >= 1
        assert set(status.to_dict()) == {
            "connected", "fault", "counters", "port", "reason", "naks", "last_nak"
        }  # fmt: skip

    def test_stop_is_prompt_and_idempotent(
        self, sim: SimulatedReader, reader: SerialDiceReader, posted: Posted
    ) -> None:
        start = time.monotonic()
        reader.stop()
        reader.stop()
        # prompt: it does not sit out a read, a heartbeat or a backoff (a busy machine may
        # take a second to schedule the thread; a hang would take forever)
        assert time.monotonic() - start < 5
        assert not reader.status().connected
        assert not [t for t in threading.enumerate() if t.name.startswith("dice-reader")]


class TestSerialReaderOnPty(ReaderContract):
    transport = "pty"


class TestSerialReaderOnSocket(ReaderContract):
    transport = "tcp"
