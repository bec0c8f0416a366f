"""The control socket under attack: ill-formed lines, idle and slow connections, floods
(#9; retries and deadlines are test_control_retries.py). A real AF_UNIX socket; the
handler is a test double."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.control.client import ControlClient
from controller.control.server import ControlServer
from controller.core.errors import FirebetError, ServiceUnreachable
from tests.control_support import GatedRecorder, Line, dealer
from tests.support import DEALERS, TECHS, wait_for

# item 4: every request, however ill-formed, gets a reply naming what was wrong ---------

ATTACKS = [
    (b'{"op":"bet","args":{"amount":' + b"7" * 5000 + b"}}", "number too large: 5000 digits"),
    (b"[" * 30_000 + b"]" * 30_000, "nested deeper than 8 levels"),
    (b'{"id":' + b"[" * 50_000 + b"]" * 50_000 + b"}", "request line too long"),
    (b'{"op":"bet","id":"\\ud800"}', '"id" must be a whole number or a string'),
    (b'{"op":"bet","args":{"position":"\\udc00"}}', "lone surrogate U+DC00"),
    (b'{"op":"st\xc3\x28tus"}', "not UTF-8: byte 0xC3 at position 9"),
    (b'{"op":"bet","args":{"amount":NaN}}', "NaN is not a number"),
    (b"\x00\x01\x02", "not JSON"),
]


@pytest.mark.parametrize(("line", "reason"), ATTACKS)
def test_every_ill_formed_request_gets_an_error_naming_it(
    serve: Any, sock_path: Path, line: bytes, reason: str
) -> None:
    rec = GatedRecorder()
    serve(rec)
    with Line(sock_path) as conn:
        conn.send(line + b"\n")
        bad = conn.reply()
        assert bad["ok"] is False and reason in bad["error"], bad
        assert bad["error"].startswith(("malformed request: ", "request line too long"))
        assert conn.ask({"op": "status", "id": 1}) == {"ok": True, "op": "status", "args": {},
                                                       "n": 1, "id": 1}  # fmt: skip
    assert rec.count("bet") == 0


def test_a_huge_line_gets_one_error_and_the_next_line_is_served(
    serve: Any, sock_path: Path
) -> None:
    serve()
    with Line(sock_path) as conn:
        conn.send(b"x" * (3 * 1024 * 1024) + b"\n" + b'{"op":"ping","id":2}\n')
        assert "request line too long" in conn.reply()["error"]
        assert conn.reply()["pong"] is True


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("fuzz") / "c.sock"
    server = ControlServer(path, GatedRecorder(), DEALERS, TECHS, identify=dealer, service_uid=999)
    server.start()
    yield path
    server.stop()


def _fuzz_one(path: Path, line: bytes) -> None:
    conn = Line(path, timeout=10)
    try:
        conn.send(line.replace(b"\n", b" ") + b"\n" + b'{"op":"ping","id":"after"}\n')
        first = conn.reply()
        if line.strip().replace(b"\n", b" ").strip():
            assert isinstance(first["ok"], bool) and (first["ok"] or first["error"]), first
            second = conn.reply()
        else:
            second = first  # a blank line is skipped
        assert second == {"ok": True, "pong": True, "pid": second["pid"], "id": "after"}
    finally:
        conn.close()


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=1, max_size=200))
def test_fuzz_raw_bytes_every_line_answered(fuzz_server: Path, line: bytes) -> None:
    _fuzz_one(fuzz_server, line)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "op": st.sampled_from(["status", "bet", "ping", "whoami", "clear-halt"]) | st.text(),
            "args": JSONISH,
            "id": JSONISH,
            "deadline_ms": st.integers(-5, 70_000) | JSONISH,
        },
    )
)
def test_fuzz_requests_every_line_answered(fuzz_server: Path, body: dict[str, Any]) -> None:
    _fuzz_one(fuzz_server, json.dumps(body).encode())


# item 3: idle and slow clients neither hold the socket nor keep anybody out ------------


def test_idle_connections_are_dropped(serve: Any, sock_path: Path) -> None:
    server = serve(idle_timeout=0.3)
    with Line(sock_path) as conn:
        assert conn.ask({"op": "ping"})["pong"] is True
        bye = conn.reply()  # nothing sent: the server says why it closes, then closes
        assert bye == {"ok": False, "error": "closed: no request for 0.3 s"}
        assert conn.file.readline() == b""
        wait_for(lambda: server.connections == 0, what="the server to forget the connection")


def test_a_slowloris_half_line_is_dropped_too(serve: Any, sock_path: Path) -> None:
    serve(idle_timeout=0.3)
    with Line(sock_path) as conn:
        closed = False
        give_up = time.monotonic() + 30  # it is closed after 0.3 s; a busy machine is slow
        while not closed and time.monotonic() < give_up:
            try:
                conn.send(b" ")  # a byte at a time, never a whole request
            except (BrokenPipeError, ConnectionResetError):
                closed = True
            else:
                time.sleep(0.05)
        assert closed, "a connection that never completes a request must be closed"
        assert conn.reply() == {"ok": False, "error": "closed: no request for 0.3 s"}


def test_hundreds_of_idle_connections_keep_nobody_out(serve: Any, sock_path: Path) -> None:
    rec = GatedRecorder()
    server = serve(rec)
    idle = []
    try:
        for _ in range(300):
            idle.append(Line(sock_path))
        wait_for(lambda: server.connections == 300, what="300 idle connections")
        with ControlClient(sock_path) as client:
            assert client.request("status")["ok"] is True
            assert client.request("bet", position=1, amount=5)["ok"] is True
    finally:
        for c in idle:
            c.close()
    assert rec.count("bet") == 1


def test_a_full_socket_closes_the_hog_not_the_newcomer(serve: Any, sock_path: Path) -> None:
    server = serve(max_connections=20)
    hog = [Line(sock_path) for _ in range(60)]
    try:
        with ControlClient(sock_path) as client:
            assert client.request("status")["ok"] is True
        assert server.connections <= 20
    finally:
        for c in hog:
            c.close()


def test_clients_that_never_read_do_not_block_others(serve: Any, sock_path: Path) -> None:
    serve()
    deaf = []
    try:
        for _ in range(20):  # each floods requests and never reads a reply
            c = Line(sock_path)
            c.sock.setblocking(False)
            try:
                for _ in range(2000):
                    c.sock.send(b'{"op":"status"}\n' * 64)
            except BlockingIOError:
                pass
            deaf.append(c)
        with ControlClient(sock_path) as client:
            assert client.request("bet", position=2, amount=1)["ok"] is True
    finally:
        for c in deaf:
            c.close()


def test_a_slow_reading_request_never_delays_a_dealer(serve: Any, sock_path: Path) -> None:
    rec = GatedRecorder(slow=frozenset({"history"}))
    serve(rec)
    readers = [Line(sock_path) for _ in range(4)]
    try:
        for r in readers:
            r.send(b'{"op":"history"}\n')
        assert rec.entered.wait(10)
        # the readers are held for 30 s: an answer within 10 s went past them
        with ControlClient(sock_path, timeout=10.0) as client:
            assert client.request("bet", position=1, amount=5)["ok"] is True
            assert client.request("status")["ok"] is True
    finally:
        rec.gate.set()
        for r in readers:
            r.close()


def test_busy_is_a_retryable_refusal_not_service_down(serve: Any, sock_path: Path) -> None:
    rec = GatedRecorder(slow=frozenset({"history"}))
    serve(rec, lane_size=1)
    first, second = Line(sock_path), Line(sock_path)
    try:
        first.send(b'{"op":"history"}\n')  # running
        assert rec.entered.wait(10)
        second.send(b'{"op":"history"}\n')  # waiting: the lane is full now
        wait_for(lambda: rec.count("history") == 1)
        third = Line(sock_path)
        busy = third.ask({"op": "history", "id": 3})
        assert busy["ok"] is False and busy["busy"] is True and "busy" in busy["error"]
        third.close()
        with pytest.raises(FirebetError) as caught, ControlClient(sock_path, 0.3) as client:
            client.request("history")
        assert not isinstance(caught.value, ServiceUnreachable)
        assert caught.value.exit_code == 1 and "busy" in str(caught.value)
        # the client retries a busy request until its deadline: room comes, it is served
        threading.Timer(0.3, rec.gate.set).start()
        with ControlClient(sock_path, timeout=30.0) as client:
            assert client.request("history")["ok"] is True
    finally:
        rec.gate.set()
        first.close()
        second.close()
