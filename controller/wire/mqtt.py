"""The one MQTT client set-up of both ends: paho, MQTT 5, TLS and the broker login.

The table's floor link (:mod:`controller.link.link`), ``firebet doctor``'s broker check
(:mod:`controller.link.probe`) and the floor service (:mod:`controller.floor.server`)
all make their client here, so the protocol version, the TLS set-up and the login are
the same at both ends of the broker.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from typing import Any, Protocol

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from controller.core.config import Broker, broker_endpoint
from controller.core.errors import FirebetError

# a persistent session (the floor's) is kept by the broker this long while the client is
# away (MQTT 5 session expiry: the largest value means it never expires)
SESSION_EXPIRY_S = 0xFFFFFFFF


def read_password(path: str) -> str:
    """The broker password: the first line of ``path``."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise FirebetError(f"cannot read the broker password file {path}: {exc}") from exc


class Login(Protocol):
    """How one end logs in to the broker (the table's ``[floor]``, the floor's settings)."""

    @property
    def broker(self) -> str: ...
    @property
    def username(self) -> str: ...
    @property
    def password_file(self) -> str: ...
    @property
    def tls_ca(self) -> str: ...


def endpoint(login: Login) -> Broker:
    """The TLS, host and port of ``login``'s broker."""
    return broker_endpoint(login.broker)


def make_client(login: Login, client_id: str, *, manual_ack: bool = False) -> mqtt.Client:
    """A paho client (MQTT 5) for ``login``: TLS with the configured CA (or the system's)
    for ``mqtts://``, the user name and the password file's first line.

    ``manual_ack``: the caller acknowledges each message once it has stored it. Raises
    :class:`FirebetError` when the password cannot be read.
    """
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        protocol=mqtt.MQTTv5,
        manual_ack=manual_ack,
    )
    if login.username:
        password = read_password(login.password_file) if login.password_file else None
        client.username_pw_set(login.username, password)
    if endpoint(login).tls:
        client.tls_set_context(ssl.create_default_context(cafile=login.tls_ca or None))
    return client


def connect(
    client: mqtt.Client,
    login: Login,
    *,
    keepalive: int,
    persistent: bool = False,
    wait: bool = False,
) -> None:
    """Connect ``client`` to the broker of ``login``: in the background (paho reconnects
    by itself) unless ``wait``. ``persistent``: the broker keeps the session, and what
    arrives for it, while the client is away (the floor's)."""
    properties: Properties | None = None
    if persistent:
        properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        properties.SessionExpiryInterval = SESSION_EXPIRY_S
    _, host, port = endpoint(login)
    if wait:
        client.connect(
            host, port, keepalive=keepalive, clean_start=not persistent, properties=properties
        )
    else:
        client.connect_async(
            host, port, keepalive=keepalive, clean_start=not persistent, properties=properties
        )


def no_delay(client: mqtt.Client, userdata: Any, sock: Any) -> None:
    """Send each message at once (Nagle's algorithm holds small writes back for an ACK)."""
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
