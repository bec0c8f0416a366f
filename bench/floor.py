"""Floor benchmark: N simulated tables, one mosquitto, one ``firebet floor``.

Each simulated table has its own journal (the real ``controller.journal`` store) and its
own floor link (the real ``controller.link.link.FloorLink``, its own MQTT connection),
driven by one writer thread that plays dealer commands (bets, rolls) on the tables in
turn. The floor runs as a real ``firebet floor`` process. Two phases:

* realistic: every table journals a command every ``--pace`` seconds (default 10 s;
  a busy craps table throws about one roll in 20 to 40 seconds);
* flood: the writer journals as fast as it can, and the broker is stopped and started
  again in the middle (``--no-restart`` to skip that).

It prints records per second ingested, the latency from a table's journal commit to
the console's live update (the ``table`` server-sent event that carries the record,
read by a client of ``/events``), the floor's memory, and after the broker restart the
records lost and stored twice (both must be 0), read from the floor's database.

    python bench/floor.py [--tables 200] [--realistic-s 20] [--flood-s 20] [--pace 10]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker import Broker  # noqa: E402  (bench/broker.py)

from controller.core.commands import Bet, Command, Roll  # noqa: E402
from controller.core.config import FloorConfig  # noqa: E402
from controller.core.engine import Engine  # noqa: E402
from controller.journal import Journal, recover  # noqa: E402
from controller.link.link import FloorLink  # noqa: E402

# mosquitto without persistence: a restart loses what it held (the hard case)
BROKER_SETTINGS = "persistence false\nmax_inflight_messages 1000\nmax_queued_messages 0\n"


class Table:
    """One simulated table: a journal, the rules engine and a floor link."""

    def __init__(self, name: str, folder: Path, broker: str, rng: random.Random) -> None:
        self.name = name
        folder.mkdir(parents=True)
        self.engine = Engine()
        self.journal = Journal(folder / "journal.db", durable=False)
        self.replay = recover(self.journal, self.engine.rules).replay
        self.rng = rng
        self.committed: dict[int, float] = {}
        self.lock = threading.Lock()
        self.link = FloorLink(
            FloorConfig(broker=broker),
            name,
            self.journal.path,
            folder,
            status=self.status,
            post=self.apply,  # a confirm from the floor, as the service would take it
            program="bench",
            rules=self.engine.rules,
        )

    def status(self) -> dict[str, Any]:
        s = self.replay.state
        return {"mode": "running", "hand": s.hand, "point": s.point, "points": list(s.points)}

    def play(self, dice: tuple[int, int] | None = None) -> bool:
        """One dealer command: a bet when betting is open, else a roll (``dice`` or random);
        whether it was a roll."""
        state = self.replay.state
        command: Command
        if state.betting_open and len(state.bets) < 3:
            command = Bet(position=self.rng.randint(1, 16), amount=self.rng.randint(1, 5))
        else:
            d1, d2 = dice or (self.rng.randint(1, 6), self.rng.randint(1, 6))
            command = Roll(d1, d2, source="sim")
        self.apply(command)
        return isinstance(command, Roll)

    def apply(self, command: Command) -> None:
        """Journal one command (from the writer, or the floor's confirm) and wake the link."""
        with self.lock:
            outcome = self.engine.apply(self.replay.state, command)
            self.journal.append(command, outcome.state)
            self.replay.resume(outcome.state)
            self.committed[self.journal.last_record] = time.time()
        self.link.wake()
        self.link.state_changed()


class Console:
    """A client of the floor's ``/events``: when each table's record reached the console."""

    def __init__(self, url: str) -> None:
        self.seen: list[tuple[str, int, float]] = []
        self._stream = urllib.request.urlopen(url + "/events", timeout=600)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        event = ""
        try:
            for raw in self._stream:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "table":
                    data = json.loads(line[6:])
                    self.seen.append((data["table"], data["record"], time.time()))
        except (OSError, ValueError, AttributeError):  # closed under it at the end
            return

    def close(self) -> None:
        self._stream.close()


def latencies(
    committed: dict[str, dict[int, float]], seen: list[tuple[str, int, float]], since: float,
    until: float,
) -> list[float]:  # fmt: skip
    """Commit -> live update, for the records committed in [since, until)."""
    out: list[float] = []
    shown: dict[str, int] = {}
    for name, record, at in seen:
        times = committed.get(name)
        if times is None:
            continue
        for n in range(shown.get(name, 0) + 1, record + 1):
            t = times.get(n)
            if t is not None and since <= t < until:
                out.append(at - t)
        shown[name] = max(shown.get(name, 0), record)
    return out


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def floor_counts(db: Path) -> dict[str, tuple[int, int]]:
    """table -> (rows, distinct record numbers) in the floor's store."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT table_id, COUNT(*), COUNT(DISTINCT record) FROM records GROUP BY table_id"
        ).fetchall()
    finally:
        con.close()
    return {r[0]: (r[1], r[2]) for r in rows}


def second_opinion(url: str, db: Path) -> tuple[int, int, int]:
    """(command records stored with the table's events, records not checked, audit alerts)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (with_events,) = con.execute(
            "SELECT COUNT(*) FROM records WHERE kind = 'command' AND events IS NOT NULL"
        ).fetchone()
    finally:
        con.close()
    with urllib.request.urlopen(url + "/api/tables", timeout=30) as reply:
        unchecked = sum(t["unchecked_records"] for t in json.loads(reply.read()))
    with urllib.request.urlopen(url + "/api/alerts?all=1", timeout=30) as reply:
        audits = sum(1 for a in json.loads(reply.read()) if a["kind"] == "audit")
    return int(with_events), unchecked, audits


def contiguous(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url + "/api/tables", timeout=30) as reply:
        return {t["table"]: t["record"] for t in json.loads(reply.read())}


def worker(args: argparse.Namespace) -> int:
    """Some of the tables, in a process of their own (paho's select() wants fds < 1024, and
    one interpreter cannot keep hundreds of MQTT connections and a writer going)."""
    work = Path(args.work)
    rng = random.Random(args.seed)
    names = args.names.split(",")
    tables = [Table(n, work / "tables" / n, args.broker, rng) for n in names]
    for t in tables:
        t.link.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    time.sleep(max(0.0, args.start - time.time()))
    step = args.pace / len(tables)
    n = 0
    realistic_end = args.start + args.realistic_s
    while time.time() < realistic_end:
        tables[n % len(tables)].play()
        n += 1
        time.sleep(max(0.0, args.start + n * step - time.time()))
    flood_end = realistic_end + args.flood_s
    while time.time() < flood_end:
        tables[n % len(tables)].play()
        n += 1
    report = {t.name: {"head": t.journal.last_record, "committed": t.committed} for t in tables}
    out = Path(args.out)  # written whole beside it, then renamed: the bench reads it only
    partial = out.with_name(out.name + ".part")  # once it exists, so it is always complete
    partial.write_text(json.dumps(report))
    os.replace(partial, out)
    stop.wait()  # the links stay up until the floor holds everything
    for t in tables:
        t.link.stop(timeout=2.0)
        t.journal.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument("--per-process", type=int, default=50, help="tables per worker process")
    ap.add_argument("--realistic-s", type=float, default=20.0)
    ap.add_argument("--flood-s", type=float, default=20.0)
    ap.add_argument("--pace", type=float, default=10.0, help="seconds between a table's commands")
    ap.add_argument("--no-restart", action="store_true", help="do not restart the broker")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--names", "--broker", "--work", "--out"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    work = Path(tempfile.mkdtemp(prefix="floor-bench-"))
    broker = Broker(work, BROKER_SETTINGS)
    broker.start()
    url_broker = broker.url
    (work / "floor.toml").write_text(
        f'[floor]\nbroker = "{url_broker}"\nclient_id = "floor-bench"\n'
        "gap_grace_s = 1.0\nresend_every_s = 5.0\n"
    )
    floor_log = open(work / "floor.log", "wb")  # noqa: SIM115
    floor = subprocess.Popen(
        [sys.executable, "-m", "controller", "floor", "--config", str(work / "floor.toml"),
         "--state-dir", str(work / "floor"), "--http", "127.0.0.1:0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=floor_log, text=True,
    )  # fmt: skip
    assert floor.stdout is not None
    line = floor.stdout.readline()
    url = line.split("console at ")[1].split()[0].rstrip("/")
    names = [f"T{i:03d}" for i in range(args.tables)]
    groups = [names[i : i + args.per_process] for i in range(0, len(names), args.per_process)]
    print(
        f"floor bench: {args.tables} tables in {len(groups)} processes, broker {url_broker}, "
        f"console {url}, work {work}", flush=True,
    )  # fmt: skip
    console = Console(url)
    t0 = time.time() + 5.0 + 0.05 * args.tables  # the links connect and announce themselves
    t1 = t0 + args.realistic_s
    t2 = t1 + args.flood_s
    workers = []
    for i, group in enumerate(groups):
        out = work / f"worker-{i}.json"
        with open(work / f"worker-{i}.log", "wb") as log:
            workers.append((out, subprocess.Popen(
                [sys.executable, __file__, "--worker", "--names", ",".join(group),
                 "--broker", url_broker, "--work", str(work), "--out", str(out),
                 "--start", repr(t0), "--realistic-s", repr(args.realistic_s),
                 "--flood-s", repr(args.flood_s), "--pace", repr(args.pace),
                 "--seed", str(args.seed + i)],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            )))  # fmt: skip
    restarted = False
    if not args.no_restart:
        time.sleep(max(0.0, t1 + args.flood_s / 2 - time.time()))
        broker.stop()
        time.sleep(1.0)
        broker.start()
        restarted = True
    while not all(out.exists() for out, _ in workers):  # renamed into place when whole
        for out, proc in workers:
            if not out.exists() and proc.poll() is not None:
                for _, other in workers:
                    other.terminate()
                raise SystemExit(f"floor bench: worker {out.stem} died: {out.with_suffix('.log')}")
        time.sleep(0.2)
    reports: dict[str, Any] = {}
    for out, _ in workers:
        reports.update(json.loads(out.read_text()))
    heads = {name: r["head"] for name, r in reports.items()}
    committed = {
        name: {int(k): v for k, v in r["committed"].items()} for name, r in reports.items()
    }
    in_flood = sum(1 for times in committed.values() for t in times.values() if t1 <= t < t2)
    deadline = time.monotonic() + 300
    while True:
        held = contiguous(url)
        behind = sum(max(0, heads[k] - held.get(k, 0)) for k in heads)
        if behind == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    t3 = time.time()
    rss, hwm = rss_mb(floor.pid)
    counts = floor_counts(work / "floor" / "floor.db")
    total = sum(heads.values())
    lost = sum(max(0, heads[k] - counts.get(k, (0, 0))[1]) for k in heads)
    twice = sum(rows - distinct for rows, distinct in counts.values())
    real = latencies(committed, console.seen, t0 + 1, t1)
    flood = latencies(committed, console.seen, t1, t2)
    in_real = sum(1 for times in committed.values() for t in times.values() if t0 <= t < t1)
    print(f"realistic: {in_real / args.realistic_s:.0f} records/s journaled "
          f"({args.tables} tables, one command per table every {args.pace:g} s)")  # fmt: skip
    print(f"  commit -> console live update: p50 {percentile(real, 50) * 1000:.0f} ms, "
          f"p99 {percentile(real, 99) * 1000:.0f} ms ({len(real)} records)")  # fmt: skip
    restart = ", broker restarted in the middle" if restarted else ""
    print(f"flood: {in_flood / args.flood_s:.0f} records/s journaled by the tables for "
          f"{args.flood_s:g} s{restart}")  # fmt: skip
    print(f"  floor ingested {in_flood / (t3 - t1):.0f} records/s (the flood's records over the "
          f"time until it held them all, {t3 - t2:.1f} s after the last commit)")  # fmt: skip
    print(f"  commit -> console live update: p50 {percentile(flood, 50) * 1000:.0f} ms, "
          f"p99 {percentile(flood, 99) * 1000:.0f} ms ({len(flood)} records)")  # fmt: skip
    print(f"floor memory: {rss:.0f} MB resident at the end, {hwm:.0f} MB at most")
    print(f"records lost: {lost}    stored twice: {twice}    (of {total} in {len(heads)} journals)")
    checked, unchecked, audits = second_opinion(url, work / "floor" / "floor.db")
    print(f"second opinion: {checked} command records came with the table's events; "
          f"not checked: {unchecked}; audit alerts: {audits}")  # fmt: skip
    console.close()
    for _, proc in workers:
        proc.terminate()
    for _, proc in workers:
        proc.wait(timeout=60)
    floor.terminate()
    floor.wait(timeout=30)
    floor_log.close()
    broker.stop()
    if lost == 0 and twice == 0:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work} for a look")
    return 0 if lost == 0 and twice == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
