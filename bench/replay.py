"""Benchmark: ``firebet replay`` of long scripts, its time and peak memory.

    .venv/bin/python bench/replay.py [--lines 100000,1000000] [--seed 1]

Writes a seeded script of each length (rolls, with wagers, voids and surrenders mixed
in as a table would see them), runs ``firebet replay FILE --json`` on it as its own
process, and prints the wall time, the process's CPU time (user + system: the figure to compare on a
shared machine), the settled hands it printed and its peak resident memory. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_script(path: Path, lines: int, seed: int) -> None:
    """``lines`` script lines: 96% rolls, 3% wagers, then voids and surrenders."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        f.write("# bench/replay.py\n")
        for _ in range(lines - 1):
            r = rng.random()
            if r < 0.03:
                f.write(f"bet {rng.randint(1, 16)} {rng.randint(1, 5)}\n")
            elif r < 0.035:
                f.write("void\n")
            elif r < 0.037:
                f.write("surrender\n")
            else:
                f.write(f"{rng.randint(1, 6)} {rng.randint(1, 6)}\n")


def replay(path: Path) -> tuple[float, float, int, int, int]:
    """(wall seconds, CPU seconds, settled hands printed, refusals, peak RSS in kB) of one
    replay process."""
    with tempfile.TemporaryFile() as refusals_file:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "controller", "replay", str(path), "--json"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=refusals_file,  # a file, not a pipe: nothing blocks while stdout is read
        )
        assert proc.stdout is not None
        hands = sum(1 for _ in proc.stdout)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise SystemExit(f"replay failed with exit {proc.returncode}")
        refusals_file.seek(0)
        refusals = refusals_file.read().count(b"refused")
    cpu = usage.ru_utime + usage.ru_stime
    return seconds, cpu, hands, refusals, usage.ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", default="100000,1000000")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for lines in (int(n) for n in args.lines.split(",")):
            path = Path(tmp) / f"script-{lines}.txt"
            write_script(path, lines, args.seed)
            seconds, cpu, hands, refusals, rss_kb = replay(path)
            print(
                f"firebet replay --json, {lines:>9,} lines: {seconds:6.2f} s "
                f"({lines / seconds:>9,.0f} lines/s; {cpu:6.2f} s CPU), "
                f"peak RSS {rss_kb / 1024:5.1f} MB; "
                f"{hands:,} settled hands, {refusals:,} refusals"
            )


if __name__ == "__main__":
    main()
