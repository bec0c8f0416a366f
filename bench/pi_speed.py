"""Benchmark: the figures of bench/latency.py, journal.py and replay.py at a Pi's speed.

    sudo .venv/bin/python bench/pi_speed.py [--cpu 0.1] [--periods 100,10] [--records 1000000]
                                            [--lines 1000000] [--rolls 1000] [--no-full-speed]

A Raspberry Pi Zero 2 W (four Cortex-A53 cores at 1 GHz) runs Python roughly ten times
slower per core than this development machine (docs, SPEC section 7). It is stood for by
a **cgroup CPU quota**: each measured process (the service, ``journal verify``,
``replay``) runs in a cgroup of its own that may use ``--cpu`` of one core (0.1: 10 ms of CPU in
every 100 ms period, systemd's ``CPUQuota=`` period and so what an installed table gets;
and 1 ms in every 10 ms, a finer stand-in: ``--periods`` in ms, each measured in turn;
cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``), pinned to
one core (so ``journal verify`` checks on one process, where a Pi has four cores: its
figure is the one-core one). The bench's own side (the dice reader on the pseudo-terminal)
runs unlimited. Needs root (cgroups); ``systemd-run --scope -p CPUQuota=10% -p
AllowedCPUs=0 CMD`` is the documented equivalent on a machine with systemd.

The quota is not a slower CPU: within a period work runs at full speed until its 1 ms is
used, then waits for the next period. So a roll that needs 0.3 ms of CPU is done at full
speed or waits up to 9 ms (90 ms under a 100 ms period), where a Pi would take 3 ms
every time: p50 reads better and the tail worse than on a Pi. Throughputs (verify,
replay) are the quota's fair share.

Printed, limited and (unless ``--no-full-speed``) at full speed in the same run:
ROLL -> ACK p50 / p99 / max beside the frame's own wire time at 9600 baud, start-up to
READY on a ``--records`` journal, ``journal verify`` records/s, ``replay`` of ``--lines``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the benches beside this one
import journal as journal_bench
import replay as replay_bench
from latency import wire_ms
from service_on_pty import ServiceOnPty, cpu_seconds

from drivers import codec

ROOT = Path(__file__).resolve().parent.parent
PERIODS_MS = (100, 10)  # systemd's CPUQuota= period, then a finer one


@dataclass(frozen=True)
class CpuLimit:
    """A cgroup of its own with a CPU quota; :meth:`prefix` runs a command inside it."""

    folder: Path
    version: int

    def prefix(self) -> list[str]:
        """``sh -c`` that moves itself into the cgroup, pins itself to one core, then runs."""
        procs = self.folder / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > {procs} && exec taskset -c 0 "$@"', "sh"]


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="ascii")


@contextmanager
def cpu_limit(share: float, period_ms: int = PERIODS_MS[0]) -> Iterator[CpuLimit | None]:
    """A cgroup limited to ``share`` of one core in every ``period_ms`` (None: ``share`` is
    0, no limit)."""
    if share <= 0:
        yield None
        return
    period_us = period_ms * 1000
    quota = max(1000, int(period_us * share))  # the kernel's smallest quota is 1 ms
    name = f"firebet-pi-speed-{os.getpid()}"
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").exists() and "cpu" in (v2 / "cgroup.controllers").read_text():
        folder, version = v2 / name, 2
        subtree = v2 / "cgroup.subtree_control"
        if "cpu" not in subtree.read_text().split():
            _write(subtree, "+cpu")
    elif (Path("/sys/fs/cgroup/cpu") / "cpu.cfs_quota_us").exists():
        folder, version = Path("/sys/fs/cgroup/cpu") / name, 1
    else:
        raise SystemExit(
            "pi_speed: no cgroup CPU controller here (cgroup v2 cpu.max or v1 "
            "cpu.cfs_quota_us); on a systemd machine: systemd-run --scope -p CPUQuota=10% "
            "-p AllowedCPUs=0 .venv/bin/python bench/journal.py (and the others)"
        )
    try:
        folder.mkdir()
    except PermissionError as exc:
        raise SystemExit(f"pi_speed: cannot make the cgroup {folder}: run as root") from exc
    try:
        if version == 2:
            _write(folder / "cpu.max", f"{quota} {period_us}")
        else:
            _write(folder / "cpu.cfs_period_us", str(period_us))
            _write(folder / "cpu.cfs_quota_us", str(quota))
        yield CpuLimit(folder, version)
    finally:
        deadline = time.monotonic() + 30
        while True:
            try:
                folder.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    print(f"pi_speed: the cgroup {folder} is still busy: left", file=sys.stderr)
                    break
                time.sleep(0.1)


def timed(argv: list[str], limit: CpuLimit | None) -> tuple[float, float, int, str]:
    """(wall s, CPU s, lines printed, last line) of one process, inside ``limit``; its
    output is counted as it comes, not kept."""
    command = [*(limit.prefix() if limit else []), *argv]
    lines, last = 0, b""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        for line in proc.stdout:
            lines, last = lines + 1, line
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"pi_speed: {' '.join(argv)} failed: {err.read().decode()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, lines, last.decode()


def rolls(state: Path, config: Path, work: Path, count: int, limit: CpuLimit | None) -> dict:
    """Start the service on ``state``; start-up to READY and ``count`` ROLL -> ACK times."""
    prefix = limit.prefix() if limit else None
    service = ServiceOnPty(work, state, config, heartbeat_every=400, prefix=prefix)
    latencies: list[float] = []
    cpu_before = cpu_seconds(service.proc.pid)
    try:
        for _ in range(count):
            ms = service.roll(timeout_s=30)
            if ms is None:
                break
            latencies.append(ms)
        memory = service.rss_mb()
        cpu_ms = (cpu_seconds(service.proc.pid) - cpu_before) * 1000 / max(1, len(latencies))
    finally:
        service.stop()
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    return {
        "ready_s": service.ready_s,
        "rolls": len(latencies),
        "p50": pick(0.5),
        "p99": pick(0.99),
        "max": latencies[-1],
        "rss_mb": memory,
        "cpu_ms_a_roll": cpu_ms,
    }


def measure(args: argparse.Namespace, work: Path, limit: CpuLimit | None) -> dict:
    state, config = work / "state", work / "table.toml"
    figures: dict = {}
    figures.update(
        rolls(state, config, Path(tempfile.mkdtemp(dir=work, prefix="service-")), args.rolls, limit)
    )
    wall, cpu, _, out = timed(
        [sys.executable, "-m", "controller", "journal", "verify", "--config", str(config),
         "--state-dir", str(state)],
        limit,
    )  # fmt: skip
    records = int(out.split("journal OK: ")[1].split(" records")[0].replace(",", ""))
    figures["verify_records"] = records
    figures["verify_s"] = wall
    figures["verify_rate"] = records / wall
    figures["verify_cpu_s"] = cpu
    script = work / "script.txt"
    wall, cpu, hands, _ = timed(
        [sys.executable, "-m", "controller", "replay", str(script), "--json"], limit
    )
    figures["replay_s"] = wall
    figures["replay_cpu_s"] = cpu
    figures["replay_lines_per_s"] = args.lines / wall
    figures["replay_hands"] = hands
    figures["cores"] = 1 if limit else len(os.sched_getaffinity(0))
    return figures


def show(title: str, f: dict, wire: float, args: argparse.Namespace) -> None:
    print(title)
    print(
        f"  ROLL -> ACK, {f['rolls']} rolls on a {args.records:,}-record journal: "
        f"p50 {f['p50']:.2f} ms, p99 {f['p99']:.2f} ms, max {f['max']:.2f} ms; the frame's "
        f"own wire time at 9600 baud {wire:.1f} ms (p99 = {f['p99'] / wire:.0%} of it)"
    )
    print(f"  the service's CPU a roll (every thread): {f['cpu_ms_a_roll']:.2f} ms")
    print(
        f"  start-up to READY on that journal: {f['ready_s']:.2f} s; service {f['rss_mb']:.1f} MB"
    )
    print(
        f"  journal verify: {f['verify_records']:,} records in {f['verify_s']:.1f} s = "
        f"{f['verify_rate']:,.0f} records/s ({f['cores']} core{'s' if f['cores'] > 1 else ''})"
    )
    print(
        f"  replay --json of {args.lines:,} lines: {f['replay_s']:.1f} s "
        f"({f['replay_lines_per_s']:,.0f} lines/s, {f['replay_hands']:,} hands; "
        f"memory: bench/replay.py)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cpu", type=float, default=0.1, help="share of one core (0.1)")
    parser.add_argument(
        "--periods",
        default=",".join(map(str, PERIODS_MS)),
        help="quota periods in ms, each measured in turn (100: systemd's CPUQuota=; 10)",
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--rolls", type=int, default=1000)
    parser.add_argument("--no-full-speed", action="store_true", help="only the limited run")
    parser.add_argument("--dir", help="where to build the journal (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="the figures as one JSON object")
    args = parser.parse_args()
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="firebet-pi-"))
    state = work / "state"
    state.mkdir(parents=True, exist_ok=True)
    (work / "table.toml").write_text('[table]\nid = "PI-BENCH"\n', encoding="utf-8")
    journal = state / "journal.db"
    if not journal.exists():
        print(f"building a {args.records:,}-record journal in {state} ...", flush=True)
        took = journal_bench.build(journal, args.records)
        print(f"  built in {took:.0f} s", flush=True)
    replay_bench.write_script(work / "script.txt", args.lines, seed=1)
    rng = random.Random(1)
    wire = statistics.mean(
        wire_ms(codec.encode_roll(i, rng.randint(1, 6), rng.randint(1, 6))) for i in range(1000)
    )
    try:
        periods = [int(p) for p in args.periods.split(",")]
    except ValueError:
        parser.error(f"--periods {args.periods}: whole milliseconds, comma-separated (100,10)")
    if any(not 1 <= p <= 1000 for p in periods):
        parser.error(f"--periods {args.periods}: each between 1 and 1000 ms")
    results = {}
    for period in periods:
        with cpu_limit(args.cpu, period) as limit:
            results[f"limited_{period}ms"] = measure(args, work, limit)
    if not args.no_full_speed:
        results["full_speed"] = measure(args, work, None)
    if args.json:
        print(json.dumps({"cpu": args.cpu, "wire_ms": wire, **results}))
        return 0
    for period in periods:
        show(
            f"At a Pi's speed: {args.cpu:g} of one core in every {period} ms period (cgroup "
            "quota), pinned to one core",
            results[f"limited_{period}ms"],
            wire,
            args,
        )
    if "full_speed" in results:
        show("At this machine's full speed, same run", results["full_speed"], wire, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
