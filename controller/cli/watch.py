"""``firebet status --watch``: the table drawn live from the running service, read-only.

For the pit or a technician beside a running table: the same view as ``firebet
sim`` draws, asked of the service every ``S`` seconds over one connection
(``status`` is open to the service's group, and is answered off the engine
thread, so a watcher never slows the game). It redraws only when the table
changed, as whole frames on the terminal's alternate screen, and says when the
service cannot be reached, trying again until Ctrl-C (exit 0). Without a
terminal it prints the table at each change (``--json``: one object a line).
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from types import FrameType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from controller.cli import options as paths
from controller.cli.display import render_status
from controller.control.client import ControlClient
from controller.control.ops import Op
from controller.core.errors import FirebetError

IGNORED = ("ok", "id")  # reply keys that are not the table's state


def _ask(client: ControlClient) -> tuple[dict[str, Any] | None, str]:
    """The service's status, or None and what went wrong."""
    try:
        reply = client.request(Op.STATUS)
    except FirebetError as exc:
        client.close()  # reconnect on the next try
        return None, str(exc)
    if not reply.get("ok", True):
        return None, str(reply.get("error", "refused"))
    return {k: v for k, v in reply.items() if k not in IGNORED}, ""


def _table(status: dict[str, Any]) -> dict[str, Any]:
    """What a line is printed for: the state without the reader's ever-counting frames."""
    reader = {k: v for k, v in status.get("reader", {}).items() if k != "counters"}
    return status | {"reader": reader}


def watch(args: argparse.Namespace) -> int:
    """Draw the table until Ctrl-C or SIGTERM; exit 0."""
    if not args.watch > 0:
        raise FirebetError("--watch takes a number of seconds greater than 0")
    where = paths.locate(args)
    config = where.config
    path = paths.socket_path(config, args.socket, where.state_dir)
    client = ControlClient(path, timeout=max(5.0, args.watch))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    console = Console()
    try:
        if console.is_terminal and not args.json:
            _live(client, console, args.watch, stop, str(path))
        else:
            _lines(client, console, args.watch, stop, as_json=args.json)
    finally:
        client.close()
    return 0


def _live(
    client: ControlClient, console: Console, every: float, stop: threading.Event, where: str
) -> None:
    footer = f"watching {where} every {every:g} s, read-only; Ctrl-C to stop"
    shown: Any = None
    with Live(console=console, screen=True, auto_refresh=False) as view:
        while not stop.is_set():
            status, problem = _ask(client)
            now = status if status is not None else problem
            if now != shown:
                shown = now
                if status is not None:
                    view.update(render_status(status, footer=footer), refresh=True)
                else:
                    text = Text(f"firebet: {problem}\nretrying every {every:g} s; Ctrl-C to stop")
                    view.update(text, refresh=True)
            stop.wait(every)


def _lines(
    client: ControlClient, console: Console, every: float, stop: threading.Event, *, as_json: bool
) -> None:
    shown: Any = None
    while not stop.is_set():
        status, problem = _ask(client)
        now = _table(status) if status is not None else problem
        if now != shown:
            shown = now
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            if status is None:
                print(f"firebet: {problem} (retrying)", flush=True)
            elif as_json:
                print(json.dumps(status), flush=True)
            else:
                console.print(Text(stamp, style="dim"))
                console.print(render_status(status))
        stop.wait(every)
