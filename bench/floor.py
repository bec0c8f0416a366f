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

``--publisher recorded`` measures the floor alone in a flood, with the tables' CPU out of
the way (on one box the simulated tables take the cores the floor needs, and the lag they
measure is a backlog's age): each table's records are made first (a real journal played
by the same dealer, read back through the link's fold and message makers, so the floor
checks them as a table's), then one process publishes them on one MQTT connection at
``--rate`` records a second, round the tables, each with its ``state`` after it. It
prints the records per second published and ingested, the lag from publish to the
console's live update (p50, p99, max), the floor's CPU over the flood, and the same
records lost, stored twice and second-opinion counts. No realistic phase, no broker
restart.

    python bench/floor.py --publisher recorded [--tables 200] [--rate 430] [--flood-s 20]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import logging
import math
import os
import random
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker import Broker, die_with_parent  # noqa: E402  (bench/broker.py)

from controller.core.commands import Bet, Command, Roll  # noqa: E402
from controller.core.config import FloorConfig  # noqa: E402
from controller.core.engine import Engine  # noqa: E402
from controller.journal import Journal, recover  # noqa: E402
from controller.link.fold import LinkFold  # noqa: E402
from controller.link.link import FloorLink  # noqa: E402
from controller.wire.messages import (  # noqa: E402
    event_message,
    online_message,
    parse_command,
    state_message,
    topics,
)
from controller.wire.mqtt import connect, make_client, no_delay  # noqa: E402

# mosquitto without persistence: a restart loses what it held (the hard case)
BURST_S = 0.005  # recorded: the publisher sleeps only when this far ahead of its schedule
BROKER_SETTINGS = "persistence false\nmax_inflight_messages 1000\nmax_queued_messages 0\n"


class Dealer:
    """One simulated table's dealer: a journal and the rules engine, fed bets and rolls."""

    def __init__(self, folder: Path, rng: random.Random) -> None:
        folder.mkdir(parents=True)
        self.engine = Engine()
        self.journal = Journal(folder / "journal.db", durable=False)
        self.replay = recover(self.journal, self.engine.rules).replay
        self.rng = rng
        self.lock = threading.Lock()

    def status(self) -> dict[str, Any]:
        """The table's status as its ``state`` message carries it."""
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
        """Journal one command."""
        with self.lock:
            self._journal(command)

    def _journal(self, command: Command) -> None:
        outcome = self.engine.apply(self.replay.state, command)
        self.journal.append(command, outcome.state)
        self.replay.resume(outcome.state)


class Table(Dealer):
    """One simulated table: a dealer and a floor link."""

    def __init__(self, name: str, folder: Path, broker: str, rng: random.Random) -> None:
        super().__init__(folder, rng)
        self.name = name
        self.committed: dict[int, float] = {}
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

    def apply(self, command: Command) -> None:
        """Journal one command (from the writer, or the floor's confirm) and wake the link."""
        with self.lock:
            self._journal(command)
            self.committed[self.journal.last_record] = time.time()
        self.link.wake()
        self.link.state_changed()


class Console:
    """A client of the floor's ``/events``: when each table's record reached the console."""

    def __init__(self, url: str) -> None:
        self.seen: list[tuple[str, int, float]] = []
        where = urllib.parse.urlsplit(url)
        self._http = http.client.HTTPConnection(where.hostname or "", where.port, timeout=600)
        self._http.request("GET", "/events")
        self._stream = self._http.getresponse()
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

    def wait_for(self, heads: dict[str, int], deadline_s: float = 30.0) -> None:
        """Wait until a live update has shown each table's record ``heads[table]`` (or the
        deadline)."""
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            shown: dict[str, int] = {}
            for name, record, _ in list(self.seen):
                shown[name] = max(shown.get(name, 0), record)
            if all(shown.get(name, 0) >= head for name, head in heads.items()):
                return
            time.sleep(0.1)

    def close(self) -> None:
        """End the stream at once (a close alone waits for the reader's next line)."""
        if self._http.sock is not None:
            with contextlib.suppress(OSError):
                self._http.sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)
        self._http.close()


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


# --- the recorded publisher: the tables' messages made first, then only published ---------

Recording = dict[str, list[tuple[int, str, str]]]  # table -> (record, event, state after it)


def record_tables(names: list[str], records: int, folder: Path, seed: int) -> Recording:
    """Each table's first ``records`` records as its floor link publishes them: a real
    journal played by a :class:`Dealer`, read back in order, each record's ``event``
    message with the events the link's fold derives (``event_message``), and the
    ``state`` message of the table after it (``state_message``)."""
    out: Recording = {}
    logging.getLogger("firebet.journal").setLevel(logging.ERROR)  # "a new table", N times
    for i, name in enumerate(names):
        dealer = Dealer(folder / name, random.Random(seed + i))
        states: dict[int, str] = {}
        for _ in range(records):
            dealer.play()
            states[dealer.journal.last_record] = state_message(dealer.status())
        reader = Journal(dealer.journal.path, read_only=True)
        try:
            reader.attach()
            fold = LinkFold(dealer.engine.rules)
            messages: list[tuple[int, str, str]] = []
            while batch := reader.batch(messages[-1][0] if messages else 0, 1000):
                for rec in batch:
                    event = event_message(name, rec, fold.events(reader, rec))
                    messages.append((rec.record, event, states.get(rec.record, "")))
        finally:
            reader.close()
            dealer.journal.close()
        out[name] = messages
    return out


def cpu_s(pid: int) -> float:
    """The CPU seconds (user + system) a running process has used (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def publisher(args: argparse.Namespace) -> int:
    """Publish a recording (``--publish``) on one MQTT connection: every table's ``online``
    and first ``state`` at once, then from ``--start`` the records round the tables at
    ``--rate`` records a second (each with its table's ``state`` after it, as the link sends
    it), noting when each went out; the report, then connected until SIGTERM."""
    recording: Recording = {
        name: [(int(r), e, st) for r, e, st in messages]
        for name, messages in json.loads(Path(args.publish).read_text()).items()
    }
    login = FloorConfig(broker=args.broker)
    # SIGTERM (from the bench, or its death) is taken by sigwait at the end: blocked here,
    # before paho's thread starts, so no thread takes it and no handler runs under a lock
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    resends: list[str] = []
    client = make_client(login, "bench-publisher")
    client.on_socket_open = no_delay
    client.max_inflight_messages_set(1000)

    def heard(c: Any, userdata: Any, message: Any) -> None:  # the floor's resend or confirm
        try:
            resends.append(f"{message.topic}: {parse_command(message.payload)!r}")
        except Exception as exc:  # a command the table would refuse is worth a line too
            resends.append(f"{message.topic}: {exc}")

    client.on_message = heard
    connect(client, login, keepalive=15, wait=True)
    client.loop_start()
    prefix = login.topic_prefix
    for name, messages in recording.items():
        t = topics(prefix, name)
        client.subscribe(t["command"], qos=1)
        client.publish(t["online"], online_message("bench", 0), qos=1, retain=True)
        client.publish(t["state"], messages[0][2], qos=1, retain=True)
    order: list[tuple[dict[str, str], str, int, str, str]] = []  # round the tables,
    for j in range(max(len(m) for m in recording.values())):  # each one's records in order
        for name, messages in recording.items():
            if j < len(messages):
                order.append((topics(prefix, name), name, *messages[j]))
    time.sleep(max(0.0, args.start - time.time()))
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.time()
    published: dict[str, dict[int, float]] = {name: {} for name in recording}
    for k, (t, name, record, event, state) in enumerate(order):
        wait = start + k / args.rate - time.time()
        if wait > BURST_S:  # a few ms' worth go out together: fewer wake-ups, less CPU
            time.sleep(wait)
        published[name][record] = time.time()
        client.publish(t["event"], event, qos=1)
        client.publish(t["state"], state, qos=1, retain=True)
    end = time.time()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    report = {
        "heads": {name: messages[-1][0] for name, messages in recording.items()},
        "published": published,
        "span": [start, end],
        "cpu_s": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime),
    }
    out = Path(args.out)
    partial = out.with_name(out.name + ".part")
    partial.write_text(json.dumps(report))
    os.replace(partial, out)
    signal.sigwait({signal.SIGTERM})  # connected (a resend would reach it) until the end
    Path(args.out + ".commands").write_text("\n".join(resends))
    client.disconnect()
    client.loop_stop()
    return 0


def held_all(url: str, heads: dict[str, int], deadline_s: float = 300) -> float:
    """Wait until the floor holds every table's records up to ``heads`` (or the deadline);
    when that was."""
    deadline = time.monotonic() + deadline_s
    while True:
        held = contiguous(url)
        behind = sum(max(0, heads[k] - held.get(k, 0)) for k in heads)
        if behind == 0 or time.monotonic() > deadline:
            return time.time()
        time.sleep(0.2)


def lost_and_twice(heads: dict[str, int], db: Path) -> tuple[int, int]:
    """(records a table journaled that the floor lacks, records the floor stored twice)."""
    counts = floor_counts(db)
    lost = sum(max(0, heads[k] - counts.get(k, (0, 0))[1]) for k in heads)
    twice = sum(rows - distinct for rows, distinct in counts.values())
    return lost, twice


def lag_line(values: list[float]) -> str:
    """p50, p99 and max of some latencies, in ms."""
    return (
        f"p50 {percentile(values, 50) * 1000:.0f} ms, p99 {percentile(values, 99) * 1000:.0f} ms, "
        f"max {max(values, default=float('nan')) * 1000:.0f} ms ({len(values)} records)"
    )


def run_tables(
    args: argparse.Namespace, work: Path, broker: Broker, url: str, console: Console
) -> tuple[dict[str, int], list[subprocess.Popen[bytes]]]:
    """The simulated tables in worker processes: a realistic phase, then a flood (with the
    broker restarted in its middle); their figures printed. The heads, and the workers
    (to be ended once the floor holds everything)."""
    names = [f"T{i:03d}" for i in range(args.tables)]
    groups = [names[i : i + args.per_process] for i in range(0, len(names), args.per_process)]
    print(f"  {args.tables} tables in {len(groups)} worker processes", flush=True)
    t0 = time.time() + 5.0 + 0.05 * args.tables  # the links connect and announce themselves
    t1 = t0 + args.realistic_s
    t2 = t1 + args.flood_s
    workers = []
    for i, group in enumerate(groups):
        out = work / f"worker-{i}.json"
        with open(work / f"worker-{i}.log", "wb") as log:
            workers.append((out, subprocess.Popen(
                [sys.executable, __file__, "--worker", "--names", ",".join(group),
                 "--broker", broker.url, "--work", str(work), "--out", str(out),
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
    t3 = held_all(url, heads)
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
    return heads, [proc for _, proc in workers]


def run_recorded(
    args: argparse.Namespace, work: Path, broker: Broker, url: str, console: Console, floor: int
) -> tuple[dict[str, int], list[subprocess.Popen[bytes]]]:
    """The flood from a recording (made before the floor started), published by one cheap
    process at ``--rate``: the floor's own figures, with the tables' CPU out of the way.
    The heads, and the publisher (to be ended once the floor holds everything)."""
    recording = work / "recording.json"
    out = work / "publisher.json"
    t1 = time.time() + 2.0 + 0.02 * args.tables  # the publisher connects, announces them all
    with open(work / "publisher.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--publish", str(recording), "--broker", broker.url,
             "--out", str(out), "--start", repr(t1), "--rate", repr(args.rate)],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent,
        )  # fmt: skip
    time.sleep(max(0.0, t1 - time.time()))
    floor_cpu0 = cpu_s(floor)
    while not out.exists():
        if proc.poll() is not None:
            raise SystemExit(f"floor bench: the publisher died: {work / 'publisher.log'}")
        time.sleep(0.2)
    report = json.loads(out.read_text())
    heads = {name: int(head) for name, head in report["heads"].items()}
    published = {
        name: {int(k): v for k, v in times.items()} for name, times in report["published"].items()
    }
    start, end = report["span"]
    total = sum(len(times) for times in published.values())
    t3 = held_all(url, heads)
    floor_cpu = cpu_s(floor) - floor_cpu0
    console.wait_for(heads)  # the last frame's updates too, or the worst lags go uncounted
    flood = latencies(published, console.seen, start, end + 1.0)
    print(f"flood (recorded): {total / (end - start):.0f} records/s published for "
          f"{end - start:.1f} s ({total} records, {len(heads)} tables, one connection; "
          f"the publisher's CPU {report['cpu_s']:.1f} s)")  # fmt: skip
    print(f"  floor ingested {total / (t3 - start):.0f} records/s (the flood's records over the "
          f"time until it held them all, {t3 - end:.1f} s after the last publish)")  # fmt: skip
    print(f"  publish -> console live update: {lag_line(flood)}")
    print(f"  floor CPU {floor_cpu:.1f} s over those {t3 - start:.1f} s "
          f"({floor_cpu / (t3 - start):.0%} of one core)")  # fmt: skip
    return heads, [proc]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--tables", type=int, default=200)
    ap.add_argument(
        "--publisher", choices=("tables", "recorded"), default="tables",
        help="tables: simulated tables journal and publish (default); recorded: their\n"
        "messages are made first, then one process publishes them at --rate",
    )  # fmt: skip
    ap.add_argument("--rate", type=float, default=430.0, help="recorded: records a second")
    ap.add_argument("--per-process", type=int, default=50, help="tables per worker process")
    ap.add_argument("--realistic-s", type=float, default=20.0)
    ap.add_argument("--flood-s", type=float, default=20.0)
    ap.add_argument("--pace", type=float, default=10.0, help="seconds between a table's commands")
    ap.add_argument("--no-restart", action="store_true", help="do not restart the broker")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--names", "--broker", "--work", "--out", "--publish"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.publish:
        return publisher(args)
    if args.tables < 1 or args.rate <= 0 or args.flood_s <= 0:
        ap.error("--tables, --rate and --flood-s must be above 0")

    work = Path(tempfile.mkdtemp(prefix="floor-bench-"))
    print(f"floor bench: {args.publisher}, work {work}, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)  # fmt: skip
    if args.publisher == "recorded":
        names = [f"T{i:03d}" for i in range(args.tables)]
        each = math.ceil(args.rate * args.flood_s / args.tables)
        began = time.monotonic()
        recording = record_tables(names, each, work / "tables", args.seed)
        (work / "recording.json").write_text(json.dumps(recording))
        print(f"  recorded {each} records of each of {args.tables} tables (real journals, the "
              f"link's messages) in {time.monotonic() - began:.1f} s", flush=True)  # fmt: skip
    broker = Broker(work, BROKER_SETTINGS)
    broker.start()
    (work / "floor.toml").write_text(
        f'[floor]\nbroker = "{broker.url}"\nclient_id = "floor-bench"\n'
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
    print(f"  broker {broker.url}, console {url}", flush=True)
    console = Console(url)
    if args.publisher == "recorded":
        heads, children = run_recorded(args, work, broker, url, console, floor.pid)
    else:
        heads, children = run_tables(args, work, broker, url, console)
    rss, hwm = rss_mb(floor.pid)
    lost, twice = lost_and_twice(heads, work / "floor" / "floor.db")
    print(f"floor memory: {rss:.0f} MB resident at the end, {hwm:.0f} MB at most")
    print(f"records lost: {lost}    stored twice: {twice}    "
          f"(of {sum(heads.values())} in {len(heads)} journals)")  # fmt: skip
    checked, unchecked, audits = second_opinion(url, work / "floor" / "floor.db")
    print(f"second opinion: {checked} command records came with the table's events; "
          f"not checked: {unchecked}; audit alerts: {audits}")  # fmt: skip
    console.close()
    for proc in children:
        proc.terminate()
    for proc in children:
        proc.wait(timeout=60)
    commands = work / "publisher.json.commands"
    if commands.exists() and commands.read_text():
        asked = commands.read_text().splitlines()
        print(f"the floor sent {len(asked)} commands to the tables, first: {asked[0]}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
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
