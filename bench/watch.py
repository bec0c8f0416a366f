"""Benchmark: the journal watch's cost, and the ACK's tail while it sweeps a long journal.

    .venv/bin/python bench/watch.py [--sizes 1000,100000,1000000] [--idle 30] [--rolls 1000]

For each size a journal is built by the bulk path of ``bench/journal.py`` and the real
service started on it (``firebet run`` on a pty, as ``bench/latency.py``). Once its full
check after ready is done, the service idles ``--idle`` seconds: the CPU it used then
(user + system, every thread: the process's own CPU clock, to the ns) a second, and the watch's
own share (``status --json`` ``journal_watch.cpu_s``, its thread's CPU time), with the
watch's bound for that length (``journal_watch.sweep_s``). Then ``--rolls`` ROLL -> ACK
round trips while the watch sweeps (p50 / p99 / max). Figures, not assertions.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from journal import build  # bench/journal.py
from service_on_pty import ServiceOnPty, cpu_seconds  # bench/service_on_pty.py


def one(size: int, idle_s: float, rolls: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="firebet-watch-"))
    state = work / "state"
    state.mkdir()
    built = build(state / "journal.db", size)
    config = work / "table.toml"
    config.write_text('[journal]\nkey_file = "journal.key"\n', encoding="utf-8")
    service = ServiceOnPty(work, state, config, heartbeat_every=400)
    try:
        deadline = time.monotonic() + 1800
        while service.ask("status").get("journal_check") == "running":
            if time.monotonic() > deadline:
                raise SystemExit("the full check after ready did not finish in 30 minutes")
            time.sleep(1)
        # (a service from before the watch reported itself: its process's CPU only)
        none = {"cpu_s": 0.0, "screened": 0, "sweep_s": "?"}
        before, watch0 = cpu_seconds(service.proc.pid), service.ask("status").get("journal_watch")
        time.sleep(idle_s)
        after, watch1 = cpu_seconds(service.proc.pid), service.ask("status").get("journal_watch")
        watch0 = watch0 if isinstance(watch0, dict) else none
        watch1 = watch1 if isinstance(watch1, dict) else none
        process_ms = (after - before) / idle_s * 1000
        watch_ms = (watch1["cpu_s"] - watch0["cpu_s"]) / idle_s * 1000
        screened = (watch1["screened"] - watch0["screened"]) / idle_s
        latencies = sorted(ms for ms in (service.roll(timeout_s=5) for _ in range(rolls)) if ms)
    finally:
        service.stop()
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    print(f"{size:,} records (built in {built:.0f} s): watch bound {watch1['sweep_s']} s")
    print(
        f"  idle {idle_s:.0f} s: the service's CPU {process_ms:.2f} ms a second, of which the "
        f"watch {watch_ms:.2f} ms ({screened:.0f} records a second screened, "
        f"{watch_ms * 1000 / max(screened, 1):.1f} us a record)"
    )
    if latencies:
        print(
            f"  {len(latencies)} rolls while it sweeps: ROLL -> ACK p50 {p(0.5):.2f} ms, "
            f"p99 {p(0.99):.2f} ms, max {latencies[-1]:.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--idle", type=float, default=30.0, help="seconds idle to measure")
    parser.add_argument("--rolls", type=int, default=1000)
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        one(size, args.idle, args.rolls)


if __name__ == "__main__":
    main()
