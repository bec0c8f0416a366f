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
time_zone = ""                     # the console's clock (IANA name); "" = the machine's
health_after_s = 30.0              # /healthz: a table behind, or a message unacked, this long

[tables.CR-07]                     # where a table stands on the floor map (optional)
position = [1, 3]                  # [row, column], from 1; tables without one fill in after

[web]                              # the console's HTTP limits (docs/floor.md, Security)
max_body_bytes = 65536             # a larger request body is refused (413) unread
max_header_bytes = 16384           # request line and headers together (431 beyond)
request_timeout_s = 10.0           # the headers, then the body, must come within this
idle_timeout_s = 5                 # a kept-alive connection with no request is closed
max_connections = 900              # beyond: the oldest connection still sending headers goes
max_streams = 100                  # /events streams of the pit (a logged-in user's always open)
stream_max_events = 200            # a stream that falls this far behind is dropped ...
stream_max_bytes = 2097152         # ... or this many bytes behind; the page reconnects
login_failures_per_client = 20     # failed logins in login_window_s, then 429
login_failures_per_user = 5
login_window_s = 60.0
behind_tls_proxy = false           # true: the cookie is Secure, X-Forwarded-* trusted ...
trusted_proxies = "127.0.0.1"      # ... from these addresses (IPs or networks, comma-separated)
tls_certfile = ""                  # or serve https itself: PEM certificate (chain) ...
tls_keyfile = ""                   # ... and its private key
escalate_after_s = 120.0           # an open 5th point older than this turns red ...
sound_after_s = 300.0              # ... and past this sounds again, once a minute

[store]                            # where the records are kept (docs/floor.md, Two floors)
url = ""                           # "" = the SQLite file [floor] database; or
                                   # "postgresql://USER:PASS@HOST:PORT/DB", shared by 2+ floors
keep_days = 1826                   # records, settled hands and closed alerts older than this
                                   # are archived, then deleted (0: kept for ever)
archive_dir = "archive"            # where (relative to the state directory): .jsonl.gz

[approved.standard]                # rules a table is approved for (a preset of the floor's)
tables = ["CR-07", "CR-08"]        # the tables it is for; "*": every table not named elsewhere
pays = { 4 = 24, 5 = 249, 6 = 999 } # any key left out is the rules' default (FireBetRules)
positions = 16
max_wager = 5

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

import ipaddress
import os
import re
import zoneinfo
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from pathlib import Path
from typing import Any

from controller.core.config import (
    BOOKKEEPING_RULES,
    Broker,
    FireBetRules,
    broker_endpoint,
    broker_problem,
)
from controller.core.config.schema import (
    Key,
    at_least,
    check_sections,
    file_name,
    nonempty,
    positive,
    read_file,
    topic_prefix,
)
from controller.core.errors import ConfigError, FirebetError
from controller.core.table_id import table_id_problem
from controller.floor.audit import ApprovedRules
from controller.floor.figures import DEFAULT_SHIFTS, Shift, parse_shifts, shift_problem
from controller.floor.passwords import hash_problem
from controller.wire.mqtt import read_password

USER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAP_SIZE = 100  # rows and columns of the floor map, at most


@dataclass(frozen=True)
class WebSettings:
    """The console's HTTP limits, its cookie and TLS (``[web]``)."""

    max_body_bytes: int = 65536
    max_header_bytes: int = 16384
    request_timeout_s: float = 10.0
    idle_timeout_s: int = 5
    max_connections: int = 900
    max_streams: int = 100
    stream_max_events: int = 200
    stream_max_bytes: int = 2 * 1024 * 1024
    login_failures_per_client: int = 20
    login_failures_per_user: int = 5
    login_window_s: float = 60.0
    behind_tls_proxy: bool = False
    trusted_proxies: str = "127.0.0.1"
    tls_certfile: str = ""
    tls_keyfile: str = ""
    escalate_after_s: float = 120.0
    sound_after_s: float = 300.0

    @property
    def tls(self) -> bool:
        """Whether the console serves https itself."""
        return bool(self.tls_certfile)

    def proxies(self) -> list[str]:
        """The addresses whose X-Forwarded-For and -Proto are believed."""
        return [p.strip() for p in self.trusted_proxies.split(",") if p.strip()]


@dataclass(frozen=True)
class StoreSettings:
    """Where the floor keeps its records, and for how long (``[store]``)."""

    url: str = ""  # "" = SQLite ([floor] database); postgresql://... = shared by 2+ floors
    keep_days: int = 1826  # five years; 0 = kept for ever
    archive_dir: str = "archive"  # relative to the state directory

    def shown(self) -> str:
        """The url without its password (for the log and the console)."""
        return hide_password(self.url)


def hide_password(url: str) -> str:
    """``url`` with the password between ``:`` and ``@`` of its user part hidden."""
    scheme, sep, rest = url.partition("://")
    user, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in user:
        return url
    return f"{scheme}://{user.split(':', 1)[0]}:***@{host}"


def store_url_problem(value: str) -> str | None:
    """Why ``value`` is not ``""`` or a ``postgresql://`` URL (None: it is)."""
    if not value or value.startswith(("postgresql://", "postgres://")):
        return None
    return 'must be "" (the SQLite file) or postgresql://USER@HOST:PORT/DATABASE'


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
    time_zone: str = ""
    users: dict[str, str] = field(default_factory=dict)
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)  # table -> (row, col)
    web: WebSettings = field(default_factory=WebSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    health_after_s: float = 30.0
    approved: dict[str, ApprovedRules] = field(default_factory=dict)  # table id or "*"
    shifts: tuple[Shift, ...] = DEFAULT_SHIFTS
    source: str = "defaults"

    def zone(self) -> tzinfo:
        """The floor's time zone: ``time_zone`` (IANA), else the machine's
        (:func:`local_zone`): the console's clock and the shifts' days."""
        return zoneinfo.ZoneInfo(self.time_zone) if self.time_zone else local_zone()

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


def time_zone_problem(value: str) -> str | None:
    """Why ``value`` is not an IANA time zone name (None: it is, or empty: the machine's)."""
    if not value:
        return None
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return f"is not a time zone name like Europe/Paris or America/New_York (got {value!r})"
    return None


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
        Key(
            "floor",
            "time_zone",
            "str",
            "the console's clock ('' = the machine's)",
            time_zone_problem,
        ),
        Key("floor", "health_after_s", "float", "/healthz: behind or unacked this long", positive),
    )
}
"""The ``[floor]`` keys, checked by the table configuration's own machinery."""


def proxies_problem(value: str) -> str | None:
    """Why ``value`` is not a comma-separated list of IP addresses or networks."""
    entries = [p.strip() for p in value.split(",")]
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return f"must be IP addresses or networks joined by ',' ({entry!r} is not one)"
    return None


WEB_KEYS: dict[str, Key] = {
    key.name: key
    for key in (
        Key("web", "max_body_bytes", "int", "largest request body (413 beyond)", at_least(1024)),
        Key("web", "max_header_bytes", "int", "largest request head (431 beyond)", at_least(1024)),
        Key("web", "request_timeout_s", "float", "headers, then body, within this", positive),
        Key("web", "idle_timeout_s", "int", "a kept-alive idle connection is closed", at_least(1)),
        Key("web", "max_connections", "int", "open connections at most", at_least(16)),
        Key("web", "max_streams", "int", "the pit's /events streams at most", at_least(1)),
        Key("web", "stream_max_events", "int", "a stream this far behind is dropped", at_least(1)),
        Key("web", "stream_max_bytes", "int", "or this many bytes behind", at_least(65536)),
        Key("web", "login_failures_per_client", "int", "failed logins a client", at_least(1)),
        Key("web", "login_failures_per_user", "int", "failed logins a user", at_least(1)),
        Key("web", "login_window_s", "float", "over this many seconds", positive),
        Key("web", "behind_tls_proxy", "bool", "Secure cookie; X-Forwarded-* from the proxy"),
        Key("web", "trusted_proxies", "str", "the proxy's addresses", proxies_problem),
        Key("web", "tls_certfile", "str", "serve https: PEM certificate"),
        Key("web", "tls_keyfile", "str", "serve https: its private key"),
        Key("web", "escalate_after_s", "float", "an open 5th point turns red after", positive),
        Key("web", "sound_after_s", "float", "and sounds again every minute after", positive),
    )
}
"""The ``[web]`` keys: the console's HTTP limits, cookie and TLS."""

STORE_KEYS: dict[str, Key] = {
    key.name: key
    for key in (
        Key("store", "url", "str", '"" (SQLite) or postgresql://...', store_url_problem),
        Key("store", "keep_days", "int", "archived, then deleted, past this age", at_least(0)),
        Key("store", "archive_dir", "str", "relative to the state directory", nonempty),
    )
}
"""The ``[store]`` keys: which store, and how long it keeps what."""


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


def _positions(tables: dict[str, Any], source: str) -> dict[str, tuple[int, int]]:
    """``[tables.<id>] position = [row, col]``: where each table stands on the floor map."""
    out: dict[str, tuple[int, int]] = {}
    taken: dict[tuple[int, int], str] = {}
    for name, body in tables.items():
        key = f"tables.{name}"
        problem = table_id_problem(name)
        if problem:
            raise ConfigError(source, key, problem)
        if not isinstance(body, dict):
            raise ConfigError(source, key, "must be a [tables.<id>] table")
        for k in body:
            if k != "position":
                raise ConfigError(source, f"{key}.{k}", "unknown key (known: position)")
        if "position" not in body:
            continue
        where = body["position"]
        if (
            not isinstance(where, list)
            or len(where) != 2
            or not all(type(n) is int and 1 <= n <= MAP_SIZE for n in where)
        ):
            raise ConfigError(
                source, f"{key}.position",
                f"must be [row, column], each a whole number 1..{MAP_SIZE} (got {where!r})",
            )  # fmt: skip
        spot = (where[0], where[1])
        if spot in taken:
            raise ConfigError(
                source, f"{key}.position", f"{list(spot)} is already where {taken[spot]} stands"
            )
        taken[spot] = name
        out[name] = spot
    return out


RULE_KEYS = tuple(k for k in FireBetRules().to_dict() if k not in BOOKKEEPING_RULES)


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
            or not all(isinstance(t, str) for t in tables)
        ):
            raise ConfigError(
                source, f"{where}.tables", 'must list the table ids (or "*"), e.g. ["CR-07"]'
            )
        for table in tables:
            problem = None if table == "*" else table_id_problem(table)
            if problem:
                raise ConfigError(source, f"{where}.tables", problem)
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
    checked = check_sections(
        data,
        {"floor": FLOOR_KEYS, "web": WEB_KEYS, "store": STORE_KEYS},
        source,
        free=("tables", "users", "approved", "shifts"),
    )
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
    positions = _positions(checked.get("tables", {}), source)
    web = WebSettings(**checked.get("web", {}))
    if bool(web.tls_certfile) != bool(web.tls_keyfile):
        missing = "web.tls_keyfile" if web.tls_certfile else "web.tls_certfile"
        raise ConfigError(source, missing, "tls_certfile and tls_keyfile go together")
    approved = approved_from_dict(checked.get("approved", {}), source)
    settings = FloorSettings(
        **checked.get("floor", {}),
        users=users,
        positions=positions,
        web=web,
        store=StoreSettings(**checked.get("store", {})),
        approved=approved,
        shifts=parsed,
        source=source,
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
