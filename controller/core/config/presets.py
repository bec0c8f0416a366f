"""The bundled jurisdiction presets (``config/presets/*.toml``) and the law a preset like
``nj`` sets: a table under it may pay more and take a narrower range of wagers, never less.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path

from controller.core.config.model import FireBetRules
from controller.core.config.schema import Values, merge, read_toml
from controller.core.errors import ConfigError


def _bundled() -> Path:
    """The folder of the bundled ``config`` package (a plain folder on disk: no
    ``importlib.resources``, whose imports cost the service's start-up a tenth of its CPU)."""
    return Path(next(iter(importlib.import_module("config").__path__)))


def defaults_text() -> str:
    """``config/table.toml``: every key's default."""
    return (_bundled() / "table.toml").read_text(encoding="utf-8")


def preset_names() -> list[str]:
    """The names of the bundled jurisdiction presets."""
    folder = _bundled() / "presets"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def preset_text(name: str, source: str) -> str:
    """The text of preset ``name``; a ConfigError naming ``source`` when there is none."""
    if name not in preset_names():
        raise ConfigError(
            source,
            "firebet.preset",
            f"unknown preset {name!r} (known: {', '.join(preset_names())})",
        )
    return (_bundled() / "presets" / f"{name}.toml").read_text(encoding="utf-8")


# Presets whose limits and pay table are the regulation's: a table under one of them may
# pay more and take a narrower range of wagers, never less (docs/rules.md, settled questions).
LAW_PRESETS = ("nj",)
# the [firebet] keys besides limits and pays that such a law settles (see check_law)
PLAY_UNDER_LAW = ("pay_six_immediately", "betting_closes", "surveillance_at")


def check_law(
    preset: str,
    pays: Mapping[int, int],
    limits: tuple[int, int, int],
    where: Callable[[str, str], str],
    source: str,
    play: Mapping[str, object] | None = None,
) -> None:
    """Refuse a table that is looser than the law of ``preset`` (its bundled file).

    ``play`` holds the table's ``pay_six_immediately``, ``betting_closes`` and
    ``surveillance_at``: the law settles every fire bet at the loser 7 (N.J.A.C.
    13:69F-1.12 (5)), takes bets only before the new shooter's come-out roll (1) and
    notifies surveillance by the 5th different point (6).
    """
    parsed: Values = {}
    merge(parsed, read_toml(preset_text(preset, source), f"preset {preset!r}"), preset)
    law = {name: value for name, (value, _) in parsed["firebet"].items()}
    lo, hi, step = limits
    law_rules = FireBetRules(pays=law["pays"])
    rules = FireBetRules(pays=pays)
    tail = f'(use preset = "custom" for a house table outside {preset.upper()} law)'
    is_law = f"preset {preset!r} is law:"
    if lo < law["min_wager"]:
        raise ConfigError(
            where("firebet", "min_wager"),
            "firebet.min_wager",
            f"{is_law} the minimum wager is ${law['min_wager']} or more, not ${lo} {tail}",
        )
    if hi > law["max_wager"]:
        raise ConfigError(
            where("firebet", "max_wager"),
            "firebet.max_wager",
            f"{is_law} the maximum wager is ${law['max_wager']} or less, not ${hi} {tail}",
        )
    if step != law["wager_increment"]:
        raise ConfigError(
            where("firebet", "wager_increment"),
            "firebet.wager_increment",
            f"{is_law} wagers are in ${law['wager_increment']} increments, not ${step} {tail}",
        )
    play = play or {}
    if play.get("pay_six_immediately"):
        raise ConfigError(
            where("firebet", "pay_six_immediately"),
            "firebet.pay_six_immediately",
            f"{is_law} fire bets are paid or collected at the loser 7, "
            f"so pay_six_immediately must be false {tail}",
        )
    if play.get("betting_closes", "first_roll") != "first_roll":
        raise ConfigError(
            where("firebet", "betting_closes"),
            "firebet.betting_closes",
            f"{is_law} fire bets are placed before the new shooter's come-out roll, "
            f'so betting_closes must be "first_roll", not {play["betting_closes"]!r} {tail}',
        )
    alert = play.get("surveillance_at", 5)
    if isinstance(alert, int) and alert > 5:
        raise ConfigError(
            where("firebet", "surveillance_at"),
            "firebet.surveillance_at",
            f"{is_law} surveillance is notified once 5 different points are made, "
            f"so surveillance_at must be 5 or less, not {alert} {tail}",
        )
    for tier, least in sorted(law_rules.pay_table().items()):
        paid = rules.odds_for(tier)[1]
        if paid < least:
            got = f"{paid} to 1" if paid else "nothing"
            raise ConfigError(
                where("firebet", "pays"),
                f"firebet.pays.{tier}",
                f"{is_law} {tier} different points pay at least {least} to 1, "
                f"this table pays {got} {tail}",
            )
