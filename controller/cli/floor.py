"""``firebet floor``: the surveillance room's service and live web console (docs/floor.md).

``firebet floor [--config floor.toml] [--state-dir D] [--http HOST:PORT]`` hears every
table through the broker, keeps their records, checks them and serves the console;
``firebet floor passwd USER`` makes the password hash a surveillance user's line in
``floor.toml`` needs.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import logging
import signal
import socket
import sys
from collections.abc import Iterator
from types import FrameType

import uvicorn

from controller.cli import options
from controller.core.errors import UsageError
from controller.floor.passwords import hash_password
from controller.floor.server import FloorService
from controller.floor.settings import USER_NAME, load_settings, parse_http
from controller.floor.web import build_app

log = logging.getLogger("firebet.floor")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "floor",
        help="the floor service: every table's records, checks and the live console",
        description="Hear every table through the MQTT broker, keep and check their records, "
        "and serve the surveillance console (default http://127.0.0.1:8080/).",
    )
    parser.add_argument(
        "--config", metavar="F",
        help="floor configuration (TOML; else $FIREBET_FLOOR_CONFIG, /etc/firebet/floor.toml)",
    )  # fmt: skip
    parser.add_argument("--state-dir", metavar="D", help="state directory (default ./var)")
    parser.add_argument(
        "--http", metavar="HOST:PORT", help="where the console listens (default 127.0.0.1:8080)"
    )
    parser.set_defaults(func=run)
    # optional: `firebet floor` alone is the service; the usage line must say so
    parser.usage = (
        "%(prog)s [-h] [--config F] [--state-dir D] [--http HOST:PORT]\n"
        "       %(prog)s passwd [-h] USER"
    )
    sub = parser.add_subparsers(dest="floor_command", metavar="passwd USER", required=False)
    passwd_parser = sub.add_parser(
        "passwd",
        help="print a surveillance user's [users] line (the password is asked, or read from stdin)",
    )
    passwd_parser.add_argument("user", help="the surveillance user's name")
    passwd_parser.set_defaults(func=passwd)


def passwd(args: argparse.Namespace) -> int:
    """Print ``USER = "scrypt$..."`` for the ``[users]`` section of ``floor.toml``."""
    if not USER_NAME.fullmatch(args.user):
        raise UsageError(f"user {args.user!r}: a user name is letters, digits, _ . - (1 to 64)")
    if sys.stdin.isatty():
        password = getpass.getpass(f"password for {args.user}: ")
        if getpass.getpass("again: ") != password:
            raise UsageError("the two passwords differ")
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if len(password) < 8:
        raise UsageError("a surveillance password has at least 8 characters")
    print(f'{args.user} = "{hash_password(password)}"')
    return 0


class _Server(uvicorn.Server):
    """uvicorn, ending the console's live streams as soon as it is asked to stop."""

    def __init__(self, config: uvicorn.Config, on_exit: list[object]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """SIGTERM and SIGINT stop the floor cleanly (exit 0), not re-raised as uvicorn does."""
        saved = {s: signal.signal(s, self.handle_exit) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in saved.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        for close in self._on_exit:
            close()  # type: ignore[operator]
        super().handle_exit(sig, frame)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    logging.getLogger("transitions").setLevel(logging.WARNING)  # a line per callback otherwise
    settings = load_settings(options.floor_config_path(args.config))
    state = options.state_dir(args.state_dir, installed_default=None)  # not the table's
    host, port = (
        parse_http(args.http, "--http", "--http")
        if args.http
        else parse_http(settings.http, settings.source)
    )
    settings.password()  # a missing password file is a config error now, not a retry loop later
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"--http {host}:{port}: cannot listen there: {exc.strerror or exc}"
        ) from exc
    sock.listen(128)
    service = FloorService(settings, state)
    app = build_app(service, settings.users)
    console = app.state.console
    server = _Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                       timeout_graceful_shutdown=3),
        [console.close],
    )  # fmt: skip
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if family == socket.AF_INET6 else bound[0]
    service.start()
    print(f"firebet floor: console at http://{shown}:{bound[1]}/ (broker {settings.broker}, "
          f"state {state})", flush=True)  # fmt: skip
    try:
        server.run(sockets=[sock])
    finally:
        console.close()
        service.stop()
    return 0
