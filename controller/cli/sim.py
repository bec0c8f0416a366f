"""``firebet sim``: the whole controller on a bench, drawn live in the terminal.

The real service (engine, journal, the real serial reader driver, lamps,
buttons, control socket) runs against a simulated dice reader on a
pseudo-terminal and gpiozero mock pins. Seeded players put fire bets on each
new shooter; the shooter waits while the reader is in fault and while reader rolls are
held for the dealer. Keys: [v]oid, [s]urrender, [a]ck, [t]hrow now, [f]ault on/off,
[g]arbage, [u]nplug/replug, [m]anual roll D1 D2 (reader in fault), held rolls: [h]
apply the oldest, [x] discard the oldest, [X] discard all; [q]uit.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import select
import signal
import sys
import termios
import threading
import time
import tty
from collections.abc import Iterator
from types import FrameType
from typing import Any

from rich.console import Console
from rich.live import Live

from controller.cli import logs
from controller.cli import options as paths
from controller.cli.display import render_status
from controller.cli.sim_bench import HELP, Bench
from controller.cli.wording import count, money
from controller.core.errors import UsageError
from controller.service import recall


@contextlib.contextmanager
def _cbreak() -> Iterator[bool]:
    """Single keys from the terminal without Enter, restored afterwards."""
    if not sys.stdin.isatty():
        yield False
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _read_keys(n: int, timeout: float) -> str:
    out = ""
    while len(out) < n and select.select([sys.stdin], [], [], timeout)[0]:
        out += os.read(sys.stdin.fileno(), 1).decode(errors="replace")
    return out


def _floor_line(status: dict[str, Any]) -> list[str]:
    floor = status.get("floor") or {}
    if not floor.get("enabled"):
        return []
    error = f", last error: {floor['last_error']}" if floor.get("last_error") else ""
    # read after the sim stopped its link: what it published, not a connection of now
    return [
        f"  floor: {floor['broker']}: published {floor['published']:,} records, "
        f"cursor {floor['cursor']}, backlog {floor['backlog']:,}{error}"
    ]


def footer(bench: Bench, said: str) -> str:
    """The lines under the table: why the thrower waits, what the last key did, the keys
    (each once; while a manual roll is typed, its prompt alone)."""
    if bench.manual is not None:
        return said
    lines = [bench.paused or "", "" if said == HELP else said, HELP]
    return "\n".join(line for line in lines if line)


def summary(bench: Bench, seconds: float) -> str:
    """The closing summary: this session's play, then the journal's meters over every session."""
    assert bench.controller is not None
    status = bench.controller.status()
    meters = status["meters"]
    settled = bench.settlements
    won = [s for s in settled if s["result"] == "win"]
    wagered = sum(sum(s.get("wagers", {}).values()) for s in settled)
    paid = sum(sum(s["payouts"].values()) for s in settled)
    lost = sum(
        a for s in settled for p, a in s.get("wagers", {}).items() if not s["payouts"].get(p)
    )
    journal_paid = sum(t["amount"] for t in meters["paid"].values())
    counters = status["reader"]["counters"]
    return "\n".join(
        [
            f"firebet sim: seed {bench.seed}, {bench.session_rolls} rolls in {seconds:.1f} s",
            f"  this session: {count(len(settled), 'hand')} settled, {len(won)} won; "
            f"fire bets settled {money(wagered)}, paid {money(paid)}, lost {money(lost)}",
            f"  now: hand {status['hand']} ({status['phase']}, point {status['point'] or '-'}, "
            f"{count(status['unique_points'], 'different point')})",
            f"  journal meters, every session in {bench.state_dir}: "
            f"{count(meters['hands'], 'hand')}, {count(meters['rolls'], 'roll')}, "
            f"fire bets {meters['bets_taken']['count']:,} "
            f"({money(meters['bets_taken']['amount'])}), "
            f"paid {money(journal_paid)}, lost {money(meters['lost']['amount'])}",
            "  reader frames: " + ", ".join(f"{k} {v:,}" for k, v in counters.items()),
            *_floor_line(status),
            f"  journal: {bench.state_dir / bench.config.journal.path} "
            f"(firebet history --state-dir {bench.state_dir}); log: {bench.state_dir / 'sim.log'}",
        ]
    )


def run(args: argparse.Namespace) -> int:
    if args.interval is None:
        args.interval = 0.0 if args.rolls is not None else 1.0
    if args.interval < 0:
        raise UsageError(f"--interval must not be negative, not {args.interval}")
    if args.rolls is not None and args.rolls <= 0:
        raise UsageError(f"--rolls must be at least 1, not {args.rolls}")
    bench = Bench(args)
    if args.fresh and bench.state_dir.exists():
        aside = bench.state_dir.with_name(
            f"{bench.state_dir.name}.{time.strftime('%Y%m%d-%H%M%S')}"
        )
        bench.state_dir.rename(aside)
        print(f"firebet sim: the old table's state moved aside to {aside}", file=sys.stderr)
    resuming = (bench.state_dir / bench.config.journal.path).exists()
    bench.state_dir.mkdir(parents=True, exist_ok=True)
    log_file = bench.state_dir / "sim.log"
    # the drivers' log lines go to a file (on the terminal they would tear the live table),
    # in the service's own format (controller/cli/logs.py)
    log_stream = log_file.open("a", encoding="utf-8")
    handler = logs.configure(table=bench.config.table.id, stream=log_stream, environ={})
    recall.prefork()  # as `firebet run` does, while this is the only thread
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started = time.monotonic()
    controller = bench.start(hold=True)
    if resuming:
        now = controller.status()
        print(
            f"firebet sim: resuming the table journaled in {bench.state_dir} (hand {now['hand']}, "
            f"{count(now['rolls'], 'roll')} so far); firebet sim --fresh starts a new one",
            file=sys.stderr,
            flush=True,
        )
    bench.release()
    console = Console()
    live = console.is_terminal and args.rolls is None and not args.plain
    try:
        if bench.script:
            threading.Thread(target=bench.run_script, name="sim script", daemon=True).start()
        if live:
            said = ""
            # whole frames on the alternate screen, drawn by this loop only: never half a frame
            with (
                _cbreak() as keys,
                Live(console=console, screen=True, auto_refresh=False) as view,
            ):
                while not stop.is_set():
                    view.update(
                        render_status(
                            controller.status(),
                            bench.recent,
                            bench.settlements,
                            footer(bench, said),
                            held_how="keys h, x or X",
                            height=console.size.height,
                            width=console.size.width,
                        ),
                        refresh=True,
                    )
                    if keys:
                        ch = _read_keys(1, 0.12)
                        if ch == "q" and bench.manual is None:
                            break
                        if ch:
                            said = bench.key(ch if ch == "X" else ch.lower())
                    else:
                        stop.wait(0.12)
                    if bench.done():
                        break
        else:
            printed = 0
            while True:
                finished = stop.is_set() or bench.done()
                bench.changed.wait(0.2)
                bench.changed.clear()
                for line in bench.lines[printed:]:
                    print(line, flush=True)
                printed = len(bench.lines)
                if finished:
                    break
    finally:
        bench.stop()
        recall.drop_spares()
        logging.getLogger().removeHandler(handler)
        log_stream.close()
    print(summary(bench, time.monotonic() - started))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "sim",
        help="the controller with a simulated reader and mock pins, drawn live",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--seed", type=paths.whole, metavar="N", help="seed for dice and players")
    p.add_argument(
        "--interval",
        type=paths.seconds,
        metavar="S",
        help="seconds between rolls (default 1.0; with --rolls, as fast as the ACKs come)",
    )
    p.add_argument(
        "--rolls", type=paths.whole, metavar="N", help="stop after N rolls and print a summary"
    )
    p.add_argument("--script", metavar="F", help="replay-format script: rolls through the reader")
    p.add_argument("--no-bets", action="store_true", help="no simulated players' fire bets")
    p.add_argument("--plain", action="store_true", help="plain lines instead of the live table")
    p.add_argument(
        "--broker",
        metavar="URL",
        help="publish to the floor broker at mqtt://host:port (overrides [floor] broker)",
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="a new table: move the state directory's old journal aside (to DIR.<time>)",
    )
    paths.add_location_options(p)
    p.set_defaults(func=run)
