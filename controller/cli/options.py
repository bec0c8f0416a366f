"""Where things are: the configuration file, the state directory, the control socket.

The same rules for the service and for every client command, so that a
technician's ``firebet status`` finds the socket the service opened:

* config: ``--config F``, else ``$FIREBET_CONFIG``, else ``/etc/firebet/table.toml``
  when it exists, else the built-in defaults (``config/table.toml``);
* state directory: ``--state-dir D``, else ``$FIREBET_STATE_DIR``, else ``./var``;
* control socket: ``--socket P``, else ``control.socket`` of the config (relative
  to the state directory unless absolute).
"""

from __future__ import annotations

import argparse
import os
import pwd
from pathlib import Path
from typing import Any

from controller.control.protocol import identify
from controller.core.config import Config, load_config
from controller.core.errors import ConfigError
from controller.core.numbers import WHOLE_NUMBER, decimal_number, whole_number

SYSTEM_CONFIG = Path("/etc/firebet/table.toml")
FLOOR_SYSTEM_CONFIG = Path("/etc/firebet/floor.toml")
DEFAULT_STATE_DIR = Path("var")


def config_path(
    given: str | None, env: str = "FIREBET_CONFIG", system: Path = SYSTEM_CONFIG
) -> str | None:
    """The configuration file to read: ``given``, else ``$env``, else ``system`` when it
    exists, else None (the built-in defaults)."""
    if given:
        return given
    named = os.environ.get(env)
    if named:
        return named
    try:
        return str(system) if system.is_file() else None
    except PermissionError as exc:  # /etc/firebet is the service group's (0750)
        raise ConfigError(
            str(system),
            "",
            "cannot be read: permission denied (your user must be in the firebet group: "
            "sudo usermod -aG firebet $USER, then log in again; or give --config)",
        ) from exc


def floor_config_path(given: str | None) -> str | None:
    """``floor.toml``: ``--config``, else ``$FIREBET_FLOOR_CONFIG``, else
    /etc/firebet/floor.toml when it exists, else None (the defaults)."""
    return config_path(given, "FIREBET_FLOOR_CONFIG", FLOOR_SYSTEM_CONFIG)


def load(args: argparse.Namespace) -> Config:
    """The validated configuration named by ``args.config`` (or found as above)."""
    return load_config(config_path(getattr(args, "config", None)))


def state_dir(given: str | None) -> Path:
    """The state directory (journal, socket, halt marker)."""
    if given:
        return Path(given)
    env = os.environ.get("FIREBET_STATE_DIR")
    return Path(env) if env else DEFAULT_STATE_DIR


def socket_path(config: Config, given: str | None, state: Path) -> Path:
    """The control socket's path."""
    if given:
        return Path(given)
    configured = Path(config.control.socket)
    return configured if configured.is_absolute() else state / configured


def add_command(
    subparsers: Any, name: str, help_text: str, doc: str | None
) -> argparse.ArgumentParser:
    """The parser of command ``name``, its ``--help`` the module's docstring as written."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=help_text,
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def add_config_option(parser: argparse.ArgumentParser) -> None:
    """``--config F``: the table's configuration file (else as :func:`config_path` finds)."""
    parser.add_argument("--config", metavar="F", help="table configuration file (TOML)")


def add_location_options(parser: argparse.ArgumentParser, *, state: bool = True) -> None:
    """``--config F``, ``--socket P`` and (unless ``state=False``) ``--state-dir D``."""
    add_config_option(parser)
    parser.add_argument("--socket", metavar="P", help="control socket path")
    if state:
        parser.add_argument("--state-dir", metavar="D", help="state directory (default ./var)")


def whole(text: str) -> int:
    """argparse type: a whole number in ASCII digits (``٣`` or ``²`` is refused, exit 2)."""
    value = whole_number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"must be {WHOLE_NUMBER}, not {text!r}")
    return value


def positive(text: str) -> int:
    """argparse type: a whole number of at least 1, in ASCII digits."""
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text!r}")
    return value


def seconds(text: str) -> float:
    """argparse type: seconds as ASCII digits with an optional decimal point (``0.5``)."""
    value = decimal_number(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"must be a number of seconds like 0.5, not {text!r}")
    return value


def os_actor() -> str:
    """Who runs this command, from the kernel's user id (never from the environment):
    ``"alice(1001)"``, or ``"root(0) via sudo from alice(1001)"`` under sudo."""
    actor = identify(os.getuid(), os.getgid()).actor
    sudo_uid = os.environ.get("SUDO_UID", "")
    if os.getuid() == 0 and sudo_uid.isascii() and sudo_uid.isdigit():
        try:
            name = pwd.getpwuid(int(sudo_uid)).pw_name
        except (KeyError, OverflowError):
            name = sudo_uid
        actor += f" via sudo from {name}({int(sudo_uid)})"
    return actor
