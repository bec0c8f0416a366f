"""The control socket: JSON lines over a real AF_UNIX socket, roles from peer credentials."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from controller.control.client import ControlClient
from controller.control.protocol import (
    MAX_LINE,
    Request,
    Role,
)
from controller.control.server import ControlServer
from controller.core.errors import FirebetError, ServiceUnreachable
from tests.control_support import SERVICE_UID, Recorder, fake_identity, raw_exchange
from tests.support import DEALERS, PROCESS_DEADLINE_S, TECHS

# request / reply ----------------------------------------------------------------------


def test_request_reply_carries_op_args_and_actor(make_server: Any, sock_path: Path) -> None:
    rec = Recorder()
    make_server(rec, identify=fake_identity("alice", 1001, DEALERS), service_uid=SERVICE_UID)
    with ControlClient(sock_path) as client:
        reply = client.request("bet", position=3, amount=5)
    assert reply == {"ok": True, "op": "bet", "args": {"position": 3, "amount": 5},
                     "actor": "alice(1001)"}  # fmt: skip
    (req,) = rec.requests
    assert req.op == "bet" and req.args == {"position": 3, "amount": 5}
    assert req.actor == "alice(1001)"
    assert req.role is Role.DEALER
    assert req.identity.pid == os.getpid()  # from SO_PEERCRED, not from the fake


def test_many_requests_on_one_connection(make_server: Any, sock_path: Path) -> None:
    rec = Recorder()
    make_server(rec)
    with ControlClient(sock_path) as client:
        client.connect()
        first = client._sock
        for i in range(50):
            assert client.request("roll", d1=1 + i % 6, d2=1)["args"]["d1"] == 1 + i % 6
        assert client._sock is first
    assert len(rec.requests) == 50


def test_pipelined_lines_are_answered_in_order_with_ids(make_server: Any, sock_path: Path) -> None:
    make_server()
    lines = b"".join(
        json.dumps({"op": "status", "args": {"n": i}, "id": f"r{i}"}).encode() + b"\n"
        for i in range(5)
    )
    replies = raw_exchange(sock_path, lines + b"\n  \n", 5)
    assert [r["id"] for r in replies] == ["r0", "r1", "r2", "r3", "r4"]
    assert [r["args"]["n"] for r in replies] == [0, 1, 2, 3, 4]


def test_ok_is_added_but_not_overridden(make_server: Any, sock_path: Path) -> None:
    make_server(lambda req: {"ok": False, "error": "betting is closed"} if req.op == "bet" else {})
    with ControlClient(sock_path) as client:
        assert client.request("status") == {"ok": True}
        assert client.request("bet", position=1, amount=1) == {
            "ok": False,
            "error": "betting is closed",
        }


# bad input: the connection and the server survive ------------------------------------


@pytest.mark.parametrize(
    ("line", "error"),
    [
        (b"{nope", "malformed request: not JSON"),
        (b"\xff\xfe{}", "malformed request: not UTF-8: byte 0xFF at position 0"),
        (b"[1, 2]", "malformed request: expected a JSON object"),
        (b'{"args": {}}', 'malformed request: missing "op"'),
        (b'{"op": 7}', 'malformed request: missing "op"'),
        (b'{"op": "roll", "args": [3, 4]}', 'malformed request: "args" must be a JSON object'),
        (b'{"op": "shutdown"}', "unknown op 'shutdown' (known: ack, bet,"),
    ],
)
def test_bad_request_gets_an_error_and_connection_survives(
    make_server: Any, sock_path: Path, line: bytes, error: str
) -> None:
    rec = Recorder()
    make_server(rec)
    bad, good = raw_exchange(sock_path, line + b"\n" + b'{"op": "status"}\n', 2)
    assert bad["ok"] is False and bad["error"].startswith(error)
    assert good["ok"] is True and good["op"] == "status"
    assert [r.op for r in rec.requests] == ["status"]


def test_oversized_line_is_refused_and_the_next_line_served(
    make_server: Any, sock_path: Path
) -> None:
    make_server()
    huge = b'{"op": "status", "args": {"x": "' + b"x" * (MAX_LINE + 100) + b'"}}\n'
    bad, good = raw_exchange(sock_path, huge + b'{"op": "status", "id": 2}\n', 2)
    assert bad == {"ok": False, "error": f"request line too long: more than {MAX_LINE} bytes"}
    assert good["ok"] is True and good["id"] == 2


def test_oversized_line_sent_in_pieces_gets_one_error(make_server: Any, sock_path: Path) -> None:
    make_server(max_line=1000)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(sock_path))
        f = s.makefile("rb")
        s.sendall(b"y" * 1500)
        assert "too long" in json.loads(f.readline())["error"]
        for _ in range(5):  # the rest of the same line: dropped, no more errors
            s.sendall(b"y" * 1500)
        s.sendall(b"tail\n" + b'{"op": "ping"}\n')
        reply = json.loads(f.readline())
        assert reply["ok"] is True and reply["pong"] is True


def test_line_of_exactly_max_line_is_accepted(make_server: Any, sock_path: Path) -> None:
    make_server(max_line=200)
    body = b'{"op": "status", "args": {"pad": "'
    line = body + b"p" * (200 - len(body) - 3) + b'"}}'
    assert len(line) == 200
    (reply,) = raw_exchange(sock_path, line + b"\n", 1)
    assert reply["ok"] is True


def test_handler_errors_become_replies(make_server: Any, sock_path: Path) -> None:
    def handler(req: Request) -> Mapping[str, Any]:
        if req.op == "void":
            raise FirebetError("nothing to void")
        if req.op == "ack":
            raise RuntimeError("boom")
        if req.op == "history":
            return {"when": object()}
        return {"fine": True}

    make_server(handler)
    with ControlClient(sock_path) as client:
        assert client.request("void") == {"ok": False, "error": "nothing to void"}
        assert client.request("ack") == {"ok": False, "error": "internal error handling ack: boom"}
        assert client.request("history") == {
            "ok": False,
            "error": "internal error handling history: reply is not JSON",
        }
        assert client.request("status") == {"ok": True, "fine": True}


def test_concurrent_clients(make_server: Any, sock_path: Path) -> None:
    rec = Recorder()
    make_server(rec)
    errors: list[str] = []

    def worker(n: int) -> None:
        try:  # a deadline as generous as a real process's: this judges answers, not speed
            with ControlClient(sock_path, timeout=60) as client:  # the longest deadline
                for i in range(20):
                    reply = client.request("status", worker=n, i=i)
                    if reply["args"] != {"worker": n, "i": i}:
                        errors.append(f"worker {n} got {reply}")
        except Exception as exc:  # a thread's failure is the test's, by name
            errors.append(f"worker {n}: {exc!r}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(PROCESS_DEADLINE_S)
    assert not any(t.is_alive() for t in threads), "a client thread did not finish"
    assert not errors
    assert len(rec.requests) == 16 * 20


def test_a_full_socket_makes_room_by_closing_the_longest_idle(
    make_server: Any, sock_path: Path
) -> None:
    make_server(max_connections=2)
    holders = [ControlClient(sock_path) for _ in range(2)]
    try:
        for h in holders:
            assert h.request("ping")["ok"] is True  # both connections are being served
        (reply,) = raw_exchange(sock_path, b'{"op": "ping"}\n', 1)
        assert reply["ok"] is True  # the newcomer is served, the oldest idle one was closed
        assert holders[1].request("ping")["ok"] is True
    finally:
        for h in holders:
            h.close()


# the client -----------------------------------------------------------------------------


def test_client_without_server_raises_service_unreachable(sock_path: Path) -> None:
    with pytest.raises(ServiceUnreachable) as err:
        ControlClient(sock_path).request("status")
    assert err.value.exit_code == 3
    assert str(err.value) == (
        f"firebet service is not running: no control socket at {sock_path} "
        "(on a bench start it with: firebet run --simulated-reader --pin-factory mock "
        f"--state-dir {sock_path.parent}; an installed table: sudo systemctl start firebet)"
    )


def test_the_installed_socket_gets_the_systemd_advice() -> None:
    """Bench-aware (issue 33): only the installed unit's socket is told to use systemctl."""
    client = ControlClient("/run/firebet/control.sock")
    assert client._advice() == "start it with: sudo systemctl start firebet"


def test_a_bench_socket_by_another_name_is_named_in_the_advice(tmp_path: Path) -> None:
    """#33: --state-dir alone would start a service on control.sock, not on this socket."""
    advice = ControlClient(tmp_path / "bench.sock")._advice()
    assert advice == (
        "on a bench start it with: firebet run --simulated-reader --pin-factory mock "
        f"--state-dir {tmp_path} --socket {tmp_path / 'bench.sock'}; an installed table: "
        "sudo systemctl start firebet"
    )


def test_client_on_a_dead_socket_file(sock_path: Path) -> None:
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock_path))
    dead.close()
    with pytest.raises(ServiceUnreachable, match="nothing answers on"):
        ControlClient(sock_path).request("status")


def test_client_times_out_on_a_stuck_service(make_server: Any, sock_path: Path) -> None:
    release = threading.Event()

    def stuck(_req: Request) -> Mapping[str, Any]:
        release.wait(30)
        return {}

    make_server(stuck)
    try:
        with pytest.raises(ServiceUnreachable, match=r"did not answer status within 0\.5 s"):
            ControlClient(sock_path, timeout=0.2, grace=0.3).request("status")
    finally:
        release.set()


def test_client_reconnects_after_server_restart(sock_path: Path) -> None:
    client = ControlClient(sock_path)
    with ControlServer(sock_path, Recorder(), DEALERS, TECHS):
        assert client.request("ping")["ok"] is True
    with pytest.raises(ServiceUnreachable):
        client.request("ping")
    with ControlServer(sock_path, Recorder(), DEALERS, TECHS):
        assert client.request("ping")["ok"] is True
    client.close()


def test_a_hand_start_makes_the_socket_s_missing_folder(tmp_path: Path) -> None:
    """#33: the installed service started by hand failed on a missing /run/firebet (only
    the unit's RuntimeDirectory made it)."""
    import stat

    from controller.control import socketfile

    path = tmp_path / "run" / "firebet" / "control.sock"
    listener, _ = socketfile.bind(path)
    try:
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o750
    finally:
        listener.close()
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.raises(FirebetError, match="cannot make the control socket's folder"):
        socketfile.bind(blocked / "control.sock")
