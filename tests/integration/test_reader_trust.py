"""The reader driver never dies silently and holds its port alone (issue 9 items 5, 11)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import serial
from gpiozero.pins.mock import MockFactory, MockPWMPin

from controller.cli.run import assemble
from controller.control.client import ControlClient
from controller.core.commands import Command, ReaderFault, ReaderOk, Roll
from drivers.serial_reader import SerialDiceReader
from drivers.sim_reader import SimulatedReader
from tests.support import run_firebet, table_config, wait_for


class Posted:
    def __init__(self) -> None:
        self.q: queue.Queue[Command] = queue.Queue()
        self.seen: list[Command] = []

    def __call__(self, command: Command) -> None:
        self.q.put(command)

    def next(self, kind: type[Command]) -> Command:
        def found() -> bool:
            while not self.q.empty():
                self.seen.append(self.q.get_nowait())
            return any(isinstance(c, kind) for c in self.seen)

        wait_for(found, what=kind.__name__)
        index = next(i for i, c in enumerate(self.seen) if isinstance(c, kind))
        return self.seen.pop(index)


@pytest.fixture
def device() -> Iterator[SimulatedReader]:
    with SimulatedReader(heartbeat_s=0.05, retransmit_s=0.1) as sim:
        yield sim


def test_a_baud_rate_the_port_refuses_is_a_fault_with_its_reason_and_it_keeps_trying(
    device: SimulatedReader, caplog: pytest.LogCaptureFixture
) -> None:
    opens: list[str] = []

    def opener(url: str, **kwargs: Any) -> Any:
        opens.append(url)
        return serial.serial_for_url(url, **kwargs)  # the real pyserial: OverflowError

    posted = Posted()
    reader = SerialDiceReader(
        device.port, 3_000_000_000, backoff_s=0.01, backoff_max_s=0.05, open_fn=opener
    )
    with caplog.at_level(logging.WARNING):
        reader.start(posted)
        try:
            fault = posted.next(ReaderFault)
            assert isinstance(fault, ReaderFault) and fault.code == "DRIVER_ERROR"
            status = reader.status()
            assert status.fault == "DRIVER_ERROR" and not status.connected
            assert status.reason is not None and "OverflowError" in status.reason
            wait_for(lambda: len(opens) >= 3, what="the supervisor trying again")
            assert reader._thread is not None and reader._thread.is_alive()
        finally:
            reader.stop()
    assert any("OverflowError" in r.getMessage() for r in caplog.records)
    assert sum("cannot start" in r.getMessage() for r in caplog.records) == 1  # not a flood


class _Haunted:
    """A real port whose first read raises what no one expected."""

    def __init__(self, port: Any, fail: bool) -> None:
        self.port, self.fail = port, fail

    def read(self, n: int) -> bytes:
        if self.fail:
            self.fail = False
            raise RuntimeError("a bug in the read path")
        data: bytes = self.port.read(n)
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.port, name)


def test_an_exception_in_the_reader_thread_is_a_fault_then_the_driver_restarts(
    device: SimulatedReader,
) -> None:
    sessions: list[int] = []

    def opener(url: str, **kwargs: Any) -> Any:
        sessions.append(1)
        return _Haunted(serial.serial_for_url(url, **kwargs), fail=len(sessions) == 1)

    posted = Posted()
    reader = SerialDiceReader(device.port, backoff_s=0.01, open_fn=opener)
    reader.start(posted)
    try:
        fault = posted.next(ReaderFault)
        assert isinstance(fault, ReaderFault) and fault.code == "DRIVER_ERROR"
        posted.next(ReaderOk)  # restarted: frames flow again, the fault ends
        device.throw(2, 5)
        roll = posted.next(Roll)
        assert isinstance(roll, Roll) and (roll.d1, roll.d2) == (2, 5)
        assert len(sessions) == 2 and reader.status().fault is None
    finally:
        reader.stop()


@pytest.mark.slow
def test_the_service_shows_a_driver_fault_with_its_reason_and_takes_manual_rolls(
    tmp_path: Path, device: SimulatedReader
) -> None:
    reader = SerialDiceReader(device.port, 3_000_000_000, backoff_s=0.01, backoff_max_s=0.05)
    factory = MockFactory(pin_class=MockPWMPin)
    sock = tmp_path / "control.sock"
    controller = assemble(
        table_config(), tmp_path / "state", reader=reader, pin_factory=factory, socket_path=sock
    )

    def engine() -> None:
        controller.start()
        controller.serve()

    thread = threading.Thread(target=engine, daemon=True)
    thread.start()
    try:
        wait_for(controller.ready.is_set)
        wait_for(lambda: controller.status().get("mode") == "reader_fault", what="the fault")
        status = controller.status()
        assert status["reader"]["fault"] == "DRIVER_ERROR"
        assert "OverflowError" in status["reader"]["reason"]
        with ControlClient(sock) as client:
            reply = client.request("roll", d1=3, d2=3)
        assert reply["ok"], reply
        assert controller.status()["point"] == 6
    finally:
        controller.stop()
        thread.join(timeout=30)
        controller.close()
        factory.close()


def test_the_port_is_held_exclusively(device: SimulatedReader) -> None:
    first, second = Posted(), Posted()
    holder = SerialDiceReader(device.port, backoff_s=0.01)
    other = SerialDiceReader(device.port, backoff_s=0.01, backoff_max_s=0.05)
    holder.start(first)
    try:
        wait_for(lambda: holder.status().connected, what="the first driver to open")
        other.start(second)
        fault = second.next(ReaderFault)
        assert isinstance(fault, ReaderFault) and fault.code == "PORT_LOST"
        assert "busy" in (other.status().reason or "")
        acked: set[int] = set()
        for dice in ((1, 2), (3, 4), (5, 6)):
            device.throw(*dice)
            roll = first.next(Roll)
            while isinstance(roll, Roll) and roll.seq in acked:  # a copy sent before our ACK
                roll = first.next(Roll)
            assert isinstance(roll, Roll) and (roll.d1, roll.d2) == dice
            assert roll.seq is not None
            holder.ack(roll.seq)
            acked.add(roll.seq)
        assert not any(isinstance(c, Roll) for c in second.seen)
    finally:
        other.stop()
        holder.stop()


@pytest.mark.slow
def test_diag_reader_refuses_while_the_service_holds_the_port(device: SimulatedReader) -> None:
    holder = SerialDiceReader(device.port)
    holder.start(lambda command: None)
    try:
        wait_for(lambda: holder.status().connected, what="the service's driver to open")
        done = run_firebet("diag", "reader", "--serial", device.port, "--count", "1")
        assert done.returncode == 1, done.stdout + done.stderr
        assert "busy" in done.stderr and "firebet service" in done.stderr
        assert "Traceback" not in done.stderr
    finally:
        holder.stop()
    done = run_firebet("diag", "reader", "--serial", device.port, "--count", "2", "--json")
    assert done.returncode == 0, done.stderr  # the service gone, the technician gets the port
