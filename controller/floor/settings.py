"""The floor service's configuration (``floor.toml``), parsed strictly like a table's.

```toml
[floor]
broker = "mqtt://127.0.0.1:1883"   # or mqtts://host:8883 (with tls_ca, or the system CAs)
username = ""                      # the floor's identity on the broker
password_file = ""                 # a file holding its password
tls_ca = ""                        # CA certificate file for mqtts://
topic_prefix = "firebet"
client_id = "firebet-floor"        # the broker keeps this session's messages while away
http = "127.0.0.1:8080"            # the console (--http overrides)
database = "floor.db"              # relative to the state directory
gap_grace_s = 1.0                  # a gap open this long asks the table to resend
resend_every_s = 5.0               # and asks again this often while it stays open

[users]                            # surveillance logins: name = "scrypt$..." hash
alice = "scrypt$16384$8$1$..."     # make one with: firebet floor passwd alice

[shifts]                           # the shift figures' shifts, local time (these without)
grave = "00:00-08:00"              # an end at or before the start is the next day's
day = "08:00-16:00"
swing = "16:00-24:00"
```

Times are the floor's local time: the system's zone (``$TZ``, else ``/etc/localtime``).

Unknown sections or keys, wrong types and bad values are a :class:`ConfigError`
naming the file, the key and the reason (exit 2).
"""

from __future__ import annotations

import os
import re
import zoneinfo
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from pathlib import Path
from typing import Any

from controller.core.config import Broker, broker_endpoint, broker_problem
from controller.core.config.schema import (
    Key,
    check_sections,
    file_name,
    nonempty,
    positive,
    read_file,
    topic_prefix,
)
from controller.core.errors import ConfigError, FirebetError
from controller.floor.figures import DEFAULT_SHIFTS, Shift, parse_shifts, shift_problem
from controller.floor.passwords import hash_problem
from controller.wire.mqtt import read_password

USER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclass(frozen=True)
class FloorSettings:
    """The whole, validated configuration of the floor service."""

    broker: str = "mqtt://127.0.0.1:1883"
    username: str = ""
    password_file: str = ""
    tls_ca: str = ""
    topic_prefix: str = "firebet"
    client_id: str = "firebet-floor"
    http: str = "127.0.0.1:8080"
    database: str = "floor.db"
    gap_grace_s: float = 1.0
    resend_every_s: float = 5.0
    users: dict[str, str] = field(default_factory=dict)
    shifts: tuple[Shift, ...] = DEFAULT_SHIFTS
    source: str = "defaults"

    def endpoint(self) -> Broker:
        """The broker's host, port and whether it speaks TLS."""
        return parse_broker(self.broker, self.source)

    def password(self) -> str | None:
        """The floor's broker password, read from ``password_file`` (None without one)."""
        if not self.password_file:
            return None
        try:
            return read_password(self.password_file)
        except FirebetError as exc:
            raise ConfigError(self.source, "floor.password_file", str(exc)) from exc


def http_problem(value: str) -> str | None:
    """Why ``value`` is not the console's ``HOST:PORT`` (None: it is)."""
    host, sep, port = value.rpartition(":")
    if sep and host and port.isascii() and port.isdigit() and 0 <= int(port) <= 65535:
        return None
    return "must be HOST:PORT (port 0..65535)"


FLOOR_KEYS: dict[str, Key] = {
    key.name: key
    for key in (
        Key("floor", "broker", "str", "MQTT broker mqtt://host:port or mqtts://", broker_problem),
        Key("floor", "username", "str", "the floor's identity on the broker"),
        Key("floor", "password_file", "str", "file holding the broker password"),
        Key("floor", "tls_ca", "str", "CA certificate of the broker (mqtts:// only)"),
        Key("floor", "topic_prefix", "str", "first topic level of every topic", topic_prefix),
        Key("floor", "client_id", "str", "the broker keeps this session's messages", nonempty),
        Key("floor", "http", "str", "HOST:PORT of the console", http_problem),
        Key("floor", "database", "str", "relative to the state directory", file_name),
        Key("floor", "gap_grace_s", "float", "a gap open this long asks for a resend", positive),
        Key("floor", "resend_every_s", "float", "and asks again this often", positive),
    )
}
"""The ``[floor]`` keys, checked by the table configuration's own machinery."""


def parse_broker(url: str, source: str = "floor.toml") -> Broker:
    """The broker address of ``url``; a ConfigError naming ``floor.broker`` when bad."""
    problem = broker_problem(url)
    if problem:
        raise ConfigError(source, "floor.broker", f"{problem} (got {url!r})")
    return broker_endpoint(url)


def parse_http(value: str, source: str = "--http", key: str = "floor.http") -> tuple[str, int]:
    """``HOST:PORT`` of the console."""
    problem = http_problem(value)
    if problem:
        raise ConfigError(source, key, f"{problem} (got {value!r})")
    host, _, port = value.rpartition(":")
    return host.strip("[]"), int(port)


def settings_from_dict(data: dict[str, Any], source: str) -> FloorSettings:
    """Validate a parsed ``floor.toml``."""
    checked = check_sections(data, {"floor": FLOOR_KEYS}, source, free=("users", "shifts"))
    users: dict[str, str] = {}
    for name, encoded in checked.get("users", {}).items():
        if not USER_NAME.fullmatch(name):
            raise ConfigError(
                source, f"users.{name}", "a user name is letters, digits, _ . - (1 to 64)"
            )
        if not isinstance(encoded, str):
            raise ConfigError(
                source, f"users.{name}", f"must be a password hash string, not {encoded!r}"
            )
        problem = hash_problem(encoded)
        if problem:
            raise ConfigError(source, f"users.{name}", problem)
        users[name] = encoded
    shifts = checked.get("shifts", {})
    for name, value in shifts.items():
        problem = shift_problem(name, value)
        if problem:
            raise ConfigError(source, f"shifts.{name}", problem)
    try:
        parsed = parse_shifts(shifts) if shifts else DEFAULT_SHIFTS
    except ValueError as exc:
        raise ConfigError(source, "shifts", str(exc)) from None
    settings = FloorSettings(**checked.get("floor", {}), users=users, shifts=parsed, source=source)
    if settings.tls_ca and not settings.endpoint().tls:
        raise ConfigError(
            source, "floor.tls_ca", "is for an mqtts:// broker; floor.broker is mqtt://"
        )
    return settings


def load_settings(path: str | Path | None) -> FloorSettings:
    """The floor's validated configuration (the defaults without a file)."""
    if path is None:
        return FloorSettings()
    return settings_from_dict(read_file(path), str(path))


def local_zone(environ: dict[str, str] | None = None) -> tzinfo:
    """The floor's time zone: ``$TZ`` when it names one, else the system's
    (``/etc/localtime``), else UTC."""
    env = os.environ if environ is None else environ
    name = env.get("TZ", "").lstrip(":")
    if name:
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            pass
    target = os.path.realpath("/etc/localtime")
    _, found, key = target.partition("/zoneinfo/")
    try:
        if found:
            return zoneinfo.ZoneInfo(key)
        with open(target, "rb") as f:
            return zoneinfo.ZoneInfo.from_file(f, key="localtime")
    except (zoneinfo.ZoneInfoNotFoundError, OSError, ValueError):
        return UTC


def zone_name(zone: tzinfo) -> str:
    """``Europe/Paris`` (a zone's key), else what it calls itself."""
    key = getattr(zone, "key", None)
    return key if isinstance(key, str) else str(zone)
