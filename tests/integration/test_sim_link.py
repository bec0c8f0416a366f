"""`firebet sim`'s reader on its stable link (issue 29): unplug then replug always
recovers, and the driver never opens a terminal that is not its reader's, even when
another program holds the pseudo-terminal number the reader had.

The bench here is the one `firebet sim` runs (:class:`controller.cli.sim_bench.Bench`,
built by the same composition as `firebet run --simulated-reader`), in this process, so
the test sees the driver's every attempt to open its port.
"""

from __future__ import annotations

import errno
import os
import select
import subprocess
import sys
import termios
import time
import tty
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import drivers.serial_reader
from controller.cli import build_parser
from controller.cli.run import SIM_READER_LINK
from controller.cli.sim_bench import Bench
from controller.core.lamps import Mode
from tests.support import PROCESS_DEADLINE_S, ROOT, wait_for

# another program on the machine: it takes the pseudo-terminal number it is given as soon
# as that number is free (holding every lower one it gets on the way), then writes reader
# frames into it (a HELLO of its own, rolls of 6 6), and says whatever anyone writes back
INTRUDER = r"""
import os, select, sys, time, tty
from drivers import codec

want = sys.argv[1]
held = []
for _ in range(400):
    master, slave = os.openpty()
    if os.ttyname(slave) == want:
        break
    held.append((master, slave))
else:
    print("MISSED", flush=True)
    sys.exit(3)
for fds in held:
    for fd in fds:
        os.close(fd)
tty.setraw(slave)
os.set_blocking(master, False)
print("HELD", flush=True)
frames = [codec.encode_hello(0, "INTRUDER", "6.6")]
frames += [codec.encode_roll(seq, 6, 6) for seq in range(1, 200)]
n = 0
while True:
    try:
        os.write(master, frames[n % len(frames)])
    except BlockingIOError:
        pass
    n += 1
    ready, _, _ = select.select([master], [], [], 0.02)
    if ready:
        try:
            got = os.read(master, 1024)
        except OSError:
            got = b""
        if got:
            print("ANSWERED", got, flush=True)
"""


class Intruder:
    """The other program: :data:`INTRUDER` as a real process."""

    def __init__(self, want: str, tmp_path: Path) -> None:
        self.out = tmp_path / f"intruder-{time.monotonic_ns()}.out"
        with open(self.out, "w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", INTRUDER, want], cwd=ROOT, stdout=out, text=True
            )

    def said(self) -> str:
        return self.out.read_text()

    def holds(self) -> bool:
        """Whether it got the number (False: another program took it first)."""
        wait_for(lambda: "HELD" in self.said() or "MISSED" in self.said(), what="the intruder")
        return "HELD" in self.said()

    def stop(self) -> str:
        self.proc.terminate()
        self.proc.wait(timeout=PROCESS_DEADLINE_S)
        return self.said()


@pytest.fixture
def opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every port the dice reader driver tries to open, in order."""
    tried: list[str] = []
    real = drivers.serial_reader.open_port

    def counting(url: str, *args: Any, **kwargs: Any) -> Any:
        tried.append(url)
        return real(url, *args, **kwargs)

    monkeypatch.setattr(drivers.serial_reader, "open_port", counting)
    return tried


@pytest.fixture
def bench(tmp_path: Path, opens: list[str]) -> Iterator[Bench]:
    """`firebet sim`'s bench, started; stopped even when its start fails."""
    state = tmp_path / "var"
    args = build_parser().parse_args(
        ["sim", "--state-dir", str(state), "--seed", "7", "--interval", "3600", "--no-bets"]
    )
    b = Bench(args)
    state.mkdir(parents=True)
    b.start()  # stops what it started when it fails
    try:
        wait_for(lambda: _reader(b)["connected"], what="the reader's port to open")
        yield b
    finally:
        b.stop()


def _status(bench: Bench) -> dict[str, Any]:
    assert bench.controller is not None
    return bench.controller.status()


def _reader(bench: Bench) -> dict[str, Any]:
    reader: dict[str, Any] = _status(bench)["reader"]
    return reader


def _running(bench: Bench) -> Callable[[], bool]:
    def running() -> bool:
        s = _status(bench)
        return bool(s["mode"] == Mode.RUNNING and s["reader"]["fault"] is None)

    return running


def _unplugged(bench: Bench) -> None:
    bench.device.unplug()
    wait_for(lambda: _reader(bench)["fault"] == "PORT_LOST", what="PORT_LOST")
    wait_for(lambda: _status(bench)["mode"] == Mode.READER_FAULT, what="the table in fault")
    # the driver has let go of the old terminal: its number is free for anyone now
    wait_for(lambda: not _reader(bench)["connected"], what="the driver to close the port")


def _throw(bench: Bench, d1: int, d2: int) -> None:
    before = set(bench.device.transmissions)
    bench.device.throw(d1, d2)
    wait_for(lambda: set(bench.device.transmissions) - before, what="the throw to go out")
    (seq,) = set(bench.device.transmissions) - before
    assert bench.device.wait_acked(seq, timeout=PROCESS_DEADLINE_S), f"throw {d1} {d2} not ACKed"


def test_the_sim_reads_its_reader_through_the_stable_link(bench: Bench) -> None:
    link = bench.state_dir / SIM_READER_LINK
    assert bench.device.port == str(link) and link.is_symlink()
    assert _reader(bench)["port"] == str(link)  # never /dev/pts/N


def test_unplug_then_replug_recovers_every_time(bench: Bench) -> None:
    for n in range(6):
        _unplugged(bench)
        bench.device.replug()
        wait_for(_running(bench), timeout=PROCESS_DEADLINE_S, what=f"running after replug {n}")
    _throw(bench, 2, 3)
    wait_for(lambda: _status(bench)["last_roll"] == [2, 3], what="the throw applied")
    assert _status(bench)["rolls"] == 1


def test_a_terminal_number_another_program_took_is_never_opened(
    bench: Bench, opens: list[str], tmp_path: Path
) -> None:
    intruder: Intruder | None = None
    for _ in range(5):  # a busy machine may give the freed number to someone else first
        old = os.path.realpath(bench.device.port)
        _unplugged(bench)
        intruder = Intruder(old, tmp_path)
        if intruder.holds():
            break
        intruder.stop()
        intruder = None
        bench.device.replug()
        wait_for(_running(bench), timeout=PROCESS_DEADLINE_S, what="running after replug")
    assert intruder is not None, "no other program could take the freed number in 5 tries"
    try:
        # the driver keeps trying its port while the reader is unplugged: two tries (or
        # its landing on the other program's terminal, the old fault) after the number
        # changed hands
        tried = len(opens)
        wait_for(
            lambda: len(opens) >= tried + 2 or _reader(bench)["connected"],
            timeout=PROCESS_DEADLINE_S,
            what="the driver to try its port again",
        )
        assert not _reader(bench)["connected"], f"the driver opened {opens[-1]}"
        assert set(opens) == {bench.device.port}  # only ever the link, never a number
        bench.device.replug()
        wait_for(_running(bench), timeout=PROCESS_DEADLINE_S, what="running after replug")
        assert os.path.realpath(bench.device.port) != old  # the new terminal, not theirs
        _throw(bench, 4, 5)
        wait_for(lambda: _status(bench)["last_roll"] == [4, 5], what="the throw applied")
    finally:
        said = intruder.stop()
    status = _status(bench)
    assert status["rolls"] == 1 and status["reader"]["model"] != "INTRUDER"
    assert not status["held_rolls"]
    assert "ANSWERED" not in said  # nobody ACKed or NAKed the other program's frames


def test_a_link_that_leads_to_another_programs_terminal_is_refused(
    bench: Bench, tmp_path: Path
) -> None:
    """A stale link (a bench killed with kill -9, a number given away) is not followed:
    the driver's opener refuses any terminal that is not the device's own."""
    other_master, other_slave = os.openpty()  # stands for another program's terminal
    tty.setraw(other_slave)
    try:
        elsewhere = tmp_path / "stale.tty"
        elsewhere.symlink_to(os.ttyname(other_slave))
        settings = termios.tcgetattr(other_slave)
        os.write(other_master, b"HB,1*0000\r\n")  # what it has to say, waiting to be read
        with pytest.raises(OSError) as refused:
            bench.device.open_port(str(elsewhere), baudrate=9600, timeout=0.05, exclusive=True)
        assert refused.value.errno == errno.ENODEV
        assert "does not lead to the simulated reader's terminal" in str(refused.value)
        # its terminal was not touched: its settings as they were, nothing written to it,
        # and what it said still there for its own reader
        assert termios.tcgetattr(other_slave) == settings
        assert select.select([other_master], [], [], 0)[0] == []
        assert os.read(other_slave, 64) == b"HB,1*0000\r\n"
        # the device's own link opens (and only while it is plugged in)
        port = bench.device.open_port(bench.device.port, baudrate=9600, timeout=0.05)
        port.close()
        _unplugged(bench)
        link = Path(bench.device.port)
        link.symlink_to(os.ttyname(other_slave))  # as a stale link left behind
        wait_for(
            lambda: (
                "does not lead to the simulated reader's terminal"
                in (_reader(bench)["reason"] or "")
            ),
            timeout=PROCESS_DEADLINE_S,
            what="the driver to refuse the stale link",
        )
        assert not _reader(bench)["connected"]
        link.unlink()
        bench.device.replug()
        wait_for(_running(bench), timeout=PROCESS_DEADLINE_S, what="running after replug")
    finally:
        os.close(other_master)
        os.close(other_slave)


def test_run_serial_never_reopens_a_terminal_number_another_program_took(
    tmp_path: Path,
) -> None:
    """`firebet run --serial <symlink>` to a pseudo-terminal (a bridge's, `socat
    pty,link=...`): the bridge dies without removing its link, another program gets the
    number; the driver's own guard (not the sim device's opener) refuses that terminal,
    and opens the terminal a link made anew leads to."""
    from drivers.serial_reader import SerialDiceReader

    master, slave = os.openpty()
    tty.setraw(slave)
    old = os.ttyname(slave)
    link = tmp_path / "reader.tty"
    link.symlink_to(old)
    posted: list[Any] = []
    reader = SerialDiceReader(str(link), heartbeat_timeout_s=60, backoff_max_s=0.2, protocol=2)
    reader.start(posted.append)
    intruder: Intruder | None = None
    fds = [master, slave]
    try:
        wait_for(lambda: reader.status().connected, what="the driver to open the link")
        assert reader.terminal is not None
        for fd in fds:  # the bridge dies: its terminal's number is free, the link stays
            os.close(fd)
        fds = []
        wait_for(lambda: not reader.status().connected, what="the driver to see it go")
        intruder = Intruder(old, tmp_path)
        if not intruder.holds():
            pytest.skip("another program on this machine took the freed number first")
        wait_for(  # (the old driver opened it and read its frames)
            lambda: (
                "another pseudo-terminal" in (reader.status().reason or "")
                or reader.status().connected
            ),
            timeout=PROCESS_DEADLINE_S,
            what="the driver to refuse the other program's terminal",
        )
        assert not reader.status().connected, "the driver opened the other program's terminal"
        assert reader.status().counters.get("ok", 0) == 0  # not one of its frames read
        said = intruder.stop()
        intruder = None
        assert "ANSWERED" not in said
        # the bridge back, its link made anew (to whatever number it got): opened
        master, slave = os.openpty()
        tty.setraw(slave)
        fds = [master, slave]
        fresh = tmp_path / "reader.tty.new"
        fresh.symlink_to(os.ttyname(slave))
        fresh.replace(link)
        wait_for(lambda: reader.status().connected, what="the driver to open the new link")
    finally:
        reader.stop()
        if intruder is not None:
            intruder.stop()
        for fd in fds:
            os.close(fd)


def test_a_tcp_reader_keeps_its_port_across_an_unplug() -> None:
    """The TCP bench device (`socket://`) unplugged: its port stays bound, so no other
    program can take it before the replug, and the driver connects to the device again."""
    import socket

    from drivers.serial_reader import SerialDiceReader
    from drivers.sim_reader import SimulatedReader

    device = SimulatedReader(transport="tcp", protocol=2, heartbeat_s=0.2)
    with device:
        url = device.port
        tcp_port = int(url.rsplit(":", 1)[1])
        reader = SerialDiceReader(url, heartbeat_timeout_s=60, backoff_max_s=0.2, protocol=2)
        reader.start(lambda _: None)
        try:
            wait_for(lambda: reader.status().connected, what="the driver to connect")
            device.unplug()
            wait_for(lambda: reader.status().fault == "PORT_LOST", what="PORT_LOST")
            other = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                with pytest.raises(OSError) as taken:
                    other.bind(("127.0.0.1", tcp_port))  # another program wants the port
                assert taken.value.errno == errno.EADDRINUSE
            finally:
                other.close()
            ok = reader.status().counters.get("ok", 0)
            device.replug()
            assert device.port == url
            wait_for(
                lambda: reader.status().counters.get("ok", 0) > ok + 2,
                timeout=PROCESS_DEADLINE_S,
                what="the device's heartbeats read again",
            )
        finally:
            reader.stop()


def test_a_held_bench_throws_nothing_until_released(tmp_path: Path) -> None:
    """`firebet sim` says where the table it resumes stands before the shooter throws:
    read after a throw, it was off by that throw (CI, 4 Dec 2026: "hand 2, 5 rolls so
    far" for a table of 3 rolls, the new sim's first 2 already in)."""
    state = tmp_path / "var"
    args = build_parser().parse_args(
        ["sim", "--state-dir", str(state), "--seed", "1", "--rolls", "3", "--interval", "0"]
    )
    b = Bench(args)
    state.mkdir(parents=True)
    b.start(hold=True)
    try:
        wait_for(_running(b), what="the table running with its reader")
        acked = _reader(b)["counters"]
        wait_for(lambda: _reader(b)["counters"] != acked, what="frames heard after the table runs")
        assert b.device.rolls_sent == [] and _status(b)["rolls"] == 0
        b.release()
        wait_for(b.done, what="the 3 rolls thrown and ACKed")
        assert _status(b)["rolls"] == 3
    finally:
        b.stop()
