"""A request whose connection is lost after the service read it (#9, item 2).

The service stops (kill -9, a power cut, systemd's restart) after it read a request and
before it answered: the request may have been applied. The client waits for the service
to be back and sends the same id again, within what is left of the request's deadline
(the service started again knows the id from its journal: tests/e2e/test_retry_restart.py).
Not back in time, the client says the request may have been applied and what to check.
A reading is asked again. A request the service never read (refused at send, or reset
unread) is sent again at once, as before.

The "service" here is a plain AF_UNIX listener playing each case, so the test sees every
line the client sends.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.control.client import ControlClient
from controller.core.errors import ServiceUnreachable
from tests.support import run_firebet, wait_for

Script = Callable[[socket.socket, list[dict]], None]


class FakeService:
    """Accepts connections one after another; ``scripts[i]`` plays the i-th connection."""

    def __init__(self, path: Path, scripts: list[Script]) -> None:
        self.heard: list[dict] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.listener.settimeout(30)
        self.scripts = scripts
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for script in self.scripts:
                conn, _ = self.listener.accept()
                with conn:
                    conn.settimeout(30)
                    script(conn, self.heard)
        except BaseException as exc:  # reported by close()
            self.error = exc

    def close(self) -> None:
        self.listener.close()
        self.thread.join(10)
        assert self.error is None, self.error


def read_line(conn: socket.socket, heard: list[dict]) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            raise EOFError("the client closed before a whole line")
        data += chunk
    request = json.loads(data)
    heard.append(request)
    return request


def answer(conn: socket.socket, heard: list[dict], times: int = 1) -> None:
    """Read and answer ``times`` requests, then wait for the client to close."""
    for _ in range(times):
        request = read_line(conn, heard)
        conn.sendall(json.dumps({"ok": True, "id": request["id"]}).encode() + b"\n")


def read_then_die(conn: socket.socket, heard: list[dict]) -> None:
    """Read the request, then stop without a word (kill -9 after the commit)."""
    read_line(conn, heard)


def answer_once_then_die(conn: socket.socket, heard: list[dict]) -> None:
    answer(conn, heard)
    read_line(conn, heard)


def die_unread(conn: socket.socket, heard: list[dict]) -> None:
    """Stop with the request still unread in the socket (the client gets a reset)."""
    wait_for(lambda: _pending(conn), what="the request to arrive")


def _pending(conn: socket.socket) -> bool:
    try:
        return bool(conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "control.sock"


@pytest.mark.parametrize("kept", [False, True], ids=["fresh connection", "kept connection"])
def test_a_bet_lost_in_a_restart_is_sent_again_with_its_id_within_its_deadline(
    path: Path, kept: bool
) -> None:
    service = FakeService(path, [answer_once_then_die if kept else read_then_die, answer])
    with ControlClient(path, timeout=5.0, grace=1.0) as client:
        if kept:
            assert client.request("status")["ok"] is True
        assert client.request("bet", position=1, amount=1)["ok"] is True
    service.close()
    first, again = [r for r in service.heard if r["op"] == "bet"]
    assert again["id"] == first["id"]  # the same id: a service started again knows it
    assert again["args"] == first["args"] == {"position": 1, "amount": 1}
    assert 0 < again["deadline_ms"] <= first["deadline_ms"]  # never later than the first


def test_a_bet_lost_when_no_service_comes_back_is_named_not_resent(path: Path) -> None:
    service = FakeService(path, [read_then_die])
    with (
        ControlClient(path, timeout=1.0, grace=1.0) as client,
        pytest.raises(ServiceUnreachable) as lost,
    ):
        client.request("bet", position=1, amount=1)
    service.close()
    assert len(service.heard) == 1
    message = str(lost.value)
    assert "bet" in message and "may have been applied" in message
    assert "check firebet status before repeating it" in message


def test_a_bet_lost_again_and_again_is_never_sent_past_its_deadline(path: Path) -> None:
    service = FakeService(path, [read_then_die] * 50)
    with (
        ControlClient(path, timeout=1.0, grace=1.0) as client,
        pytest.raises(ServiceUnreachable, match="may have been applied"),
    ):
        client.request("bet", position=1, amount=1)
    service.listener.close()
    service.thread.join(10)
    bets = [r for r in service.heard if r["op"] == "bet"]
    assert len(bets) >= 2 and len({r["id"] for r in bets}) == 1
    # each resend asks for no more than what was left of the first deadline
    assert all(b["deadline_ms"] <= a["deadline_ms"] for a, b in itertools.pairwise(bets))


def test_a_reading_whose_reply_was_lost_is_asked_again(path: Path) -> None:
    service = FakeService(path, [answer_once_then_die, answer])
    with ControlClient(path, timeout=5.0, grace=1.0) as client:
        assert client.request("status")["ok"] is True
        assert client.request("history", hands=3)["ok"] is True
    service.close()
    assert [r["op"] for r in service.heard] == ["status", "history", "history"]
    assert service.heard[1]["id"] == service.heard[2]["id"]


def test_a_bet_the_service_never_read_is_sent_again(path: Path) -> None:
    def answer_then_die_unread(conn: socket.socket, heard: list[dict]) -> None:
        answer(conn, heard)
        die_unread(conn, heard)

    service = FakeService(path, [answer_then_die_unread, answer])
    with ControlClient(path, timeout=5.0, grace=1.0) as client:
        assert client.request("status")["ok"] is True
        assert client.request("bet", position=1, amount=1)["ok"] is True
    service.close()
    bets = [r for r in service.heard if r["op"] == "bet"]
    assert len(bets) == 1  # read once, by the second connection: applied once


def test_the_dealer_is_told_and_the_exit_is_3(path: Path) -> None:
    service = FakeService(path, [read_then_die])  # and never back (the CLI's 5 s deadline)
    done = run_firebet("bet", "2", "5", "--socket", str(path))
    service.close()
    assert done.returncode == 3, done.stderr
    assert "bet" in done.stderr and "may have been applied" in done.stderr
    assert "check firebet status before repeating it" in done.stderr
    assert len(service.heard) == 1 and service.heard[0]["args"] == {"position": 2, "amount": 5}
