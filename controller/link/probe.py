"""``firebet doctor``'s broker check: connect once with the table's credentials, then leave."""

from __future__ import annotations

import threading
from typing import Any

import paho.mqtt.client as mqtt

from controller.core.config import FloorConfig
from controller.core.errors import FirebetError
from controller.wire.mqtt import connect, make_client


def probe_broker(floor: FloorConfig, client_id: str, timeout: float = 5.0) -> str | None:
    """None when the broker at ``floor.broker`` takes the table's login, else why not.

    ``client_id`` must differ from the service's (the broker would drop the service's
    connection for a second one with the same id).
    """
    try:
        client = make_client(floor, client_id)
    except FirebetError as exc:
        return str(exc)
    answer: list[str | None] = []
    done = threading.Event()

    def on_connect(c: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        answer.append(f"the broker refused the login: {reason}" if reason.is_failure else None)
        done.set()

    client.on_connect = on_connect
    _, host, port = floor.endpoint()
    try:
        connect(client, floor, keepalive=10, wait=True)
    except (OSError, ValueError) as exc:
        return f"cannot reach {host}:{port}: {exc}"
    client.loop_start()
    try:
        if not done.wait(timeout):
            return f"no answer from {host}:{port} within {timeout:g} s"
        return answer[0]
    finally:
        client.disconnect()
        client.loop_stop()
