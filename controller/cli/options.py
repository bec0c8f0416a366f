"""Where things are: the configuration file, the state directory, the journal key, the socket.

One answer for the service and for every client command (:func:`locate`), so that a
technician's ``firebet status`` finds the socket the service opened and ``firebet
journal verify`` checks a journal with the key it was made with:

* config: ``--config F``, else ``$FIREBET_CONFIG``, else ``/etc/firebet/table.toml``
  when it exists, else the built-in defaults (``config/table.toml``);
* state directory: ``--state-dir D``, else ``$FIREBET_STATE_DIR``, else
  ``/var/lib/firebet`` for an installed program (the package), ``./var`` for a
  checkout; ``firebet sim`` (a simulated table) never defaults to the installed one;
* journal key: ``[journal] key_file`` when the configuration names one, else
  ``/etc/firebet/journal.key`` for ``/var/lib/firebet`` and ``journal.key`` beside
  the journal for any other state directory (:func:`controller.journal.key.key_file_for`);
* control socket: ``--socket P``, else ``control.socket`` of the config (relative
  to the state directory unless absolute).

``--verbose`` prints which of each was used, and why, on standard error.
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from controller.core.config import Config, load_config
from controller.core.config.model import INSTALLED_STATE_DIR
from controller.core.errors import ConfigError
from controller.core.numbers import WHOLE_NUMBER, decimal_number, whole_number

SYSTEM_CONFIG = Path("/etc/firebet/table.toml")
FLOOR_SYSTEM_CONFIG = Path("/etc/firebet/floor.toml")
CHECKOUT_STATE_DIR = Path("var")


def installed() -> bool:
    """Whether this program runs from an installation (the package), not a checkout."""
    from controller.service import integrity  # here: `firebet replay` loads no service

    return integrity.installed()


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


def config_source(given: str | None) -> str:
    """Where the configuration comes from, in words (for ``--verbose`` and ``doctor``)."""
    if given:
        return f"{given} (--config)"
    if os.environ.get("FIREBET_CONFIG"):
        return f"{os.environ['FIREBET_CONFIG']} ($FIREBET_CONFIG)"
    found = config_path(None)
    return f"{found} (the system's)" if found else "the built-in defaults (config/table.toml)"


def state_dir_and_why(
    given: str | None, *, installed_default: Path | None = INSTALLED_STATE_DIR
) -> tuple[Path, str]:
    """The state directory (journal, socket, halt marker) and why it is that one.

    ``installed_default``: the default of an installed program (None: ``./var`` there too,
    for ``firebet sim``'s simulated table and the floor service)."""
    if given:
        return Path(given), "from --state-dir"
    env = os.environ.get("FIREBET_STATE_DIR")
    if env:
        return Path(env), "from $FIREBET_STATE_DIR"
    if installed_default is not None and installed():
        return installed_default, "the installed table's"
    return CHECKOUT_STATE_DIR, "sim's default" if installed() else "a checkout's default"


def state_dir(given: str | None, *, installed_default: Path | None = INSTALLED_STATE_DIR) -> Path:
    """The state directory (see :func:`state_dir_and_why`)."""
    return state_dir_and_why(given, installed_default=installed_default)[0]


@dataclass(frozen=True)
class Located:
    """Where one command's table is: its configuration, state directory and journal key
    (the key's file worked out when first asked: a dealer's command, which needs only the
    socket, never loads the journal package)."""

    config: Config
    config_from: str
    state_dir: Path
    state_from: str

    @cached_property
    def _key(self) -> tuple[Path, str]:
        from controller.journal.key import key_file_for  # the whole journal package with it

        return key_file_for(self.config.journal.key_file, self.state_dir)

    @property
    def key_file(self) -> Path:
        """The journal key's file."""
        return self._key[0]

    @property
    def key_from(self) -> str:
        """Why the key is that file (``[journal] key_file``, the installed table's, ...)."""
        return self._key[1]

    def lines(self) -> list[str]:
        """What ``--verbose`` prints and ``doctor`` shows, one line each."""
        return [
            f"config: {self.config_from}",
            f"state directory: {self.state_dir.absolute()} ({self.state_from})",
            f"journal key: {self.key_file.absolute()} ({self.key_from})",
        ]


def locate(args: argparse.Namespace, *, simulated: bool = False) -> Located:
    """The configuration, state directory and journal key of the command ``args`` names;
    printed on standard error with ``--verbose``. ``simulated``: ``firebet sim``'s table."""
    known: Located | None = getattr(args, "_located", None)
    if known is not None:  # asked again by the same command (history: socket, then journal)
        return known
    given = getattr(args, "config", None)
    config = load_config(config_path(given))
    default = None if simulated else INSTALLED_STATE_DIR
    given_state = getattr(args, "state_dir", None)
    state, state_from = state_dir_and_why(given_state, installed_default=default)
    located = Located(config, config_source(given), state, state_from)
    if getattr(args, "verbose", False):
        for line in located.lines():
            print(f"firebet: {line}", file=sys.stderr)
    args._located = located
    return located


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
        parser.add_argument(
            "--state-dir",
            metavar="D",
            help="state directory (default: /var/lib/firebet when installed, ./var in a checkout)",
        )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="say which configuration, state directory and journal key are used (stderr)",
    )


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
    # imported here: the socket's peer identification is for the commands that journal
    # who ran them; replay, odds and the other pure commands start without it
    from controller.control.protocol import identify

    actor = identify(os.getuid(), os.getgid()).actor
    sudo_uid = os.environ.get("SUDO_UID", "")
    if os.getuid() == 0 and sudo_uid.isascii() and sudo_uid.isdigit():
        try:
            name = pwd.getpwuid(int(sudo_uid)).pw_name
        except (KeyError, OverflowError):
            name = sudo_uid
        actor += f" via sudo from {name}({int(sudo_uid)})"
    return actor
