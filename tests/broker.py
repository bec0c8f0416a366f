"""A real mosquitto for the floor tests: a free local port, users, the ACL of docs/floor.md.

:class:`Mosquitto` writes a config, a password file (``mosquitto_passwd``) and the ACL
shipped in ``systemd/mosquitto-acl.example`` into a temporary folder, starts the broker
on 127.0.0.1, and can stop, kill and restart it on the same port (persistence on, so
retained messages and queued QoS 1 messages survive a clean restart).
:class:`Subscriber` is a floor stand-in that keeps every message it hears.
"""

from __future__ import annotations

import getpass
import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from tests.support import ROOT, wait_for

ACL_EXAMPLE = ROOT / "systemd" / "mosquitto-acl.example"
USERS = {
    "floor": "floor-secret",
    "floor-2": "floor-2-secret",
    "CR-07": "table-07-secret",
    "CR-08": "table-08-secret",
    "consumer": "consumer-secret",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mosquitto_binary() -> str:
    for name in ("mosquitto", "/usr/sbin/mosquitto"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError(
        "mosquitto is not installed: the floor tests need it "
        "(Debian/Ubuntu: sudo apt-get install mosquitto; .ci/run installs it)"
    )


class Mosquitto:
    """One broker process on ``127.0.0.1:port`` with the example ACL."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.passwords = self.folder / "passwd"
        self.passwords.write_text("")
        self.passwords.chmod(0o600)
        for user, password in USERS.items():
            subprocess.run(
                ["mosquitto_passwd", "-b", str(self.passwords), user, password],
                check=True,
                capture_output=True,
            )
        self.acl = self.folder / "acl"
        self.acl.write_text(ACL_EXAMPLE.read_text())
        self.conf = self.folder / "mosquitto.conf"

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def password_file(self, user: str) -> Path:
        """A file holding ``user``'s password (as a table's password_file)."""
        path = self.folder / f"{user}.password"
        path.write_text(USERS[user] + "\n")
        return path

    def start(self) -> None:
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous false\n"
            f"password_file {self.passwords}\n"
            f"acl_file {self.acl}\n"
            "use_username_as_clientid true\n"  # as the shipped set-up (docs/floor.md)
            "message_size_limit 1048576\n"
            "persistence true\n"
            f"persistence_location {self.folder}/\n"
            f"user {getpass.getuser()}\n"
            "max_queued_messages 0\n"
        )
        self.starts += 1
        log = open(self.folder / f"mosquitto-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [mosquitto_binary(), "-c", str(self.conf)], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        wait_for(self._listening, what=f"mosquitto on port {self.port}")

    def _listening(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            log = (self.folder / f"mosquitto-{self.starts}.log").read_text(errors="replace")
            raise AssertionError(f"mosquitto exited {self.proc.returncode}:\n{log}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """A clean stop (SIGTERM: mosquitto saves its persistence file)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


class Subscriber:
    """A floor stand-in: subscribes as ``floor`` and keeps every message by topic."""

    def __init__(
        self, broker: Mosquitto, topics: str = "firebet/#", *, client_id: str = "floor-test"
    ) -> None:
        self.messages: list[tuple[str, Any, bool]] = []  # (topic, payload, retained)
        self.lock = threading.Lock()
        self.connected = threading.Event()
        self.topics = topics
        # a persistent session: what is published while it is cut off waits at the broker
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv311,
            clean_session=False,
        )
        self.client.username_pw_set("floor", USERS["floor"])
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = lambda *a: self.connected.clear()
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(0.1, 0.5)  # type: ignore[arg-type]
        self.client.connect("127.0.0.1", broker.port, keepalive=10)
        self.client.loop_start()
        wait_for(self.connected.is_set, what="the floor subscriber to connect")

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, rc: Any, p: Any) -> None:
        client.subscribe(self.topics, qos=1)
        self.connected.set()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        with self.lock:
            self.messages.append((message.topic, json.loads(message.payload), message.retain))

    def on(self, topic: str) -> list[Any]:
        with self.lock:
            return [payload for t, payload, _ in self.messages if t == topic]

    def records(self, table: str = "CR-07") -> list[int]:
        return [m["record"] for m in self.on(f"firebet/{table}/event")]

    def publish(self, topic: str, payload: Any) -> None:
        info = self.client.publish(topic, json.dumps(payload), qos=1)
        info.wait_for_publish(timeout=10)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def one_shot(
    broker: Mosquitto, user: str, topic: str, payload: Any, *, retain: bool = False
) -> int:
    """Publish once as ``user`` over MQTT 5; the broker's PUBACK reason code (0 = taken)."""
    codes: list[int] = []
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"{user}-one-shot-{time.monotonic_ns()}",
        protocol=mqtt.MQTTv5,
    )  # fmt: skip
    client.username_pw_set(user, USERS[user])
    client.on_publish = lambda c, u, mid, reason, props: codes.append(reason.value)
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    try:
        client.publish(topic, json.dumps(payload), qos=1, retain=retain)
        wait_for(lambda: codes, what=f"the broker's PUBACK to {user}")
    finally:
        client.disconnect()
        client.loop_stop()
    return codes[0]
