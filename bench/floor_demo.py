"""``make floor-demo``: a floor in one command.

Starts mosquitto on a free local port, ``firebet floor`` with a demo surveillance login,
and six simulated tables (each its own journal and floor link) that bet and roll every
couple of seconds; table DEMO-3 has a hot shooter who makes every point, so the 5th-point
alert comes up within a minute. Open the printed address, log in, confirm the alert, and
watch the table journal it. Ctrl-C stops everything and removes the demo's files.

    python bench/floor_demo.py [--tables 6] [--http 127.0.0.1:8080] [--pace 2]
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from broker import Broker, die_with_parent  # bench/broker.py
from floor import BROKER_SETTINGS, ROOT, Table  # bench/floor.py

from controller.floor.passwords import hash_password

USER, PASSWORD = "surveillance", "demo-password"
HOT = [(2, 2), (2, 2), (2, 3), (2, 3), (3, 3), (3, 3), (4, 4), (4, 4), (4, 5), (4, 5),
       (5, 5), (5, 5), (4, 4), (3, 4)]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tables", type=int, default=6)
    ap.add_argument("--http", default="127.0.0.1:8080", help="where the console listens")
    ap.add_argument("--pace", type=float, default=2.0, help="seconds between a table's commands")
    args = ap.parse_args()
    stop = threading.Event()

    def ctrl_c(_sig: int, _frame: object) -> None:  # the demo stops itself, in order
        stop.set()

    signal.signal(signal.SIGINT, ctrl_c)
    signal.signal(signal.SIGTERM, ctrl_c)
    work = Path(tempfile.mkdtemp(prefix="floor-demo-"))
    broker = Broker(work, BROKER_SETTINGS)
    floor: subprocess.Popen[str] | None = None
    tables: list[Table] = []
    try:
        broker.start(own_session=True)
        url = f"mqtt://127.0.0.1:{broker.port}"
        (work / "floor.toml").write_text(
            f'[floor]\nbroker = "{url}"\nclient_id = "floor-demo"\n'
            f'[users]\n{USER} = "{hash_password(PASSWORD)}"\n'
        )
        with open(work / "floor.log", "wb") as log:
            floor = subprocess.Popen(
                [sys.executable, "-m", "controller", "floor", "--config", str(work / "floor.toml"),
                 "--state-dir", str(work / "floor"), "--http", args.http],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                start_new_session=True, preexec_fn=die_with_parent,
            )  # fmt: skip
        assert floor.stdout is not None
        line = floor.stdout.readline()
        if "console at " not in line:
            print(f"firebet floor did not start: {(work / 'floor.log').read_text()[-2000:]}",
                  file=sys.stderr)  # fmt: skip
            return 1
        console = line.split("console at ")[1].split()[0]
        rng = random.Random(7)
        for i in range(1, args.tables + 1):
            tables.append(Table(f"DEMO-{i}", work / f"DEMO-{i}", url, rng))
            tables[-1].link.start()
        print(f"\n  floor console: {console}  (shift figures: {console}figures)")
        print(f"  surveillance login: {USER} / {PASSWORD}")
        print(f"  {len(tables)} tables on mosquitto {url}; files in {work} (removed at the end)")
        print("  Ctrl-C stops the demo\n", flush=True)
        hot = tables[min(2, len(tables) - 1)]
        step = args.pace / len(tables)
        n = thrown = 0
        while not stop.is_set() and floor.poll() is None:
            table = tables[n % len(tables)]
            if table is not hot:
                table.play()
            elif table.play(HOT[thrown % len(HOT)]):
                thrown += 1
            n += 1
            stop.wait(step)
        failed = floor.poll() is not None and not stop.is_set()
    finally:
        # the tables first (the broker still up: they say goodbye), then the floor, then
        # the broker, then the files
        for t in tables:
            t.link.stop(timeout=2.0)
            t.journal.close()
        if floor is not None:
            if floor.poll() is None:
                floor.terminate()
            floor.wait(timeout=30)
            if floor.stdout is not None:
                floor.stdout.close()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    if failed:
        print("firebet floor stopped by itself; the demo ends", file=sys.stderr)
        return 1
    print(f"floor demo stopped: tables, floor and mosquitto ended, {work} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
