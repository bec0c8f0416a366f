"""``firebet doctor``'s broker check: reach the broker without logging in as anyone.

The shipped broker set-up binds each client id to its user name
(``use_username_as_clientid``, docs/floor.md), so a second login with the table's user
name takes the table's session over: the link would be dropped, and a persistent session
(with the commands queued for it) replaced. The probe therefore logs in as nobody, with a
client id of its own: the broker's answer to that login (any answer, a refusal included)
proves the address, the port and the TLS set-up; whether the table's own login works is
what the running service's link reports (``status --json`` ``floor.connected``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any

import paho.mqtt.client as mqtt

from controller.core.config import FloorConfig
from controller.core.errors import FirebetError
from controller.wire.mqtt import connect, make_client


@dataclass(frozen=True)
class Probe:
    """What the broker said to a login as nobody: ``problem`` None when it answered
    (``answer``: its words, e.g. "Not authorized"), else why it could not be reached."""

    problem: str | None
    answer: str = ""


def probe_broker(floor: FloorConfig, client_id: str, timeout: float = 5.0) -> Probe:
    """Reach the broker at ``floor.broker`` as nobody (no user name, no password; TLS as
    the table's ``[floor]`` says) with ``client_id``, which must be nobody's session."""
    anonymous = replace(floor, username="", password_file="")
    try:
        client = make_client(anonymous, client_id)
    except FirebetError as exc:
        return Probe(str(exc))
    answer: list[str] = []
    done = threading.Event()

    def on_connect(c: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        answer.append(str(reason))
        done.set()

    client.on_connect = on_connect
    _, host, port = floor.endpoint()
    try:
        connect(client, anonymous, keepalive=10, wait=True)
    except (OSError, ValueError) as exc:
        return Probe(f"cannot reach {host}:{port}: {exc}")
    client.loop_start()
    try:
        if not done.wait(timeout):
            return Probe(f"no answer from {host}:{port} within {timeout:g} s")
        return Probe(None, answer[0])
    finally:
        client.disconnect()
        client.loop_stop()
