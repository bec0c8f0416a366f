"""Configuration: every key declared once, parsed strictly into typed objects.

A table's file holds only what it changes. Values are layered
``config/table.toml`` (the defaults) <- the preset it names <- the file itself.
Any unknown key, wrong type or inconsistent value raises :class:`ConfigError`
naming the file, the key and the reason.

Here the loading, layering and the checks across keys; the keys and the strict reading of
a file in ``schema.py``, the typed values in ``model.py``, the presets and their law in
``presets.py``. Every name a caller needs is importable from ``controller.core.config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from controller.core.config.model import (
    BOOKKEEPING_RULES,
    POINT_NUMBERS,
    Broker,
    ButtonsConfig,
    Config,
    ControlConfig,
    FireBetRules,
    FloorConfig,
    JournalConfig,
    LightsConfig,
    MetricsConfig,
    ReaderConfig,
    TableConfig,
    broker_endpoint,
    broker_problem,
)
from controller.core.config.presets import (
    LAW_PRESETS,
    PLAY_UNDER_LAW,
    check_law,
    defaults_text,
    preset_names,
    preset_text,
)
from controller.core.config.schema import (
    KEYS,
    MAX_POSITIONS,
    SCHEMA,
    Key,
    Values,
    bcm_pin,
    merge,
    read_file,
    read_toml,
)
from controller.core.errors import ConfigError
from controller.core.table_id import table_id_problem

__all__ = [
    "BOOKKEEPING_RULES",
    "KEYS",
    "POINT_NUMBERS",
    "SCHEMA",
    "Broker",
    "ButtonsConfig",
    "Config",
    "ControlConfig",
    "FireBetRules",
    "FloorConfig",
    "JournalConfig",
    "Key",
    "LightsConfig",
    "MetricsConfig",
    "ReaderConfig",
    "TableConfig",
    "broker_endpoint",
    "broker_problem",
    "load_config",
    "preset_names",
    "rules_changes",
    "rules_from_settings",
    "rules_settings",
    "with_broker",
]


def load_config(path: str | Path | None = None) -> Config:
    """Load and validate the configuration: defaults, then preset, then ``path``."""
    defaults = read_toml(defaults_text(), "config/table.toml")
    user: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        user = read_file(path)
    values: Values = {}
    merge(values, defaults, "config/table.toml")
    # validate the user's file before applying its preset, so a typo is reported as its own
    merge({}, user, source)
    preset = user.get("firebet", {}).get("preset", values["firebet"]["preset"][0])
    preset_source = f"preset {preset!r}"
    merge(values, read_toml(preset_text(preset, source), preset_source), preset_source)
    merge(values, user, source)
    missing = [k.dotted for k in SCHEMA if k.name not in values.get(k.section, {})]
    if missing:
        raise ConfigError("config/table.toml", missing[0], "has no default")
    return _build(values, source)


def _set_in(values: Values, dotted: str) -> str:
    """The file that set a dotted key (``lights.markers.4`` counts as ``lights.markers``)."""
    section, name = dotted.split(".")[:2]
    return values[section][name][1]


def _floor(values: Values) -> FloorConfig:
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
    problem = table_id_problem(values["table"]["id"][0])
    if problem:
        raise ConfigError(_set_in(values, "table.id"), "table.id", problem)
    return floor


def _build(values: Values, source: str) -> Config:
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
    preset = v("firebet", "preset")
    if preset in LAW_PRESETS:
        play = {k: v("firebet", k) for k in PLAY_UNDER_LAW}
        check_law(preset, pays, (lo, hi, step), where, source, play)
    markers: dict[int, int] = v("lights", "markers")
    msrc = where("lights", "markers")
    if sorted(markers) != list(POINT_NUMBERS):
        raise ConfigError(
            msrc, "lights.markers", "needs exactly one pin for each point 4, 5, 6, 8, 9, 10"
        )
    for point, pin in markers.items():
        problem = bcm_pin(pin)
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
        preset=preset,
        history_hands=v("firebet", "history_hands"),
        reader=ReaderConfig(
            v("reader", "port"),
            v("reader", "baud"),
            v("reader", "heartbeat_timeout_s"),
            v("reader", "protocol"),
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
            v("buttons", "apply_held"),
            v("buttons", "discard_held"),
        ),
        journal=JournalConfig(
            v("journal", "path"),
            v("journal", "snapshot_every"),
            v("journal", "key_file"),
            v("journal", "watch_sweep_s"),
        ),
        control=ControlConfig(
            v("control", "socket"), v("control", "dealer_group"), v("control", "technician_group")
        ),
        floor=_floor(values),
        metrics=MetricsConfig(v("metrics", "textfile_dir")),
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
            "confirmable_alerts": r.confirmable_alerts,
            "history_hands": config.history_hands,
        },
    }


def rules_from_settings(settings: Mapping[str, Any]) -> FireBetRules:
    """The engine's rules from a ``rules`` record's settings (raises KeyError, TypeError or
    ValueError naming what is wrong when they are not such settings)."""
    table, firebet = settings["table"], settings["firebet"]
    if not isinstance(table, Mapping) or not isinstance(firebet, Mapping):
        raise TypeError("a rules record holds the [table] and [firebet] settings as tables")
    return FireBetRules.from_dict({**firebet, "positions": table["positions"]})


RULES_SECTIONS = ("table", "firebet")


def rules_changes(
    before: Mapping[str, Any] | None, after: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """What differs between the settings of two ``rules`` records (:func:`rules_settings`):
    each dotted key (``firebet.pays``) that changed, with what it ``was`` and is ``now``.
    Every key of a start after none (``before`` None) counts as new (``was`` None)."""
    changed: dict[str, dict[str, Any]] = {}
    for section in RULES_SECTIONS:
        old = (before or {}).get(section)
        old = old if isinstance(old, Mapping) else {}
        new = after.get(section)
        new = new if isinstance(new, Mapping) else {}
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                changed[f"{section}.{name}"] = {"was": old.get(name), "now": new.get(name)}
    return changed


def with_broker(config: Config, url: str, source: str = "--broker") -> Config:
    """``config`` publishing to the broker at ``url`` (``firebet sim --broker``), checked."""
    problem = broker_problem(url)
    if problem:
        raise ConfigError(source, "", f"{problem} (got {url!r})")
    problem = table_id_problem(config.table.id)
    if problem:
        raise ConfigError(config.source, "table.id", problem)
    floor = FloorConfig(
        url,
        config.floor.username,
        config.floor.password_file,
        config.floor.tls_ca if url.startswith("mqtts://") else "",
        config.floor.topic_prefix,
    )
    return replace(config, floor=floor)
