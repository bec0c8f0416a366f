"""Benchmark: the service's CPU budget (SPEC section 7), from its own rusage.

    .venv/bin/python bench/cpu.py [--rolls 2000] [--idle-s 30] [--paced-rolls 150]
                                  [--paced-every 0.2] [--state-dir DIR] [--json]

CPU time (user + system, every thread, read from /proc/PID/stat) is the figure a busy
machine measures best: other processes' load delays the service but barely changes the
CPU it uses. One ``firebet run`` on a pseudo-terminal (this process plays the dice reader,
mock pins, its own notify socket standing in for systemd) is measured for:

- **start-up**: CPU from exec to READY=1 with no bytecode cache (a fresh, empty
  ``PYTHONPYCACHEPREFIX`` and ``PYTHONDONTWRITEBYTECODE``: every module compiled), and
  apart, the CPU of the copies the service forks of itself meanwhile (the full check's
  and the history reader's processes, ``recall.prefork``);
- **per roll**: CPU over ``--rolls`` ROLL -> ACK round trips at full speed, divided by
  the rolls (a HB after every 400, as a reader sends), after the post-READY work is done;
- **idle**: CPU a second over ``--idle-s`` seconds of heartbeats (one HB a second, the
  reader protocol's least) after those rolls, so the table shows points made (the newest
  marker's pulse is the lamps' idle work, as at a table); then again between shooters,
  after a seven-out, every marker dark;
- **per roll at a table's pace**: ``--paced-rolls`` rolls one every ``--paced-every``
  seconds, the CPU a second of the idle table between shooters (measured just before)
  taken off: each such roll wakes the service's threads from sleep, which rolls back to
  back do not (the newest marker's pulse, lit for part of those rolls, counts to them);
- **peak RSS** (VmHWM) after all of it.

Each is printed beside its budget. The work the service starts after READY in a child
process (the full check, :mod:`controller.service.recall`) is shown apart: it is reaped
into the service's children's rusage.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from service_on_pty import (  # bench/service_on_pty.py
    ServiceOnPty,
    children_cpu_seconds,
    cpu_seconds,
    peak_rss_mb,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGET_ROLL_MS = 0.4  # CPU a roll, frame to ACK (SPEC section 7)
BUDGET_IDLE_MS = 1.0  # CPU a second at idle
BUDGET_START_S = 1.0  # CPU from exec to READY, no bytecode cache
BUDGET_RSS_MB = 60.0


WARM_UP_S = 5.0  # heartbeats after the rolls before the idle second is counted


def beats(service: ServiceOnPty, seconds: float) -> float:
    """Send one heartbeat a second for ``seconds``; the seconds it took."""
    t0 = beat = time.monotonic()
    while time.monotonic() - t0 < seconds:
        service.heartbeat()
        beat += 1.0
        time.sleep(max(0.0, beat - time.monotonic()))
    return time.monotonic() - t0


def markers(service: ServiceOnPty) -> str:
    """What the point markers show now (``status --json``), e.g. ``6 pulse, 8 on``."""
    shown = service.ask("status").get("markers")
    return "unknown" if shown is None else json.dumps(shown)


def lit(status: dict) -> bool:
    """Whether a point marker is lit in ``status`` (``status --json``)."""
    return any(m.get("lit") for m in (status.get("markers") or {}).values())


def seven_out(service: ServiceOnPty) -> bool:
    """Throw until the shooter sevens out (a point, when none is on, then a 7): every
    marker dark, as between shooters. Whether it got there."""
    for _ in range(4):
        now = service.ask("status")
        if now and not lit(now):
            return True
        service.roll(timeout_s=30, dice=(3, 4) if now.get("point") else (2, 2))
    return False


def acknowledge(service: ServiceOnPty) -> bool:
    """Acknowledge the surveillance alert when one is open (its lamp blinks until then: a
    5th point among the random rolls). Whether none is open after it."""
    if service.ask("status").get("surveillance_alert"):
        service.ask("ack")
    return not service.ask("status").get("surveillance_alert")


def make_point(service: ServiceOnPty) -> bool:
    """Throw until the shooter makes a point (a come-out 4 when no point is on, then the
    point's number): the newest point's marker pulses, as at a table after a point made.
    Whether a marker is lit after it."""
    for _ in range(3):
        point = service.ask("status").get("point")
        if point:
            service.roll(timeout_s=30, dice=(point // 2, point - point // 2))
            break
        service.roll(timeout_s=30, dice=(2, 2))
    return lit(service.ask("status"))


def settle(pid: int, quiet_s: float = 2.0, deadline_s: float = 120.0) -> float:
    """Wait until the service has used almost no CPU for ``quiet_s`` (the post-READY work
    done, or ``deadline_s`` passed); returns the seconds waited."""
    started = time.monotonic()
    last = cpu_seconds(pid) + children_cpu_seconds(pid)
    while time.monotonic() - started < deadline_s:
        time.sleep(quiet_s)
        now = cpu_seconds(pid) + children_cpu_seconds(pid)
        if now - last < 0.02 * quiet_s:
            break
        last = now
    return time.monotonic() - started


def paced(service: ServiceOnPty, rolls: int, every_s: float) -> tuple[int, float, float]:
    """Throw ``rolls`` rolls, one every ``every_s`` seconds, as at a table: the rolls
    ACKed, the seconds it took and the service's CPU seconds meanwhile."""
    pid = service.proc.pid
    before, done = cpu_seconds(pid), 0
    started = due = time.monotonic()
    for _ in range(rolls):
        if service.roll(timeout_s=30) is None:
            break
        done += 1
        due += every_s
        time.sleep(max(0.0, due - time.monotonic()))
    return done, time.monotonic() - started, cpu_seconds(pid) - before


def measure(
    work: Path,
    rolls: int,
    idle_s: float,
    state: Path | None = None,
    paced_rolls: int = 0,
    paced_every_s: float = 0.2,
) -> dict:
    """Start-up, idle and per-roll CPU of one service started on ``state`` (or a fresh
    one); with ``paced_rolls``, the CPU of a roll at a table's pace too."""
    config = work / "table.toml"
    if not config.exists():
        config.write_text('[journal]\nkey_file = "journal.key"\n', encoding="utf-8")
    pycache = Path(tempfile.mkdtemp(dir=work, prefix="pycache-"))  # empty: nothing cached
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(pycache)}
    service = ServiceOnPty(work, state or work / "state", config, heartbeat_every=400, env=env)
    pid = service.proc.pid
    figures: dict = {
        "ready_cpu_s": service.ready_cpu_s,
        "ready_copies_cpu_s": service.ready_copies_cpu_s,
        "ready_wall_s": service.ready_s,
    }
    try:
        settled = settle(pid)
        figures["after_ready_children_cpu_s"] = children_cpu_seconds(pid)
        figures["settled_s"] = settled
        # per roll, at full speed
        before, done = cpu_seconds(pid), 0
        latencies: list[float] = []
        for _ in range(rolls):
            ms = service.roll(timeout_s=30)
            if ms is None:
                break
            latencies.append(ms)
            done += 1
        figures["roll_cpu_ms"] = (cpu_seconds(pid) - before) * 1000 / max(1, done)
        figures["rolls"] = done
        latencies.sort()
        figures["ack_p50_ms"] = latencies[len(latencies) // 2] if latencies else float("nan")
        figures["ack_p99_ms"] = (
            latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
            if latencies
            else float("nan")
        )
        # idle after the rolls and a point made (the newest point's marker pulses, as at a
        # table): one HB a second, the first few seconds not counted (the watch screens the
        # rolls' records, the checkpoint copies them: their cost belongs to the rolls)
        figures["pulsing"] = make_point(service)
        figures["quiet"] = acknowledge(service)  # no alert lamp blinking
        beats(service, WARM_UP_S)
        figures["markers"] = markers(service)
        before = cpu_seconds(pid)
        elapsed = beats(service, idle_s)
        figures["idle_ms_a_s"] = (cpu_seconds(pid) - before) * 1000 / elapsed
        figures["idle_s"] = elapsed
        # and between shooters: the same, every marker dark
        figures["dark"] = seven_out(service) and acknowledge(service)
        beats(service, WARM_UP_S)
        before = cpu_seconds(pid)
        elapsed = beats(service, idle_s)
        figures["idle_dark_ms_a_s"] = (cpu_seconds(pid) - before) * 1000 / elapsed
        if paced_rolls > 0:
            done, elapsed, cpu = paced(service, paced_rolls, paced_every_s)
            idle = figures["idle_dark_ms_a_s"] / 1000 * elapsed
            figures["paced_rolls"] = done
            figures["paced_every_s"] = paced_every_s
            figures["paced_ms_a_s"] = cpu * 1000 / elapsed
            figures["paced_roll_cpu_ms"] = (cpu - idle) * 1000 / max(1, done)
        figures["peak_rss_mb"] = peak_rss_mb(pid)
    finally:
        service.stop()
    return figures


def verdict(value: float, budget: float) -> str:
    return "within" if value <= budget else "OVER"


def show(f: dict) -> None:
    pulse = "the newest marker pulsing" if f["pulsing"] else "no marker lit: no point was made"
    if not f["quiet"]:
        pulse += ", the surveillance alert's lamp blinking (its ack failed)"
    print("The service's CPU (its own rusage, every thread), beside SPEC section 7's budget")
    print(
        f"  per roll ({f['rolls']:,} rolls, full speed): {f['roll_cpu_ms']:.3f} ms CPU"
        f"   budget {BUDGET_ROLL_MS} ms  {verdict(f['roll_cpu_ms'], BUDGET_ROLL_MS)}"
        f"   (ACK p50 {f['ack_p50_ms']:.2f} ms, p99 {f['ack_p99_ms']:.2f} ms wall)"
    )
    print(
        f"  idle, {pulse} ({f['idle_s']:.0f} s of heartbeats, 1 a second):"
        f" {f['idle_ms_a_s']:.2f} ms CPU a"
        f" second   budget {BUDGET_IDLE_MS} ms/s  {verdict(f['idle_ms_a_s'], BUDGET_IDLE_MS)}"
    )
    print(f"    (the markers meanwhile: {f['markers']})")
    dark = (
        "every marker dark, no alert open"
        if f["dark"]
        else "a marker lit or an alert open: the seven-out or the ack failed"
    )
    print(
        f"  idle between shooters ({dark}): {f['idle_dark_ms_a_s']:.2f} ms CPU a second"
        f"   budget {BUDGET_IDLE_MS} ms/s  {verdict(f['idle_dark_ms_a_s'], BUDGET_IDLE_MS)}"
    )
    if "paced_rolls" in f:
        print(
            f"  per roll at a table's pace ({f['paced_rolls']:,} rolls, one every"
            f" {f['paced_every_s']:g} s): {f['paced_roll_cpu_ms']:.3f} ms CPU, the idle"
            f" table's taken off ({f['paced_ms_a_s']:.2f} ms CPU a second in all;"
            " no budget: the budget's roll is the one above, back to back)"
        )
    print(
        f"  start-up, exec to READY, no bytecode cache: {f['ready_cpu_s']:.2f} s CPU"
        f" ({f['ready_wall_s']:.2f} s wall)   budget {BUDGET_START_S} s"
        f"  {verdict(f['ready_cpu_s'], BUDGET_START_S)}"
    )
    print(
        f"    and the copies it made of itself before READY (the full check's and the history"
        f" reader's processes): {f['ready_copies_cpu_s']:.3f} s CPU"
    )
    print(
        f"  peak RSS: {f['peak_rss_mb']:.1f} MB   budget {BUDGET_RSS_MB:.0f} MB"
        f"  {verdict(f['peak_rss_mb'], BUDGET_RSS_MB)}"
    )
    print(
        f"  after READY, in child processes (the full check): "
        f"{f['after_ready_children_cpu_s']:.2f} s CPU"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rolls", type=int, default=2000, help="rolls timed (>= 1,000)")
    parser.add_argument("--idle-s", type=float, default=30.0, help="seconds of heartbeats")
    parser.add_argument(
        "--paced-rolls", type=int, default=150, help="rolls at a table's pace (0: none)"
    )
    parser.add_argument(
        "--paced-every", type=float, default=0.2, help="seconds between two paced rolls"
    )
    parser.add_argument("--state-dir", help="an existing state directory (default: fresh)")
    parser.add_argument("--json", action="store_true", help="the figures as one JSON object")
    args = parser.parse_args()
    if args.paced_rolls and args.paced_every <= 0:
        parser.error("--paced-every must be more than 0 seconds")
    work = Path(tempfile.mkdtemp(prefix="firebet-cpu-"))
    figures = measure(
        work,
        args.rolls,
        args.idle_s,
        Path(args.state_dir) if args.state_dir else None,
        args.paced_rolls,
        args.paced_every,
    )
    if args.json:
        print(json.dumps(figures))
    else:
        show(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
