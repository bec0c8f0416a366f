"""Configuration: every key declared once, parsed strictly into typed objects.

A table's file holds only what it changes. Values are layered
``config/table.toml`` (the defaults) <- the preset it names <- the file itself.
Any unknown key, wrong type or inconsistent value raises :class:`ConfigError`
naming the file, the key and the reason.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from controller.core.errors import ConfigError

POINT_NUMBERS: tuple[int, ...] = (4, 5, 6, 8, 9, 10)
BCM_PINS = range(0, 28)
GAMES = ("craps", "mini-craps")
MAX_POSITIONS = {"craps": 16, "mini-craps": 9}
BETTING_CLOSES = ("first_roll", "first_point")


@dataclass(frozen=True)
class Key:
    """One configuration key: its type, description and value check."""

    section: str
    name: str
    kind: str  # "str", "int", "float", "bool", "int_table"
    description: str
    check: Callable[[Any], str | None] | None = None

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"


def _positive(v: Any) -> str | None:
    return None if v > 0 else "must be greater than 0"


def _at_least(n: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= n else f"must be at least {n}"


def _one_of(*choices: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in choices else "must be one of " + ", ".join(map(repr, choices))


def _pin(v: Any) -> str | None:
    return None if v in BCM_PINS else "is not a BCM GPIO pin (0..27)"


def _nonempty(v: Any) -> str | None:
    return None if v.strip() else "must not be empty"


TOPIC_LEVEL = re.compile(r"[A-Za-z0-9_.-]+")


def _topic_prefix(v: Any) -> str | None:
    levels = v.split("/")
    if all(TOPIC_LEVEL.fullmatch(level) for level in levels):
        return None
    return "must be topic levels of letters, digits, '-', '_' or '.' joined by '/'"


SCHEMA: tuple[Key, ...] = (
    Key("table", "id", "str", "table name shown on the display and in the journal", _nonempty),
    Key("table", "game", "str", "craps or mini-craps", _one_of(*GAMES)),
    Key("table", "positions", "int", "numbered fire-bet positions on the layout", _at_least(1)),
    Key("firebet", "preset", "str", "jurisdiction preset applied under the file"),
    Key("firebet", "pays", "int_table", "different points made -> pays N to 1"),
    Key("firebet", "min_wager", "int", "smallest wager per position (dollars)", _positive),
    Key("firebet", "max_wager", "int", "largest wager per position (dollars)", _positive),
    Key("firebet", "wager_increment", "int", "wagers are multiples of this (dollars)", _positive),
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
        _one_of(*BETTING_CLOSES),
    ),
    Key("firebet", "history_hands", "int", "game recall depth in hands", _at_least(1)),
    Key("reader", "port", "str", "serial device path or pyserial URL", _nonempty),
    Key("reader", "baud", "int", "serial speed", _positive),
    Key("reader", "heartbeat_timeout_s", "float", "silence that means a reader fault", _positive),
    Key("lights", "markers", "int_table", "point number -> BCM pin of its marker"),
    Key("lights", "status", "int", "BCM pin of the status LED", _pin),
    Key("lights", "surveillance", "int", "BCM pin of the surveillance relay", _pin),
    Key("lights", "active_high", "bool", "a high pin lights the lamp"),
    Key("buttons", "void", "int", "BCM pin of the void button", _pin),
    Key("buttons", "surrender", "int", "BCM pin of the surrender button", _pin),
    Key("buttons", "ack", "int", "BCM pin of the acknowledge button", _pin),
    Key(
        "buttons",
        "hold_s",
        "float",
        "seconds a button must be held",
        lambda v: None if v >= 0 else "must not be negative",
    ),
    Key("journal", "path", "str", "journal file, relative to the state directory", _nonempty),
    Key("journal", "snapshot_every", "int", "records between snapshots", _at_least(1)),
    Key(
        "journal",
        "key_file",
        "str",
        "the chain's secret key (HMAC-SHA256); relative to the state directory",
        _nonempty,
    ),
    Key("control", "socket", "str", "control socket path", _nonempty),
    Key("control", "dealer_group", "str", "group allowed dealer actions", _nonempty),
    Key("control", "technician_group", "str", "group allowed technician actions", _nonempty),
    Key("floor", "broker", "str", "MQTT broker mqtt://host:port or mqtts://; empty: no link"),
    Key("floor", "username", "str", "this table's user name on the broker"),
    Key("floor", "password_file", "str", "file holding the broker password"),
    Key("floor", "tls_ca", "str", "CA certificate of the broker (mqtts:// only)"),
    Key("floor", "topic_prefix", "str", "first topic level of every floor topic", _topic_prefix),
)

KEYS: dict[str, dict[str, Key]] = {}
for _k in SCHEMA:
    KEYS.setdefault(_k.section, {})[_k.name] = _k


@dataclass(frozen=True)
class FireBetRules:
    """Everything the pure rules engine needs to know about the table."""

    positions: int = 16
    pays: Mapping[int, int] | None = None
    min_wager: int = 1
    max_wager: int = 5
    wager_increment: int = 1
    pay_six_immediately: bool = False
    surrender_carries_points: bool = True
    surveillance_at: int = 5
    betting_closes: str = "first_roll"

    def pay_table(self) -> dict[int, int]:
        """The pay table, different points -> odds to 1 (NJ when none was given)."""
        return dict(self.pays) if self.pays is not None else {4: 24, 5: 249, 6: 999}

    def odds_for(self, unique_points: int) -> tuple[int, int]:
        """The (tier, odds to 1) that ``unique_points`` different points earn; (0, 0) loses."""
        best = (0, 0)
        for tier, odds in sorted(self.pay_table().items()):
            if unique_points >= tier:
                best = (tier, odds)
        return best


@dataclass(frozen=True)
class TableConfig:
    id: str
    game: str
    positions: int


@dataclass(frozen=True)
class ReaderConfig:
    port: str
    baud: int
    heartbeat_timeout_s: float


@dataclass(frozen=True)
class LightsConfig:
    markers: Mapping[int, int]
    status: int
    surveillance: int
    active_high: bool


@dataclass(frozen=True)
class ButtonsConfig:
    void: int
    surrender: int
    ack: int
    hold_s: float


@dataclass(frozen=True)
class JournalConfig:
    path: str
    snapshot_every: int
    key_file: str = "/etc/firebet/journal.key"


@dataclass(frozen=True)
class ControlConfig:
    socket: str
    dealer_group: str
    technician_group: str


@dataclass(frozen=True)
class FloorConfig:
    """The floor link (MQTT): where the broker is, who the table is on it, its topics."""

    broker: str = ""
    username: str = ""
    password_file: str = ""
    tls_ca: str = ""
    topic_prefix: str = "firebet"

    @property
    def enabled(self) -> bool:
        return bool(self.broker)

    def endpoint(self) -> tuple[bool, str, int]:
        """(tls, host, port) of the broker; the port defaults to 1883, or 8883 for mqtts."""
        parts = urlsplit(self.broker)
        tls = parts.scheme == "mqtts"
        return tls, parts.hostname or "", parts.port or (8883 if tls else 1883)

    def topic(self, table: str, leaf: str) -> str:
        """``<topic_prefix>/<table>/<leaf>``."""
        return f"{self.topic_prefix}/{table}/{leaf}"


def broker_problem(url: str) -> str | None:
    """Why ``url`` is not a broker address firebet can use (None: it is)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a broker address: {exc}"
    if parts.scheme not in ("mqtt", "mqtts"):
        return "must start with mqtt:// or mqtts://"
    if not parts.hostname:
        return "names no host (mqtt://host:1883)"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user or password: use floor.username and floor.password_file"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return "must be only mqtt[s]://host[:port]"
    if port == 0:
        return "port must be 1 to 65535"
    return None


@dataclass(frozen=True)
class Config:
    """The whole, validated configuration of one table."""

    table: TableConfig
    firebet: FireBetRules
    preset: str
    history_hands: int
    reader: ReaderConfig
    lights: LightsConfig
    buttons: ButtonsConfig
    journal: JournalConfig
    control: ControlConfig
    floor: FloorConfig = FloorConfig()
    source: str = "defaults"

    def pins(self) -> dict[str, int]:
        """Every configured BCM pin by the dotted key that names it."""
        pins = {f"lights.markers.{p}": pin for p, pin in self.lights.markers.items()}
        pins["lights.status"] = self.lights.status
        pins["lights.surveillance"] = self.lights.surveillance
        pins["buttons.void"] = self.buttons.void
        pins["buttons.surrender"] = self.buttons.surrender
        pins["buttons.ack"] = self.buttons.ack
        return pins


def _read_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, "", f"not valid TOML: {exc}") from exc


def _defaults_text() -> str:
    return resources.files("config").joinpath("table.toml").read_text(encoding="utf-8")


def preset_names() -> list[str]:
    """The names of the bundled jurisdiction presets."""
    folder = resources.files("config").joinpath("presets")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def _preset_text(name: str, source: str) -> str:
    if name not in preset_names():
        raise ConfigError(
            source,
            "firebet.preset",
            f"unknown preset {name!r} (known: {', '.join(preset_names())})",
        )
    return resources.files("config").joinpath("presets", f"{name}.toml").read_text(encoding="utf-8")


def _typecheck(key: Key, value: Any, source: str) -> Any:
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
    elif key.kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
    elif key.kind == "int_table":
        if not isinstance(value, dict):
            raise bad("a table such as { 4 = 24 }")
        table: dict[int, int] = {}
        for k, v in value.items():
            try:
                ik = int(k)
            except ValueError:
                raise ConfigError(
                    source, f"{key.dotted}.{k}", "key must be a whole number"
                ) from None
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(source, f"{key.dotted}.{k}", f"must be a whole number, not {v!r}")
            table[ik] = v
        value = table
    if key.check is not None:
        problem = key.check(value)
        if problem:
            raise ConfigError(source, key.dotted, f"{problem} (got {value!r})")
    return value


def _merge(
    into: dict[str, dict[str, tuple[Any, str]]], data: Mapping[str, Any], source: str
) -> None:
    for section, body in data.items():
        if section not in KEYS:
            raise ConfigError(source, section, f"unknown section (known: {', '.join(KEYS)})")
        if not isinstance(body, dict):
            raise ConfigError(source, section, "must be a [section] table")
        for name, value in body.items():
            key = KEYS[section].get(name)
            if key is None:
                raise ConfigError(
                    source,
                    f"{section}.{name}",
                    f"unknown key (known in [{section}]: {', '.join(KEYS[section])})",
                )
            into.setdefault(section, {})[name] = (_typecheck(key, value, source), source)


def load_config(path: str | Path | None = None) -> Config:
    """Load and validate the configuration: defaults, then preset, then ``path``."""
    defaults = _read_toml(_defaults_text(), "config/table.toml")
    user: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(source, "", f"cannot read the file: {exc.strerror or exc}") from exc
        user = _read_toml(text, source)
    values: dict[str, dict[str, tuple[Any, str]]] = {}
    _merge(values, defaults, "config/table.toml")
    # validate the user's file before applying its preset, so a typo is reported as its own
    _merge({}, user, source)
    preset = user.get("firebet", {}).get("preset", values["firebet"]["preset"][0])
    preset_source = f"preset {preset!r}"
    _merge(values, _read_toml(_preset_text(preset, source), preset_source), preset_source)
    _merge(values, user, source)
    missing = [k.dotted for k in SCHEMA if k.name not in values.get(k.section, {})]
    if missing:
        raise ConfigError("config/table.toml", missing[0], "has no default")
    return _build(values, source)


def _set_in(values: dict[str, dict[str, tuple[Any, str]]], dotted: str) -> str:
    """The file that set a dotted key (``lights.markers.4`` counts as ``lights.markers``)."""
    section, name = dotted.split(".")[:2]
    return values[section][name][1]


def _floor(values: dict[str, dict[str, tuple[Any, str]]]) -> FloorConfig:
    """The ``[floor]`` section, checked as a whole (the broker, TLS, credentials, topics)."""
    floor = FloorConfig(
        broker=values["floor"]["broker"][0].strip(),
        username=values["floor"]["username"][0],
        password_file=values["floor"]["password_file"][0],
        tls_ca=values["floor"]["tls_ca"][0],
        topic_prefix=values["floor"]["topic_prefix"][0],
    )

    def fail(name: str, reason: str) -> ConfigError:
        return ConfigError(_set_in(values, f"floor.{name}"), f"floor.{name}", reason)

    if not floor.broker:
        return floor
    problem = broker_problem(floor.broker)
    if problem:
        raise fail("broker", f"{problem} (got {floor.broker!r})")
    if floor.tls_ca and not floor.broker.startswith("mqtts://"):
        raise fail("tls_ca", "a CA certificate is for an mqtts:// broker only")
    if floor.password_file and not floor.username:
        raise fail("password_file", "a password needs floor.username too")
    if floor.username and ("+" in floor.username or "#" in floor.username):
        raise fail("username", "must not contain '+' or '#' (MQTT wildcards)")
    table = values["table"]["id"][0]
    if not TOPIC_LEVEL.fullmatch(table):
        raise ConfigError(
            _set_in(values, "table.id"),
            "table.id",
            f"{table!r} is a topic level on the floor broker: use letters, digits, '-', '_', '.'",
        )
    return floor


def _build(values: dict[str, dict[str, tuple[Any, str]]], source: str) -> Config:
    def v(section: str, name: str) -> Any:
        return values[section][name][0]

    def where(section: str, name: str) -> str:
        return values[section][name][1]

    game = v("table", "game")
    positions = v("table", "positions")
    if positions > MAX_POSITIONS[game]:
        raise ConfigError(
            where("table", "positions"),
            "table.positions",
            f"{game} has at most {MAX_POSITIONS[game]} positions (got {positions})",
        )
    pays: dict[int, int] = v("firebet", "pays")
    psrc = where("firebet", "pays")
    if not pays:
        raise ConfigError(psrc, "firebet.pays", "the pay table is empty")
    previous = 0
    for tier in sorted(pays):
        if not 1 <= tier <= 6:
            raise ConfigError(
                psrc, f"firebet.pays.{tier}", "a tier must be 1 to 6 different points"
            )
        if pays[tier] <= 0:
            raise ConfigError(
                psrc, f"firebet.pays.{tier}", f"odds must be positive (got {pays[tier]})"
            )
        if pays[tier] <= previous:
            raise ConfigError(
                psrc,
                f"firebet.pays.{tier}",
                f"the pay table is not increasing: {tier} points pay {pays[tier]} to 1, "
                f"not more than {previous} to 1 for fewer points",
            )
        previous = pays[tier]
    lo, hi, step = (
        v("firebet", "min_wager"),
        v("firebet", "max_wager"),
        v("firebet", "wager_increment"),
    )
    if lo > hi:
        raise ConfigError(
            where("firebet", "min_wager"),
            "firebet.min_wager",
            f"the minimum ${lo} is over the maximum ${hi}",
        )
    if lo % step or hi % step:
        raise ConfigError(
            where("firebet", "wager_increment"),
            "firebet.wager_increment",
            f"${step} increments do not fit the ${lo}-${hi} limits",
        )
    if v("firebet", "pay_six_immediately") and 6 not in pays:
        raise ConfigError(
            where("firebet", "pay_six_immediately"),
            "firebet.pay_six_immediately",
            "needs a 6-point tier in firebet.pays",
        )
    markers: dict[int, int] = v("lights", "markers")
    msrc = where("lights", "markers")
    if sorted(markers) != list(POINT_NUMBERS):
        raise ConfigError(
            msrc, "lights.markers", "needs exactly one pin for each point 4, 5, 6, 8, 9, 10"
        )
    for point, pin in markers.items():
        problem = _pin(pin)
        if problem:
            raise ConfigError(msrc, f"lights.markers.{point}", f"{pin} {problem}")
    rules = FireBetRules(
        positions=positions,
        pays=dict(sorted(pays.items())),
        min_wager=lo,
        max_wager=hi,
        wager_increment=step,
        pay_six_immediately=v("firebet", "pay_six_immediately"),
        surrender_carries_points=v("firebet", "surrender_carries_points"),
        surveillance_at=v("firebet", "surveillance_at"),
        betting_closes=v("firebet", "betting_closes"),
    )
    config = Config(
        table=TableConfig(v("table", "id"), game, positions),
        firebet=rules,
        preset=v("firebet", "preset"),
        history_hands=v("firebet", "history_hands"),
        reader=ReaderConfig(
            v("reader", "port"), v("reader", "baud"), v("reader", "heartbeat_timeout_s")
        ),
        lights=LightsConfig(
            dict(markers),
            v("lights", "status"),
            v("lights", "surveillance"),
            v("lights", "active_high"),
        ),
        buttons=ButtonsConfig(
            v("buttons", "void"),
            v("buttons", "surrender"),
            v("buttons", "ack"),
            v("buttons", "hold_s"),
        ),
        journal=JournalConfig(
            v("journal", "path"), v("journal", "snapshot_every"), v("journal", "key_file")
        ),
        control=ControlConfig(
            v("control", "socket"), v("control", "dealer_group"), v("control", "technician_group")
        ),
        floor=_floor(values),
        source=source,
    )
    seen: dict[int, str] = {}
    for name, pin in config.pins().items():
        if pin in seen:
            # blame the key the table's own file set, when one of the two came from it
            other = seen[pin]
            first, second = (other, name) if _set_in(values, other) == source else (name, other)
            raise ConfigError(
                _set_in(values, first), first, f"pin {pin} is already used by {second}"
            )
        seen[pin] = name
    return config


def rules_settings(config: Config) -> dict[str, Any]:
    """The effective ``[table]`` and ``[firebet]`` settings, as the ``rules`` record carries
    them (JSON-ready; :func:`rules_from_settings` gives the engine's rules back)."""
    r = config.firebet
    return {
        "table": {
            "id": config.table.id,
            "game": config.table.game,
            "positions": config.table.positions,
        },
        "firebet": {
            "preset": config.preset,
            "pays": {str(tier): odds for tier, odds in sorted(r.pay_table().items())},
            "min_wager": r.min_wager,
            "max_wager": r.max_wager,
            "wager_increment": r.wager_increment,
            "pay_six_immediately": r.pay_six_immediately,
            "surrender_carries_points": r.surrender_carries_points,
            "surveillance_at": r.surveillance_at,
            "betting_closes": r.betting_closes,
            "history_hands": config.history_hands,
        },
    }


def rules_from_settings(settings: Mapping[str, Any]) -> FireBetRules:
    """The engine's rules from a ``rules`` record's settings (the floor's second opinion)."""
    table, firebet = settings["table"], settings["firebet"]
    return FireBetRules(
        positions=int(table["positions"]),
        pays={int(tier): int(odds) for tier, odds in firebet["pays"].items()},
        min_wager=int(firebet["min_wager"]),
        max_wager=int(firebet["max_wager"]),
        wager_increment=int(firebet["wager_increment"]),
        pay_six_immediately=bool(firebet["pay_six_immediately"]),
        surrender_carries_points=bool(firebet["surrender_carries_points"]),
        surveillance_at=int(firebet["surveillance_at"]),
        betting_closes=str(firebet["betting_closes"]),
    )


def with_broker(config: Config, url: str, source: str = "--broker") -> Config:
    """``config`` publishing to the broker at ``url`` (``firebet sim --broker``), checked."""
    problem = broker_problem(url)
    if problem:
        raise ConfigError(source, "", f"{problem} (got {url!r})")
    if not TOPIC_LEVEL.fullmatch(config.table.id):
        raise ConfigError(
            config.source, "table.id", f"{config.table.id!r} is not a plain topic level"
        )
    floor = FloorConfig(
        url,
        config.floor.username,
        config.floor.password_file,
        config.floor.tls_ca if url.startswith("mqtts://") else "",
        config.floor.topic_prefix,
    )
    return replace(config, floor=floor)
