"""The validated configuration of a table as typed values: the rules the engine plays by,
the reader, lamps, buttons, journal, control socket and floor link.

:func:`controller.core.config.load_config` builds them from the files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from controller.core.numbers import whole_number

POINT_NUMBERS: tuple[int, ...] = (4, 5, 6, 8, 9, 10)
# how many hands' 5th-point alerts a table keeps confirmable at once (the newest and
# the ones before it); a rules record from before issue 32 has no such key: 1, only
# the newest, as such a table decided then (SPEC section 2: a record means what it meant)
CONFIRMABLE_ALERTS = 16
CONFIRMABLE_ALERTS_MAX = 64
# the rules keys that are the table's bookkeeping, not how a hand is decided or paid: a
# floor's approvals neither name nor compare them
BOOKKEEPING_RULES: tuple[str, ...] = ("confirmable_alerts",)


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
    confirmable_alerts: int = CONFIRMABLE_ALERTS  # table bookkeeping, not a payout rule

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

    def to_dict(self) -> dict[str, Any]:
        """The rules as JSON (pay table keys as strings); :meth:`from_dict` gives them back."""
        return {
            "positions": self.positions,
            "pays": {str(k): v for k, v in sorted(self.pay_table().items())},
            "min_wager": self.min_wager,
            "max_wager": self.max_wager,
            "wager_increment": self.wager_increment,
            "pay_six_immediately": self.pay_six_immediately,
            "surrender_carries_points": self.surrender_carries_points,
            "surveillance_at": self.surveillance_at,
            "betting_closes": self.betting_closes,
            "confirmable_alerts": self.confirmable_alerts,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FireBetRules:
        """Rules from :meth:`to_dict` output (raises KeyError, TypeError, ValueError)."""
        pays = data["pays"]
        if not isinstance(pays, Mapping):
            raise TypeError(f"pays must be a table, not {pays!r}")
        return cls(
            positions=_whole(data["positions"]),
            pays={_tier(k): _whole(v) for k, v in pays.items()},
            min_wager=_whole(data["min_wager"]),
            max_wager=_whole(data["max_wager"]),
            wager_increment=_whole(data["wager_increment"]),
            pay_six_immediately=_flag(data["pay_six_immediately"]),
            surrender_carries_points=_flag(data["surrender_carries_points"]),
            surveillance_at=_whole(data["surveillance_at"]),
            betting_closes=_choice(data["betting_closes"], ("first_roll", "first_point")),
            confirmable_alerts=_kept(data.get("confirmable_alerts", 1)),
        )

    def key(self) -> str:
        """The rules as one canonical text: equal rules, equal keys (the pay table is a
        dict, so the rules are not hashable themselves)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))


def _whole(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not a whole number")
    return value


def _tier(key: Any) -> int:
    number = whole_number(key) if isinstance(key, str) else None
    if number is None:
        raise ValueError(f"pay table key {key!r} is not a number of different points")
    return number


def _kept(value: Any) -> int:
    number = _whole(value)
    if not 1 <= number <= CONFIRMABLE_ALERTS_MAX:
        raise ValueError(f"confirmable_alerts {number} is not from 1 to {CONFIRMABLE_ALERTS_MAX}")
    return number


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{value!r} is not true or false")
    return value


def _choice(value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ValueError(f"{value!r} is not one of {', '.join(choices)}")
    return str(value)


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
    protocol: int = 2


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
    apply_held: int = 23
    discard_held: int = 24


# where the installed table (the package, systemd/firebet.service) keeps its journal and
# that journal's key; any other state directory keeps its key beside its journal
INSTALLED_STATE_DIR = Path("/var/lib/firebet")
INSTALLED_KEY_FILE = Path("/etc/firebet/journal.key")
KEY_BESIDE_JOURNAL = "journal.key"


@dataclass(frozen=True)
class JournalConfig:
    path: str
    snapshot_every: int
    key_file: str = ""  # "": by the state directory (controller.journal.key.key_file_for)
    watch_sweep_s: float = 90.0  # the running table's watch: a sweep of 1,000 records


@dataclass(frozen=True)
class ControlConfig:
    socket: str
    dealer_group: str
    technician_group: str


class Broker(NamedTuple):
    """Where an MQTT broker is: ``mqtt://host:port`` or ``mqtts://host:port`` (TLS)."""

    tls: bool
    host: str
    port: int


def broker_endpoint(url: str) -> Broker:
    """The broker at ``url`` (checked by :func:`broker_problem`); the port defaults to
    1883, or 8883 for ``mqtts``."""
    parts = urlsplit(url)
    tls = parts.scheme == "mqtts"
    return Broker(tls, parts.hostname or "", parts.port or (8883 if tls else 1883))


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

    def endpoint(self) -> Broker:
        """The broker's TLS, host and port (:func:`broker_endpoint`)."""
        return broker_endpoint(self.broker)

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
class MetricsConfig:
    """Where the table reports itself to node_exporter's textfile collector ("": nowhere)."""

    textfile_dir: str = ""


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
    metrics: MetricsConfig = MetricsConfig()
    source: str = "defaults"

    def pins(self) -> dict[str, int]:
        """Every configured BCM pin by the dotted key that names it."""
        pins = {f"lights.markers.{p}": pin for p, pin in self.lights.markers.items()}
        pins["lights.status"] = self.lights.status
        pins["lights.surveillance"] = self.lights.surveillance
        pins["buttons.void"] = self.buttons.void
        pins["buttons.surrender"] = self.buttons.surrender
        pins["buttons.ack"] = self.buttons.ack
        pins["buttons.apply_held"] = self.buttons.apply_held
        pins["buttons.discard_held"] = self.buttons.discard_held
        return pins
