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
```

Unknown sections or keys, wrong types and bad values are a :class:`ConfigError`
naming the file, the key and the reason (exit 2).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from controller.core.errors import ConfigError
from controller.floor.passwords import hash_problem

SYSTEM_CONFIG = Path("/etc/firebet/floor.toml")
USER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_TOPIC = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*")


@dataclass(frozen=True)
class Broker:
    """Where the broker is: ``mqtt://host:port`` or ``mqtts://host:port``."""

    host: str
    port: int
    tls: bool


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
    source: str = "defaults"

    def endpoint(self) -> Broker:
        """The broker's host, port and whether it speaks TLS."""
        return parse_broker(self.broker, self.source)

    def password(self) -> str | None:
        """The floor's broker password, read from ``password_file`` (None without one)."""
        if not self.password_file:
            return None
        try:
            return Path(self.password_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                self.source, "floor.password_file", f"cannot read {self.password_file}: {exc}"
            ) from exc


_FLOOR_KEYS: dict[str, type] = {
    "broker": str,
    "username": str,
    "password_file": str,
    "tls_ca": str,
    "topic_prefix": str,
    "client_id": str,
    "http": str,
    "database": str,
    "gap_grace_s": float,
    "resend_every_s": float,
}


def parse_broker(url: str, source: str = "floor.toml") -> Broker:
    """The broker address of ``url``; a ConfigError naming ``floor.broker`` when bad."""
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "mqtts"):
        raise ConfigError(
            source, "floor.broker", f"must be mqtt://host:port or mqtts://host:port, not {url!r}"
        )
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(source, "floor.broker", f"has a bad port: {url!r}") from None
    if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.username:
        raise ConfigError(source, "floor.broker", f"must be scheme://host:port only, not {url!r}")
    tls = parts.scheme == "mqtts"
    return Broker(parts.hostname, port if port is not None else (8883 if tls else 1883), tls)


def parse_http(value: str, source: str = "--http", key: str = "floor.http") -> tuple[str, int]:
    """``HOST:PORT`` of the console."""
    host, sep, port = value.rpartition(":")
    if (
        not sep
        or not host
        or not port.isascii()
        or not port.isdigit()
        or not 0 <= int(port) <= 65535
    ):
        raise ConfigError(source, key, f"must be HOST:PORT (port 0..65535), not {value!r}")
    return host.strip("[]"), int(port)


def _check(key: str, value: Any, want: type, source: str) -> Any:
    if want is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(source, f"floor.{key}", f"must be a number, not {value!r}")
        if value <= 0:
            raise ConfigError(source, f"floor.{key}", f"must be greater than 0 (got {value!r})")
        return float(value)
    if not isinstance(value, str):
        raise ConfigError(source, f"floor.{key}", f"must be a string, not {value!r}")
    return value


def settings_from_dict(data: dict[str, Any], source: str) -> FloorSettings:
    """Validate a parsed ``floor.toml``."""
    values: dict[str, Any] = {}
    for section, body in data.items():
        if section not in ("floor", "users"):
            raise ConfigError(source, section, "unknown section (known: floor, users)")
        if not isinstance(body, dict):
            raise ConfigError(source, section, "must be a [section] table")
    for key, value in data.get("floor", {}).items():
        want = _FLOOR_KEYS.get(key)
        if want is None:
            raise ConfigError(
                source, f"floor.{key}", f"unknown key (known in [floor]: {', '.join(_FLOOR_KEYS)})"
            )
        values[key] = _check(key, value, want, source)
    users: dict[str, str] = {}
    for name, encoded in data.get("users", {}).items():
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
    settings = FloorSettings(**values, users=users, source=source)
    parse_broker(settings.broker, source)
    if settings.tls_ca and not settings.endpoint().tls:
        raise ConfigError(
            source, "floor.tls_ca", "is for an mqtts:// broker; floor.broker is mqtt://"
        )
    parse_http(settings.http, source)
    if not _TOPIC.fullmatch(settings.topic_prefix):
        raise ConfigError(
            source,
            "floor.topic_prefix",
            f"must be topic levels of letters, digits, _ . - (got {settings.topic_prefix!r})",
        )
    for key in ("client_id", "database"):
        if not getattr(settings, key).strip():
            raise ConfigError(source, f"floor.{key}", "must not be empty")
    return settings


def config_path(given: str | None) -> str | None:
    """``--config``, else ``$FIREBET_FLOOR_CONFIG``, else /etc/firebet/floor.toml, else none."""
    if given:
        return given
    env = os.environ.get("FIREBET_FLOOR_CONFIG")
    if env:
        return env
    return str(SYSTEM_CONFIG) if SYSTEM_CONFIG.is_file() else None


def load_settings(path: str | Path | None) -> FloorSettings:
    """The floor's validated configuration (the defaults without a file)."""
    if path is None:
        return FloorSettings()
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read the file: {exc.strerror or exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, "", f"not valid TOML: {exc}") from exc
    return settings_from_dict(data, source)
