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
health_after_s = 30.0              # /healthz: a table behind, or a message unacked, this long

[approved.standard]                # rules a table is approved for (a preset of the floor's)
tables = ["CR-07", "CR-08"]        # the tables it is for; "*": every table not named elsewhere
pays = { 4 = 24, 5 = 249, 6 = 999 } # any key left out is the rules' default (FireBetRules)
positions = 16
max_wager = 5

[users]                            # surveillance logins: name = "scrypt$..." hash
alice = "scrypt$16384$8$1$..."     # make one with: firebet floor passwd alice
```

Unknown sections or keys, wrong types and bad values are a :class:`ConfigError`
naming the file, the key and the reason (exit 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.core.config import Broker, FireBetRules, broker_endpoint, broker_problem
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
from controller.floor.audit import ApprovedRules
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
    health_after_s: float = 30.0
    users: dict[str, str] = field(default_factory=dict)
    approved: dict[str, ApprovedRules] = field(default_factory=dict)  # table id or "*"
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
        Key("floor", "health_after_s", "float", "/healthz: behind or unacked this long", positive),
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


RULE_KEYS = tuple(FireBetRules().to_dict())


def approved_from_dict(data: Any, source: str) -> dict[str, ApprovedRules]:
    """The ``[approved.NAME]`` presets as table id (or ``*``) -> the rules approved for it;
    a :class:`ConfigError` naming the key that is wrong."""
    if not isinstance(data, dict):
        raise ConfigError(source, "approved", "must be a table of [approved.NAME] presets")
    out: dict[str, ApprovedRules] = {}
    for name, preset in data.items():
        where = f"approved.{name}"
        if not USER_NAME.fullmatch(name):
            raise ConfigError(source, where, "a preset name is letters, digits, _ . - (1 to 64)")
        if not isinstance(preset, dict):
            raise ConfigError(source, where, "must be a table: tables = [...] and the rules")
        unknown = sorted(set(preset) - {"tables", *RULE_KEYS})
        if unknown:
            raise ConfigError(
                source, f"{where}.{unknown[0]}",
                f"unknown key (known: tables, {', '.join(RULE_KEYS)})",
            )  # fmt: skip
        tables = preset.get("tables")
        if (
            not isinstance(tables, list)
            or not tables
            or not all(isinstance(t, str) and t and len(t) <= 64 for t in tables)
        ):
            raise ConfigError(
                source, f"{where}.tables", 'must list the table ids (or "*"), e.g. ["CR-07"]'
            )
        base = FireBetRules().to_dict()
        for key in RULE_KEYS:
            if key not in preset:
                continue
            value = preset[key]
            if key == "pays" and isinstance(value, dict):
                value = {str(k): v for k, v in value.items()}
            try:
                FireBetRules.from_dict({**base, key: value})
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(source, f"{where}.{key}", str(exc)) from None
            base[key] = value
        rules = FireBetRules.from_dict(base)
        for table in tables:
            if table in out:
                raise ConfigError(
                    source, f"{where}.tables",
                    f"table {table!r} is approved in [approved.{out[table].name}] already",
                )  # fmt: skip
            out[table] = ApprovedRules(name, rules)
    return out


def settings_from_dict(data: dict[str, Any], source: str) -> FloorSettings:
    """Validate a parsed ``floor.toml``."""
    checked = check_sections(data, {"floor": FLOOR_KEYS}, source, free=("users", "approved"))
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
    approved = approved_from_dict(checked.get("approved", {}), source)
    settings = FloorSettings(
        **checked.get("floor", {}), users=users, approved=approved, source=source
    )
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
