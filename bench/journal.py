"""Journal benchmark: durable append latency and start-up (recovery) time by journal size.

    .venv/bin/python bench/journal.py [--sizes 1000,100000,1000000] [--appends 1000]

Journals are built with a bulk path (many records a transaction) that produces
the very records, chain and snapshots :meth:`Journal.append` would; then a fresh
process recovers each one and appends durably, one transaction a record.
"""

from __future__ import annotations

import argparse
import json
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
from controller.journal.store import (  # noqa: E402
    Journal,
    canonical,
    normalise,
    now_iso,
    record_hash,
    snapshot_hash,
)

SNAPSHOT_EVERY = 1000

PROBE = """
import json, sys, time
t0 = time.perf_counter()
from controller.core.engine import Engine
from controller.journal.store import Journal
from controller.core.commands import Roll
engine = Engine()
journal = Journal(sys.argv[1], snapshot_every=int(sys.argv[2]))
recovered = journal.recover(engine)
ready = time.perf_counter() - t0
assert recovered.halted is None, recovered.halted
lat = []
seq = ((recovered.state.reader_seq or 0) + 1) % 65536
for i in range(int(sys.argv[3])):
    cmd = Roll(1 + i % 6, 1 + (i * 5) % 6, seq=(seq + i) % 65536)
    t = time.perf_counter()
    journal.apply(engine, cmd)
    lat.append(time.perf_counter() - t)
journal.close()
print(json.dumps({"ready": ready, "lat": lat}))
"""


def build(path: Path, size: int, seed: int = 1) -> float:
    """A valid journal of ``size`` records (record 1 is the start record); seconds taken."""
    t0 = time.perf_counter()
    engine = Engine()
    with Journal(path, snapshot_every=SNAPSHOT_EVERY) as journal:
        state = journal.recover(engine).state
        last, prev = journal.last_record, journal.last().hash  # type: ignore[union-attr]
    rnd = random.Random(seed)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    rows, snaps = [], []
    at = now_iso()
    for number in range(last + 1, size + 1):
        command = Roll(rnd.randint(1, 6), rnd.randint(1, 6), seq=number % 65536, actor="bench")
        outcome = engine.apply(state, command)
        state = outcome.state
        payload = {"command": command.to_dict(), "events": [e.to_dict() for e in outcome.events]}
        text = canonical(normalise(payload))
        h = record_hash(prev, number, at, "bench", "command", text)
        rows.append((number, at, "bench", "command", text, prev, h))
        prev = h
        if number % SNAPSHOT_EVERY == 0:
            st = canonical(state.to_dict())
            snaps.append((number, h, st, snapshot_hash(h, st)))
        if len(rows) >= 20_000:
            db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            db.executemany("INSERT INTO snapshots VALUES (?, ?, ?, ?)", snaps)
            rows, snaps = [], []
    db.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.executemany("INSERT INTO snapshots VALUES (?, ?, ?, ?)", snaps)
    db.execute("COMMIT")
    db.close()
    return time.perf_counter() - t0


def probe(path: Path, appends: int) -> dict[str, float]:
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), str(SNAPSHOT_EVERY), str(appends)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - t0
    data = json.loads(done.stdout)
    lat = sorted(data["lat"])
    return {
        "ready": data["ready"],
        "wall": wall,
        "p50": statistics.median(lat),
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "max": lat[-1],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--dir", help="where to build the journals (default: a temp dir)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        print(
            f"{'records':>10} {'build s':>8} {'file MB':>8} {'ready ms':>9} "
            f"{'append p50 ms':>14} {'p99 ms':>8} {'max ms':>8}"
        )
        for size in sizes:
            path = Path(tmp) / str(size) / "journal.db"
            built = build(path, size)
            r = probe(path, args.appends)
            mb = path.stat().st_size / 1e6
            print(
                f"{size:>10} {built:>8.1f} {mb:>8.1f} {r['ready'] * 1e3:>9.1f} "
                f"{r['p50'] * 1e3:>14.3f} {r['p99'] * 1e3:>8.3f} {r['max'] * 1e3:>8.3f}",
                flush=True,
            )
    print(f"(ready = process start to recovered, incl. imports; snapshot_every={SNAPSHOT_EVERY};")
    print(f" {args.appends} durable appends each, synchronous=FULL, WAL)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
