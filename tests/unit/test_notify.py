"""sd_notify against a real AF_UNIX datagram socket standing in for systemd."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.service import notify


@pytest.fixture
def systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A datagram socket bound where $NOTIFY_SOCKET points, as systemd would bind it."""
    path = tmp_path / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(2)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    yield sock
    sock.close()


def received(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().split("\n")


def nothing_waiting(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(4096)
    except BlockingIOError:
        return True
    finally:
        sock.settimeout(2)
    return False


def test_ready_with_status(systemd: socket.socket) -> None:
    assert notify.ready("recovered 12 rolls;\n markers lit")
    assert received(systemd) == ["READY=1", "STATUS=recovered 12 rolls; markers lit"]


def test_each_helper_sends_its_line(systemd: socket.socket) -> None:
    assert notify.ready()
    assert received(systemd) == ["READY=1"]
    assert notify.status("reader fault: HEARTBEAT")
    assert received(systemd) == ["STATUS=reader fault: HEARTBEAT"]
    assert notify.watchdog()
    assert received(systemd) == ["WATCHDOG=1"]
    assert notify.stopping()
    assert received(systemd) == ["STOPPING=1"]
    assert notify.stopping("bye")
    assert received(systemd) == ["STOPPING=1", "STATUS=bye"]
    assert notify.notify("MAINPID=1", "STATUS=x")
    assert received(systemd) == ["MAINPID=1", "STATUS=x"]


def test_abstract_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    name = f"firebet-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert notify.watchdog()
        assert sock.recv(100) == b"WATCHDOG=1"


def test_nothing_happens_without_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify.ready() is False
    assert notify.watchdog() is False
    monkeypatch.setenv("NOTIFY_SOCKET", "")
    assert notify.status("x") is False


def test_unsupported_address_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", "vsock:2:1234")
    assert notify.ready() is False


def test_gone_socket_is_reported_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "nobody-listens"))
    assert notify.watchdog() is False
    assert "sd_notify WATCHDOG failed" in caplog.text


def test_bad_lines_are_refused(systemd: socket.socket) -> None:
    with pytest.raises(ValueError, match="KEY=VALUE"):
        notify.notify("READY=1\nWATCHDOG=1")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        notify.notify("READY")
    assert notify.notify() is False
    assert nothing_waiting(systemd)


@pytest.mark.parametrize(
    ("usec", "pid", "expected"),
    [
        (None, None, None),
        ("10000000", None, 10.0),
        ("500000", "self", 0.5),
        ("10000000", "other", None),
        ("10000000", "junk", None),
        ("0", None, None),
        ("ten", None, None),
    ],
)
def test_watchdog_interval(
    monkeypatch: pytest.MonkeyPatch, usec: str | None, pid: str | None, expected: float | None
) -> None:
    for name, value in (("WATCHDOG_USEC", usec), ("WATCHDOG_PID", pid)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            value = {"self": str(os.getpid()), "other": str(os.getpid() + 1)}.get(value, value)
            monkeypatch.setenv(name, value)
    assert notify.watchdog_interval() == expected


def test_a_stalled_receiver_never_blocks_the_caller(systemd: socket.socket) -> None:
    """Nobody reads the socket: once its queue is full, statuses are dropped, not waited on.

    Regression: the engine thread blocked in sendall() after about ten unread STATUS
    messages, so the table stopped ACKing rolls.
    """
    results = [notify.status(f"roll {n}") for n in range(200)]  # would hang if blocking
    assert results[0] is True
    assert results[-1] is False  # the queue filled up and the rest were dropped
    assert systemd.recv(4096) == b"STATUS=roll 0"


def test_one_socket_is_kept_and_made_again_when_systemd_rebinds(
    systemd: socket.socket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A status a roll goes out on one kept socket, not a new one each time; when
    systemd's socket is made again (daemon-reexec) the next notify reconnects."""
    made: list[socket.socket] = []
    real = socket.socket

    def counting(*args: object, **kwargs: object) -> socket.socket:
        sock = real(*args, **kwargs)  # type: ignore[arg-type]
        made.append(sock)
        return sock

    monkeypatch.setattr(notify.socket, "socket", counting)
    for roll in range(50):
        assert notify.status(f"running: roll {roll}")
        assert received(systemd) == [f"STATUS=running: roll {roll}"]
    assert len(made) <= 1
    path = tmp_path / "notify"
    systemd.close()
    path.unlink()
    again = real(socket.AF_UNIX, socket.SOCK_DGRAM)
    again.bind(str(path))
    again.settimeout(2)
    try:
        assert notify.status("running: after the reexec")
        assert received(again) == ["STATUS=running: after the reexec"]
    finally:
        again.close()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_status_line_goes_out_on_a_change_of_mode_and_the_counts_once_a_second(
    systemd: socket.socket,
) -> None:
    """Issue 31: a STATUS datagram on every roll cost the engine thread a send a roll. The
    counts now wait up to a second (flushed when the engine is idle); a new mode goes out at
    once; a line equal to the one shown is not sent again."""
    clock = Clock()
    line = notify.StatusLine(clock)
    line.offer("running", lambda: "running: 1 rolls")
    assert received(systemd) == ["STATUS=running: 1 rolls"]
    made: list[int] = []
    for roll in range(2, 50):  # a burst of rolls within the second: nothing sent, nothing made
        clock.now += 0.01
        line.offer("running", lambda roll=roll: made.append(roll) or f"running: {roll} rolls")
    assert nothing_waiting(systemd) and made == []
    # the engine thread wakes for it when its second is over, not before (nor every second)
    assert line.due_in() == pytest.approx(1.0 - 0.48)
    line.flush()  # idle, but the second is not over
    assert nothing_waiting(systemd)
    clock.now += 1.0
    assert line.due_in() == 0.0
    line.flush()  # the last line that waited, once
    assert received(systemd) == ["STATUS=running: 49 rolls"] and made == [49]
    assert line.due_in() is None  # nothing waits: no reason to wake
    line.flush()
    assert nothing_waiting(systemd)
    clock.now += 0.01
    line.offer("halted", lambda: "halted: hand 3")  # a new mode: at once
    assert received(systemd) == ["STATUS=halted: hand 3"]
    clock.now += 5
    line.offer("halted", lambda: "halted: hand 3")  # the same line: not again
    assert nothing_waiting(systemd) and line.sent == 3
