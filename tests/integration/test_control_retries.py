"""The control socket's retries and deadlines (#9): a retry with the same id is applied
once, a request past its deadline is never started, the client waits longer than the
server's limit, reading floods are paced per user. A real AF_UNIX socket; the handler is
a test double."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from controller.control.client import ControlClient
from controller.control.protocol import Request
from tests.control_support import GatedRecorder, Line
from tests.support import wait_for

# item 2: deadlines and retries ------------------------------------------------------------


def test_a_retry_with_the_same_id_is_applied_once(serve: Any, sock_path: Path) -> None:
    rec = GatedRecorder()
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
    rec = GatedRecorder(slow=frozenset({"bet"}))
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
    rec = GatedRecorder(slow=frozenset({"void"}))
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
    rec = GatedRecorder()
    server = serve(rec, idle_timeout=0.2)
    with ControlClient(sock_path) as client:
        assert client.request("bet", position=1, amount=1)["ok"] is True
        wait_for(lambda: server.connections == 0, what="the idle connection to be closed")
        assert client.request("bet", position=2, amount=1)["ok"] is True
    assert rec.count("bet") == 2


def test_a_reading_flood_is_paced_per_user_and_a_dealer_is_not(serve: Any, sock_path: Path) -> None:
    rec = GatedRecorder()
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
