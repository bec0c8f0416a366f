"""The floor link's MQTT client: paho, MQTT 5, TLS and the broker login as ``[floor]`` says.

Used by the link (:mod:`controller.floor.link`) and by ``firebet doctor``'s broker
check (:mod:`controller.floor.probe`).
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from controller.core.config import FloorConfig
from controller.core.errors import FirebetError


def read_password(path: str) -> str:
    """The broker password: the first line of ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise FirebetError(f"cannot read floor.password_file {path}: {exc}") from exc


def make_client(floor: FloorConfig, client_id: str) -> mqtt.Client:
    """A paho client for ``floor`` (MQTT 5, TLS and credentials as configured)."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    if floor.username:
        password = read_password(floor.password_file) if floor.password_file else None
        client.username_pw_set(floor.username, password)
    tls, _, _ = floor.endpoint()
    if tls:
        client.tls_set(ca_certs=floor.tls_ca or None)
    return client


def no_delay(client: mqtt.Client, userdata: Any, sock: Any) -> None:
    """Send each message at once (Nagle's algorithm holds small writes back for an ACK)."""
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
