"""Journal benchmark: size a record, verify speed, durable append latency, start-up time.

    .venv/bin/python bench/journal.py [--sizes 1000,100000,1000000] [--appends 2000]

For each size a journal is built with a bulk path (many records a transaction)
that writes the very rows, seals and snapshots :meth:`Journal.append` would;
then a fresh process recovers it (start-up to ready), checks it from genesis
(``journal verify``: records a second) and appends durably one record a
transaction (p50 / p99 / max; the head file written, its sync on its own thread),
and times apart the head file's write and sync (off the roll path since the
syncer thread took it). Size is the file
after the writer closed, divided by the records.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.core.commands import Roll  # noqa: E402
from controller.core.engine import Engine  # noqa: E402
from controller.journal import Journal, canonical, now_ms, recover  # noqa: E402
from controller.journal.files import write_head_new  # noqa: E402
from controller.journal.key import read_key  # noqa: E402
from controller.journal.recipe import encode_command, iso, pack_body, seal  # noqa: E402

SNAPSHOT_EVERY = 1000

PROBE = """
import json, sys, time
t0 = time.perf_counter()
from controller.core.config import FireBetRules
from controller.journal import Journal, recover, verify
from controller.core.commands import Roll
rules = FireBetRules()
journal = Journal(sys.argv[1], snapshot_every=int(sys.argv[2]))
recovered = recover(journal, rules)
ready = time.perf_counter() - t0
assert recovered.halted is None, recovered.halted
replay = recovered.replay
lat, head = [], []
seq = ((recovered.state.reader_seq or 0) + 1) % 65536
for i in range(int(sys.argv[3])):
    cmd = Roll(1 + i % 6, 1 + (i * 5) % 6, seq=(seq + i) % 65536)
    t = time.perf_counter()
    outcome = replay.engine.apply(replay.state, cmd)  # decided, then journaled: the service's
    journal.append(cmd, outcome.state)
    replay.resume(outcome.state)
    lat.append(time.perf_counter() - t)
writer = journal._head
for i in range(int(sys.argv[3])):
    t = time.perf_counter()
    writer.write(journal._key, journal.last_record, journal._last_mac)
    writer.wait_synced()
    head.append(time.perf_counter() - t)
checkpoints = journal.checkpoints
journal.close()
from controller.journal.parallel import workers
seconds, cpu = {}, {}
for processes in (1, workers()):
    t, c = time.perf_counter(), time.process_time()
    with Journal(sys.argv[1], read_only=True) as reader:
        recover(reader, rules)
        report = verify(reader, rules, processes=processes)
    seconds[processes] = time.perf_counter() - t
    cpu[processes] = time.process_time() - c
    assert report.ok, report.problems[:3]
print(json.dumps({"ready": ready, "lat": lat, "head": head, "checkpoints": checkpoints,
                  "verify1": seconds[1], "verify": seconds[workers()], "cores": workers(),
                  "verify1_cpu": cpu[1],
                  "records": report.records}))
"""


def build(path: Path, size: int, seed: int = 1) -> float:
    """A valid journal of ``size`` records (record 1 is the start record); seconds taken."""
    t0 = time.perf_counter()
    engine = Engine()
    with Journal(path, snapshot_every=SNAPSHOT_EVERY) as journal:
        state = recover(journal, engine.rules).state
        last = journal.last()
        assert last is not None
        first, prev = last.record + 1, bytes.fromhex(last.hash)
    key = read_key(path.with_name("journal.key"))
    rnd = random.Random(seed)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    rows, snaps = [], []
    at = now_ms()
    number = first - 1
    for number in range(first, size + 1):
        command = Roll(
            rnd.randint(1, 6), rnd.randint(1, 6), seq=number % 65536, actor="reader", at=iso(at)
        )
        state = engine.apply(state, command).state
        body = encode_command(command, at)
        text = canonical(state.to_dict()) if number % SNAPSHOT_EVERY == 0 else None
        mac = seal(key, prev, number, at, "reader", "command", body, text)
        stored = pack_body(body)  # as the journal stores it (format 3)
        rows.append((number, at, "reader", "command", stored, int(text is not None), mac))
        if text is not None:
            snaps.append((number, state.hand, text))
        prev = mac
        at += 500 + rnd.randrange(20_000)
        if len(rows) >= 20_000:
            db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            db.executemany("INSERT INTO snapshots VALUES (?, ?, ?)", snaps)
            rows, snaps = [], []
    db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO snapshots VALUES (?, ?, ?)", snaps)
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    write_head_new(path.with_name("journal.db.head"), key, number, prev)
    return time.perf_counter() - t0


def probe(path: Path, appends: int) -> dict[str, float]:
    """Recover, append and verify in a fresh process; the figures."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), str(SNAPSHOT_EVERY), str(appends)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(done.stdout)
    lat, head = sorted(data["lat"]), sorted(data["head"])

    def p99(xs: list[float]) -> float:
        return xs[min(len(xs) - 1, int(len(xs) * 0.99))]

    return {
        "ready": data["ready"],
        "p50": statistics.median(lat),
        "p99": p99(lat),
        "max": lat[-1],
        "head50": statistics.median(head),
        "head99": p99(head),
        "checkpoints": data["checkpoints"],
        "verify_rate": data["records"] / data["verify"],
        "verify1_rate": data["records"] / data["verify1"],
        "verify1_cpu_rate": data["records"] / data["verify1_cpu"],
        "cores": data["cores"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--dir", help="where to build the journals (default: a temp dir)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(
            f"{'records':>9} {'build s':>7} {'B/record':>8} {'ready ms':>8} "
            f"{'verify rec/s 1 core':>19} {'per CPU s':>9} {'all':>9} {'append p50':>10} "
            f"{'p99':>6} {'max ms':>6} "
            f"{'head p50':>8} {'p99 ms':>6} {'ckpts':>5}"
        )
        for size in sizes:
            path = Path(tmp) / str(size) / "journal.db"
            built = build(path, size)
            per_record = path.stat().st_size / size
            r = probe(path, args.appends)
            print(
                f"{size:>9} {built:>7.1f} {per_record:>8.0f} {r['ready'] * 1e3:>8.1f} "
                f"{r['verify1_rate']:>19,.0f} {r['verify1_cpu_rate']:>9,.0f} "
                f"{r['verify_rate']:>9,.0f} "
                f"{r['p50'] * 1e3:>10.3f} {r['p99'] * 1e3:>6.2f} "
                f"{r['max'] * 1e3:>6.2f} {r['head50'] * 1e3:>8.3f} {r['head99'] * 1e3:>6.2f} "
                f"{r['checkpoints']:>5.0f}",
                flush=True,
            )
    print(
        f"(B/record: journal.db after the writer closed, over the records; ready: process "
        f"start to recovered, imports included; append: {args.appends} durable appends, "
        "synchronous=FULL, WAL, checkpoints on a background thread; head: the head file's "
        "write + fdatasync alone, the sync on the head's own thread, off the roll path; "
        "verify: a full check from genesis, "
        "on one core (wall, and per CPU second of the process) and on every core as "
        "`firebet journal verify` does (wall); load average at the end: "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
