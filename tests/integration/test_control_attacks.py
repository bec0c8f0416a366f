"""The control socket under attack: ill-formed lines, idle and slow connections, floods,
retries and deadlines (#9). A real AF_UNIX socket; the handler is a test double."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.control.client import ControlClient
from controller.control.protocol import Identity, Request
from controller.control.server import ControlServer
from controller.core.errors import FirebetError, ServiceUnreachable
from tests.support import DEALERS, TECHS, control_servers, wait_for


class Recorder:
    """Remembers every request; answers at once, or waits for ``gate`` on chosen ops."""

    def __init__(self, slow: frozenset[str] = frozenset()) -> None:
        self.requests: list[Request] = []
        self.lock = threading.Lock()
        self.slow = slow
        self.gate = threading.Event()
        self.entered = threading.Event()

    def __call__(self, request: Request) -> Mapping[str, Any]:
        with self.lock:
            self.requests.append(request)
        if request.op in self.slow:
            self.entered.set()
            self.gate.wait(30)
        return {"op": request.op, "args": request.args, "n": len(self.requests)}

    def count(self, op: str) -> int:
        with self.lock:
            return sum(1 for r in self.requests if r.op == op)


def dealer(_uid: int, gid: int) -> Identity:
    return Identity(uid=1001, gid=gid, user="dana", groups=frozenset({DEALERS}))


@pytest.fixture
def sock_path(tmp_path: Path) -> Path:
    return tmp_path / "c.sock"


@pytest.fixture
def serve(sock_path: Path) -> Iterator[Callable[..., ControlServer]]:
    with control_servers(sock_path, Recorder, identify=dealer, service_uid=999) as make:
        yield make


class Line:
    """A raw connection speaking lines."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))  # blocking: waits while the listen queue is full
        self.sock.settimeout(timeout)
        self.file = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def reply(self) -> dict[str, Any]:
        line = self.file.readline()
        assert line.endswith(b"\n"), f"no reply line, got {line[:80]!r}"
        body: dict[str, Any] = json.loads(line)
        return body

    def ask(self, body: dict[str, Any]) -> dict[str, Any]:
        self.send(json.dumps(body).encode() + b"\n")
        return self.reply()

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Line:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    rec = Recorder()
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
    server = ControlServer(path, Recorder(), DEALERS, TECHS, identify=dealer, service_uid=999)
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
    rec = Recorder()
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
    rec = Recorder(slow=frozenset({"history"}))
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
    rec = Recorder(slow=frozenset({"history"}))
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


# item 2: deadlines and retries ------------------------------------------------------------


def test_a_retry_with_the_same_id_is_applied_once(serve: Any, sock_path: Path) -> None:
    rec = Recorder()
    serve(rec)
    with Line(sock_path) as a, Line(sock_path) as b:
        bet = {"op": "bet", "args": {"position": 3, "amount": 1}, "id": "dealer-7"}
        first = a.ask(bet)
        again = b.ask(bet)  # another connection, as after a dropped one
        assert first == again and first["ok"] is True
        assert rec.count("bet") == 1
        other = a.ask({"op": "bet", "args": {"position": 4, "amount": 1}, "id": "dealer-7"})
        assert other["ok"] is False and "already used for another request" in other["error"]
        assert a.ask({**bet, "id": "dealer-8"})["ok"] is True  # a new id is a new bet
        assert rec.count("bet") == 2


def test_a_retry_while_the_first_is_in_flight_waits_for_it(serve: Any, sock_path: Path) -> None:
    rec = Recorder(slow=frozenset({"bet"}))
    serve(rec)
    a, b = Line(sock_path), Line(sock_path)
    try:
        bet = json.dumps({"op": "bet", "args": {"position": 3, "amount": 1}, "id": 41})
        a.send(bet.encode() + b"\n")
        assert rec.entered.wait(10)
        b.send(bet.encode() + b"\n")
        rec.gate.set()
        assert a.reply() == b.reply()
        assert rec.count("bet") == 1
    finally:
        rec.gate.set()
        a.close()
        b.close()


def test_a_request_past_its_deadline_is_never_started(serve: Any, sock_path: Path) -> None:
    rec = Recorder(slow=frozenset({"void"}))
    serve(rec)
    a, b = Line(sock_path), Line(sock_path)
    try:
        a.send(b'{"op":"void","id":1}\n')  # holds the dealers' lane
        assert rec.entered.wait(10)
        b.send(b'{"op":"bet","args":{"position":1,"amount":1},"id":2,"deadline_ms":100}\n')
        time.sleep(0.3)  # the bet's deadline passes while it waits (the point of the test)
        rec.gate.set()
        assert a.reply()["ok"] is True
        late = b.reply()
        assert (
            late["ok"] is False
            and late["expired"] is True
            and "nothing was changed" in (late["error"])
        )
        assert rec.count("bet") == 0
        # told "not done": the same id may be sent again, and then it is done
        again = b.ask({"op": "bet", "args": {"position": 1, "amount": 1}, "id": 2})
        assert again["ok"] is True and rec.count("bet") == 1
    finally:
        rec.gate.set()
        a.close()
        b.close()


def test_the_client_waits_longer_than_the_servers_limit(serve: Any, sock_path: Path) -> None:
    timeout = 1.0  # a busy machine starts the request late, but not a second late

    def slow_but_started(request: Request) -> Future[Mapping[str, Any]]:
        done: Future[Mapping[str, Any]] = Future()
        # done after the client's deadline has passed, whenever it started
        threading.Timer(timeout + 0.4, done.set_result, [{"applied": True}]).start()
        return done

    serve(slow_but_started)
    # the deadline limits when it may start; once started it finishes and the client,
    # waiting deadline + grace, hears that it was done
    with ControlClient(sock_path, timeout=timeout, grace=30.0) as client:
        assert client.request("bet", position=1, amount=1) == {"ok": True, "applied": True}


def test_a_kept_connection_closed_for_idleness_is_reopened_by_the_client(
    serve: Any, sock_path: Path
) -> None:
    rec = Recorder()
    server = serve(rec, idle_timeout=0.2)
    with ControlClient(sock_path) as client:
        assert client.request("bet", position=1, amount=1)["ok"] is True
        wait_for(lambda: server.connections == 0, what="the idle connection to be closed")
        assert client.request("bet", position=2, amount=1)["ok"] is True
    assert rec.count("bet") == 2


def test_a_reading_flood_is_paced_per_user_and_a_dealer_is_not(serve: Any, sock_path: Path) -> None:
    rec = Recorder()
    serve(rec, read_rate=20.0)
    with Line(sock_path) as flood, Line(sock_path) as dealer_conn:
        t0 = time.monotonic()
        flood.send(b'{"op":"status"}\n' * 400)  # a second's burst (20), then 20 a second
        wait_for(lambda: rec.count("status") >= 25, what="the burst to be served")
        assert dealer_conn.ask({"op": "bet", "args": {"position": 1, "amount": 1}})["ok"]
        # the rest of the flood needs 19 s at its pace: the dealer did not wait behind it
        assert rec.count("status") < 400
        for _ in range(60):
            assert flood.reply()["ok"] is True
        assert time.monotonic() - t0 >= (60 - 20) / 20 * 0.9  # never faster than the pace


def test_the_reading_lane_rests_so_it_takes_only_its_share_of_a_cpu(
    serve: Any, sock_path: Path
) -> None:
    def burn(request: Request) -> Mapping[str, Any]:
        start = time.thread_time()
        while time.thread_time() - start < 0.05:  # 50 ms of CPU per history
            pass
        return {}

    serve(burn, lane_duty={"read": 0.25})
    with Line(sock_path) as conn:
        t0 = time.monotonic()
        conn.send(b'{"op":"history"}\n' * 3)
        for _ in range(3):
            assert conn.reply()["ok"] is True
        # 3 x 50 ms of work, and 150 ms of rest after each of the first two at least
        assert time.monotonic() - t0 >= 3 * 0.05 + 2 * 0.15
