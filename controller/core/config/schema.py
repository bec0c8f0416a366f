"""The configuration's keys, each declared once with its type and value check, and the
strict reading of a TOML file against them.

A table's keys are :data:`SCHEMA`; the floor service declares its own with the same
:class:`Key` (``controller/floor/settings.py``). Any unknown section or key, wrong type or
bad value raises :class:`ConfigError` naming the file, the key and the reason.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.core.errors import ConfigError
from controller.core.numbers import WHOLE_NUMBER, whole_number

BCM_PINS = range(0, 28)
GAMES = ("craps", "mini-craps")
MAX_POSITIONS = {"craps": 16, "mini-craps": 9}
BETTING_CLOSES = ("first_roll", "first_point")

Check = Callable[[Any], str | None]
"""A value check: None when the value is good, else what is wrong with it."""

Values = dict[str, dict[str, tuple[Any, str]]]
"""Checked values by section and name, each with the file (or preset) that set it."""


@dataclass(frozen=True)
class Key:
    """One configuration key: its type, description and value check."""

    section: str
    name: str
    kind: str  # "str", "int", "float", "bool", "int_table"
    description: str
    check: Check | None = None

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"


def positive(v: Any) -> str | None:
    return None if v > 0 else "must be greater than 0"


def at_least(n: int) -> Check:
    return lambda v: None if v >= n else f"must be at least {n}"


def one_of(*choices: str) -> Check:
    return lambda v: None if v in choices else "must be one of " + ", ".join(map(repr, choices))


def bcm_pin(v: Any) -> str | None:
    return None if v in BCM_PINS else "is not a BCM GPIO pin (0..27)"


def nonempty(v: Any) -> str | None:
    return None if v.strip() else "must not be empty"


TOPIC_LEVEL = re.compile(r"[A-Za-z0-9_.-]+")


def topic_prefix(v: Any) -> str | None:
    levels = v.split("/")
    if all(TOPIC_LEVEL.fullmatch(level) for level in levels):
        return None
    return "must be topic levels of letters, digits, '-', '_' or '.' joined by '/'"


def between(lo: float, hi: float, unit: str = "") -> Check:
    return lambda v: None if lo <= v <= hi else f"must be between {lo:g} and {hi:g}{unit}"


MIN_BAUD, MAX_BAUD = 50, 4_000_000
"""Serial speeds a UART or USB adapter can run at; pyserial itself takes any number."""
READER_PROTOCOLS = (1, 2, 3)


def file_name(v: Any) -> str | None:
    """A path that names a file (``journal.db``, ``db/journal.db``), not a folder."""
    if not v.strip():
        return "must not be empty"
    last = v.replace("\\", "/").rstrip().split("/")[-1]
    if last in ("", ".", ".."):
        return "must name a file in the state directory, not a folder"
    return None


SCHEMA: tuple[Key, ...] = (
    Key("table", "id", "str", "table name shown on the display and in the journal", nonempty),
    Key("table", "game", "str", "craps or mini-craps", one_of(*GAMES)),
    Key("table", "positions", "int", "numbered fire-bet positions on the layout", at_least(1)),
    Key("firebet", "preset", "str", "jurisdiction preset applied under the file"),
    Key("firebet", "pays", "int_table", "different points made -> pays N to 1"),
    Key("firebet", "min_wager", "int", "smallest wager per position (dollars)", positive),
    Key("firebet", "max_wager", "int", "largest wager per position (dollars)", positive),
    Key("firebet", "wager_increment", "int", "wagers are multiples of this (dollars)", positive),
    Key("firebet", "pay_six_immediately", "bool", "pay the 6-point tier at the 6th point"),
    Key("firebet", "surrender_carries_points", "bool", "a surrendered hand's points carry over"),
    Key(
        "firebet",
        "surveillance_at",
        "int",
        "different points that raise the surveillance alert",
        lambda v: None if 1 <= v <= 6 else "must be between 1 and 6",
    ),
    Key(
        "firebet",
        "betting_closes",
        "str",
        "when fire betting closes",
        one_of(*BETTING_CLOSES),
    ),
    Key("firebet", "history_hands", "int", "game recall depth in hands", at_least(1)),
    Key("reader", "port", "str", "serial device path or pyserial URL", nonempty),
    Key("reader", "baud", "int", "serial speed", between(MIN_BAUD, MAX_BAUD, " baud")),
    Key(
        "reader",
        "heartbeat_timeout_s",
        "float",
        "silence that means a reader fault",
        between(0.5, 3600, " seconds"),
    ),
    Key(
        "reader",
        "protocol",
        "int",
        "reader protocol: 3 (CRC-16 and a session), 2 (CRC-16) or 1 (XOR, older readers)",
        lambda v: None if v in READER_PROTOCOLS else "must be 1, 2 or 3",
    ),
    Key("lights", "markers", "int_table", "point number -> BCM pin of its marker"),
    Key("lights", "status", "int", "BCM pin of the status LED", bcm_pin),
    Key("lights", "surveillance", "int", "BCM pin of the surveillance relay", bcm_pin),
    Key("lights", "active_high", "bool", "a high pin lights the lamp"),
    Key("buttons", "void", "int", "BCM pin of the void button", bcm_pin),
    Key("buttons", "surrender", "int", "BCM pin of the surrender button", bcm_pin),
    Key("buttons", "ack", "int", "BCM pin of the acknowledge button", bcm_pin),
    Key("buttons", "apply_held", "int", "BCM pin: apply the oldest held reader roll", bcm_pin),
    Key("buttons", "discard_held", "int", "BCM pin: discard the oldest held reader roll", bcm_pin),
    Key(
        "buttons",
        "hold_s",
        "float",
        "seconds a button must be held",
        between(0, 30, " seconds"),
    ),
    Key("journal", "path", "str", "journal file, relative to the state directory", file_name),
    Key("journal", "snapshot_every", "int", "records between snapshots", at_least(1)),
    Key(
        "journal",
        "key_file",
        "str",
        "the chain's secret key (HMAC-SHA256), relative to the state directory; empty: "
        "/etc/firebet/journal.key for /var/lib/firebet, else journal.key in the state directory",
    ),
    Key(
        "journal",
        "watch_sweep_s",
        "float",
        "seconds within which the running table re-checks every record of a journal of "
        "1,000 records or fewer (as the square root of the length beyond: 1,000,000 in 47 min)",
        between(1, 86_400, " seconds"),
    ),
    Key("control", "socket", "str", "control socket path", nonempty),
    Key("control", "dealer_group", "str", "group allowed dealer actions", nonempty),
    Key("control", "technician_group", "str", "group allowed technician actions", nonempty),
    Key("floor", "broker", "str", "MQTT broker mqtt://host:port or mqtts://; empty: no link"),
    Key("floor", "username", "str", "this table's user name on the broker"),
    Key("floor", "password_file", "str", "file holding the broker password"),
    Key("floor", "tls_ca", "str", "CA certificate of the broker (mqtts:// only)"),
    Key("floor", "topic_prefix", "str", "first topic level of every floor topic", topic_prefix),
    Key(
        "metrics",
        "textfile_dir",
        "str",
        "node_exporter's textfile collector directory: firebet-<table id>.prom is written "
        "there every 15 s (mode, last roll age, faults, meters); empty: none",
    ),
)

KEYS: dict[str, dict[str, Key]] = {}
for _k in SCHEMA:
    KEYS.setdefault(_k.section, {})[_k.name] = _k


def typecheck(key: Key, value: Any, source: str) -> Any:
    """``value`` as ``key`` takes it (an int_table's keys made ints, a float a float);
    a ConfigError naming ``source`` and the key when it is the wrong type or fails the check."""

    def bad(expected: str) -> ConfigError:
        return ConfigError(source, key.dotted, f"must be {expected}, not {value!r}")

    if key.kind == "str":
        if not isinstance(value, str):
            raise bad("a string")
    elif key.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("a whole number")
    elif key.kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad("a number")
        value = float(value)
        if not math.isfinite(value):
            raise bad("a finite number")
    elif key.kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
    elif key.kind == "int_table":
        if not isinstance(value, dict):
            raise bad("a table such as { 4 = 24 }")
        table: dict[int, int] = {}
        for k, v in value.items():
            ik = whole_number(k)
            if ik is None:
                raise ConfigError(source, f"{key.dotted}.{k}", f"key must be {WHOLE_NUMBER}")
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(source, f"{key.dotted}.{k}", f"must be a whole number, not {v!r}")
            table[ik] = v
        value = table
    if key.check is not None:
        problem = key.check(value)
        if problem:
            raise ConfigError(source, key.dotted, f"{problem} (got {value!r})")
    return value


def check_sections(
    data: Mapping[str, Any],
    keys: Mapping[str, Mapping[str, Key]],
    source: str,
    free: Collection[str] = (),
) -> dict[str, dict[str, Any]]:
    """Every section and key of a parsed file checked against ``keys``, by section.

    A ``free`` section may hold any names (its caller checks them); its body is returned
    as it is.
    """
    known = [*keys, *free]
    checked: dict[str, dict[str, Any]] = {}
    for section, body in data.items():
        if section not in known:
            raise ConfigError(source, section, f"unknown section (known: {', '.join(known)})")
        if not isinstance(body, dict):
            raise ConfigError(source, section, "must be a [section] table")
        if section in free:
            checked[section] = dict(body)
            continue
        checked[section] = {}
        for name, value in body.items():
            key = keys[section].get(name)
            if key is None:
                raise ConfigError(
                    source,
                    f"{section}.{name}",
                    f"unknown key (known in [{section}]: {', '.join(keys[section])})",
                )
            checked[section][name] = typecheck(key, value, source)
    return checked


def merge(into: Values, data: Mapping[str, Any], source: str) -> None:
    """Check ``data`` against the table's keys and lay its values over ``into``."""
    for section, body in check_sections(data, KEYS, source).items():
        for name, value in body.items():
            into.setdefault(section, {})[name] = (value, source)


def read_toml(text: str, source: str) -> dict[str, Any]:
    """Parse TOML text; a ConfigError naming ``source`` when it is not valid TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, "", f"not valid TOML: {exc}") from exc


def read_file(path: str | Path) -> dict[str, Any]:
    """Read and parse a TOML file; a ConfigError naming it when it cannot be read, is not
    UTF-8 text (with the line and byte) or is not valid TOML."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(source, "", f"cannot read the file: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            source,
            f"line {line}",
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02X} at offset "
            f"{exc.start}); save it as UTF-8",
        ) from None
    return read_toml(text, source)
