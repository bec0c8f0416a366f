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
import os
import resource
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import uvicorn

from controller.cli import logs, options
from controller.core.errors import ConfigError, FirebetError, UsageError
from controller.floor.guard import protocol_class
from controller.floor.passwords import hash_password
from controller.floor.server import FloorService
from controller.floor.settings import USER_NAME, FloorSettings, load_settings, parse_http
from controller.floor.web import build_app

log = logging.getLogger("firebet.floor")

ACCEPT_BACKLOG = 128
"""Connections waiting to be accepted; asyncio accepts up to this many at a time."""
FILES_KEPT = 3 * ACCEPT_BACKLOG + 64
"""Open files kept apart from the console's connections: the accept bursts not yet
trimmed to the cap (a connection closed to make room gives its file back one turn of the
event loop later, while the next burst is accepted: up to three bursts are in flight
under a flood), the database, the broker, logs."""
BROKER_WAIT_S = 3.0  # how long the start waits for the broker before it warns


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


def connection_cap(wanted: int) -> int:
    """The console's connection cap under the open-file limit, raising the soft limit
    toward the hard one when it is too low for ``wanted`` (the usual 1024 is)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + FILES_KEPT
    if soft != resource.RLIM_INFINITY and soft < need:
        raised = need if hard == resource.RLIM_INFINITY else min(hard, need)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
    if soft == resource.RLIM_INFINITY or soft >= need:
        return wanted
    cap = max(16, soft - FILES_KEPT)
    log.warning(
        "open-file limit %d: the console takes %d connections, not web.max_connections %d "
        "(raise LimitNOFILE)", soft, cap, wanted,
    )  # fmt: skip
    return cap


def tls_problem(settings: FloorSettings) -> None:
    """A ConfigError naming the key when the console's certificate or key cannot be used."""
    web = settings.web
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
            web.tls_certfile, web.tls_keyfile
        )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            settings.source, "web.tls_certfile", f"cannot serve https with it: {exc}"
        ) from exc


def uvicorn_config(app: object, settings: FloorSettings, cap: int) -> uvicorn.Config:
    """uvicorn with the console's limits (``[web]``): the guarded protocol, header size,
    keep-alive, proxy headers only from the trusted proxy, and TLS when asked."""
    web = settings.web
    tls = {"ssl_certfile": web.tls_certfile, "ssl_keyfile": web.tls_keyfile} if web.tls else {}
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        http=protocol_class(web, cap),
        h11_max_incomplete_event_size=web.max_header_bytes,
        timeout_keep_alive=web.idle_timeout_s,
        backlog=ACCEPT_BACKLOG,
        proxy_headers=web.behind_tls_proxy,
        forwarded_allow_ips=web.proxies(),
        log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=3,
        log_config=None,
        **tls,  # type: ignore[arg-type]
    )  # fmt: skip


def _writable(state: Path) -> str | None:
    """Why the floor cannot keep its records in ``state`` (None: it can)."""
    try:
        state.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot make it: {exc.strerror or exc}"
    if not state.is_dir():
        return "it is not a directory"
    if not os.access(state, os.W_OK | os.X_OK):
        return "the floor's user cannot write in it"
    return None


def warn_missing(settings: FloorSettings, config: str | None) -> None:
    """Say at start what the floor lacks and can run without (it runs on)."""
    if config is None:
        log.warning(
            "no floor configuration (no --config, $FIREBET_FLOOR_CONFIG or %s): "
            "running on the defaults, broker %s",
            options.FLOOR_SYSTEM_CONFIG, settings.broker,
        )  # fmt: skip
    if not settings.users:
        log.warning(
            "no surveillance users in %s [users]: the console is read-only, nobody can "
            "confirm or clear an alert (add one: firebet floor passwd NAME)",
            settings.source,
        )


def watch_broker(service: FloorService, wait_s: float = BROKER_WAIT_S) -> threading.Thread:
    """Warn when the broker is not reached within ``wait_s`` (the floor keeps trying)."""

    def watch() -> None:
        if service.connected.wait(wait_s):
            return
        why = f" ({service.last_error})" if service.last_error else ""
        log.warning(
            "no broker reachable at %s within %g s%s: the console shows what floor.db "
            "holds, and the floor keeps trying (the tables keep their records until it is back)",
            service.settings.broker, wait_s, why,
        )  # fmt: skip

    thread = threading.Thread(target=watch, name="floor-broker-watch", daemon=True)
    thread.start()
    return thread


def run(args: argparse.Namespace) -> int:
    logs.configure()  # time-stamped lines, as the table's service logs (journald under systemd)
    config = options.floor_config_path(args.config)
    settings = load_settings(config)
    state = options.state_dir(args.state_dir, installed_default=None)  # not the table's
    host, port = (
        parse_http(args.http, "--http", "--http")
        if args.http
        else parse_http(settings.http, settings.source)
    )
    settings.password()  # a missing password file is a config error now, not a retry loop later
    if settings.web.tls:
        tls_problem(settings)
    problem = _writable(state)
    if problem:
        raise FirebetError(f"state directory {state}: {problem}; the floor keeps floor.db there")
    warn_missing(settings, config)
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
    sock.listen(ACCEPT_BACKLOG)
    cap = connection_cap(settings.web.max_connections)
    service = FloorService(settings, state)
    if not service.ingest.tables:
        log.warning(
            "no table has reported to this floor yet (%s holds none): each table's "
            "[floor] broker must name %s",
            state / settings.database, settings.broker,
        )  # fmt: skip
    app = build_app(service, settings.users, settings.web)
    console = app.state.console
    server = _Server(uvicorn_config(app, settings, cap), [console.close])
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if family == socket.AF_INET6 else bound[0]
    service.start()
    watch_broker(service)
    scheme = "https" if settings.web.tls else "http"
    log.info("console at %s://%s:%d/ (broker %s, state %s, store %s)", scheme, shown, bound[1],
             settings.broker, state, service.store.describe())  # fmt: skip
    print(f"firebet floor: console at {scheme}://{shown}:{bound[1]}/ (broker {settings.broker}, "
          f"state {state})", flush=True)  # fmt: skip
    try:
        server.run(sockets=[sock])
    finally:
        console.close()
        service.stop()
    return 0
