"""Benchmark: the rolls right after READY on a long journal, while the full check runs.

    .venv/bin/python bench/after_ready.py [--records 1000000] [--every 0.2] [--after 60]
                                          [--history S] [--dir D] [--json]
    sudo .venv/bin/python bench/after_ready.py --cpu 0.1 --period 100 ...   # at a Pi's speed

Builds (or reuses, under ``--dir``) a journal of ``--records`` records, starts the real
service (``firebet run``) on a copy of it on a pseudo-terminal, and from READY on throws a
roll every ``--every`` seconds (a paced table, not a burst) for as long as the service's
full journal check runs (``status --json`` ``journal_check`` is ``running``; it runs in a
process of its own at idle priority, controller/service/recall.py) and ``--after``
seconds more; with ``--history S``, a dealer asks for the last 20 hands ``S`` seconds
after the check ended (a reading client: SPEC section 6, no client slows the game), and
the rolls from the request to 2 s after its answer are shown apart. With ``--cpu`` the
service (and so the check it starts) runs in a cgroup with that share of one core in
every ``--period`` ms, pinned to one core, as ``bench/pi_speed.py`` does (root: the
issue-31 figure, 10% with systemd's 100 ms period). Prints the ROLL -> ACK figures while
the check ran and after it, when the check ended, and the CPU the service and the
check's process used (rusage). SPEC section 7: no roll over 20 ms; nothing started after
READY competes with a roll. Figures, not assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from pi_speed import CpuLimit, cpu_limit
from service_on_pty import ServiceOnPty, children_cpu_seconds, cpu_seconds

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import journal as journal_bench  # noqa: E402  (bench/journal.py)

from controller.control.client import ControlClient  # noqa: E402

BUDGET_MAX_MS = 20.0  # no single roll over this (SPEC section 7)
HISTORY_HANDS = 20  # the hands a dealer's history request asks for (--history)
POLL_S = 1.0  # how often the bench asks whether the check still runs


def figures(latencies: list[float]) -> dict[str, float]:
    """p50, p99, max and how many over the budget, of ``latencies`` (ms)."""
    if not latencies:
        return {"rolls": 0}
    xs = sorted(latencies)
    return {
        "rolls": len(xs),
        "p50": statistics.median(xs),
        "p99": xs[min(len(xs) - 1, int(len(xs) * 0.99))],
        "max": xs[-1],
        "over": sum(1 for x in xs if x > BUDGET_MAX_MS),
    }


def synced_copy(source: Path, target: Path) -> None:
    """``source`` copied to ``target``, every file synced: the copy's dirty pages written
    back now, not under the rolls (a 100 MB write-back was the slowest ACKs of a run)."""
    shutil.copytree(source, target)
    for path in target.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def bare_syncs(folder: Path, count: int = 200) -> dict[str, float]:
    """The disk's own figure in this hour: ``count`` 256-byte ``pwrite`` + ``fdatasync``
    of a small file, paced as the rolls are not (back to back); p50/p99/max in ms."""
    path = folder / "sync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    times = []
    try:
        for i in range(count):
            t = time.perf_counter()
            os.pwrite(fd, bytes(256), (i % 8) * 256)
            os.fdatasync(fd)
            times.append((time.perf_counter() - t) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return figures(times)


class DiskWatch:
    """A bare 256-byte ``pwrite`` + ``fdatasync`` every ``every`` s on a thread, timed, for
    as long as the rolls go: was the disk itself slow when a roll was? (10 small syncs a
    second: a load of its own, much lighter than the table's.)"""

    def __init__(self, folder: Path, every: float = 0.1) -> None:
        self.samples: list[tuple[float, float]] = []  # (monotonic start, ms)
        self._stop = threading.Event()
        self._path = folder / "disk-watch"
        self._every = every
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while not self._stop.wait(self._every):
                t = time.monotonic()
                os.pwrite(fd, bytes(256), 0)
                os.fdatasync(fd)
                self.samples.append((t, (time.monotonic() - t) * 1000))
        finally:
            os.close(fd)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def worst_near(self, t: float, ms: float) -> float | None:
        """The slowest bare sync that overlapped a roll sent at ``t`` taking ``ms`` (None:
        none ran meanwhile)."""
        end = t + ms / 1000
        return max((d for s, d in self.samples if s <= end and s + d / 1000 >= t), default=None)


class HistoryAsker:
    """One ``history`` request (``hands`` hands) from a thread and a client of its own, as a
    dealer's ``firebet history`` asks, while the rolls go on: when it was asked and
    answered, and whether it was answered ok."""

    def __init__(self, socket_path: Path, hands: int) -> None:
        self.asked = time.monotonic()
        self.answered: float | None = None
        self.ok: bool | None = None
        self._thread = threading.Thread(target=self._ask, args=(socket_path, hands), daemon=True)
        self._thread.start()

    def _ask(self, socket_path: Path, hands: int) -> None:
        try:
            with ControlClient(str(socket_path), timeout=60.0) as client:
                self.ok = bool(client.request("history", hands=hands).get("ok"))
        except Exception:  # the figure says it was not answered
            self.ok = False
        self.answered = time.monotonic()

    def join(self) -> None:
        self._thread.join(timeout=120)


def measure(
    state: Path,
    work: Path,
    every: float,
    after: float,
    limit: CpuLimit | None = None,
    history_at: float | None = None,
) -> dict[str, object]:
    """Rolls paced every ``every`` s from READY until the full check ends and ``after``
    s more (the service inside ``limit`` when given); with ``history_at``, a dealer's
    ``history`` request that many seconds after the check ended; the figures."""
    config = work / "table.toml"
    config.write_text('[journal]\nkey_file = "journal.key"\n', encoding="utf-8")
    prefix = limit.prefix() if limit else None
    service = ServiceOnPty(work, state, config, heartbeat_every=400, prefix=prefix)
    pid = service.proc.pid
    ready_cpu = cpu_seconds(pid)
    during: list[float] = []
    later: list[float] = []
    lost = 0
    check_s: float | None = None
    outcome = "running"
    t0 = time.monotonic()
    next_roll, next_poll = t0, t0 + POLL_S
    disk = DiskWatch(work)
    slow: list[tuple[float, float, float]] = []  # (s after READY, ms, the disk's worst)
    sent_later: list[tuple[float, float]] = []  # (sent, ms) of the rolls after the check
    history: HistoryAsker | None = None
    try:
        with ControlClient(str(service.socket)) as client:
            while check_s is None or time.monotonic() < t0 + check_s + after:
                time.sleep(max(0.0, next_roll - time.monotonic()))
                sent = time.monotonic()
                ms = service.roll(timeout_s=5)
                if ms is not None and ms > BUDGET_MAX_MS:
                    slow.append((sent - t0, ms, sent))
                if ms is None:
                    lost += 1
                else:
                    (during if check_s is None else later).append(ms)
                    if check_s is not None:
                        sent_later.append((sent, ms))
                next_roll += every
                if (
                    history is None
                    and history_at is not None
                    and check_s is not None
                    and time.monotonic() >= t0 + check_s + history_at
                ):
                    history = HistoryAsker(service.socket, HISTORY_HANDS)
                if check_s is None and time.monotonic() >= next_poll:
                    # asked right after an ACK, so the answer is out before the next roll
                    outcome = client.request("status").get("journal_check") or "none"
                    if outcome != "running":
                        check_s = time.monotonic() - t0
                    next_poll += POLL_S
        if history is not None:
            history.join()
        cpu = cpu_seconds(pid) - ready_cpu
        check_cpu = children_cpu_seconds(pid)
        rss = service.rss_mb()
    finally:
        disk.stop()
        service.stop()
    around: dict[str, object] | None = None
    if history is not None:  # the rolls sent from the request until 2 s after its answer
        end = (history.answered or time.monotonic()) + 2.0
        around = {
            "answered_s": None if history.answered is None else history.answered - history.asked,
            "ok": history.ok,
            **figures([ms for sent, ms in sent_later if history.asked <= sent <= end]),
        }
    return {
        "history": around,
        "slow": [(at, ms, disk.worst_near(sent, ms)) for at, ms, sent in slow],
        "ready_s": service.ready_s,
        "check": outcome,
        "check_s": check_s,
        "during": figures(during),
        "after": figures(later),
        "all": figures(during + later),
        "lost": lost,
        "service_cpu_s": cpu,
        "check_cpu_s": check_cpu,
        "rss_mb": rss,
        "load": os.getloadavg(),
    }


def show(name: str, f: dict[str, float]) -> str:
    if not f.get("rolls"):
        return f"  {name}: no rolls"
    return (
        f"  {name}: {f['rolls']:.0f} rolls, ACK p50 {f['p50']:.2f} ms, p99 {f['p99']:.2f} ms, "
        f"max {f['max']:.2f} ms, {f['over']:.0f} over {BUDGET_MAX_MS:.0f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--every", type=float, default=0.2, help="seconds between rolls")
    parser.add_argument("--after", type=float, default=60.0, help="seconds after the check")
    parser.add_argument("--dir", help="where to build (and keep) the journal")
    parser.add_argument("--json", action="store_true", help="the figures as one JSON object")
    parser.add_argument("--cpu", type=float, default=0.0, help="share of one core (root)")
    parser.add_argument("--period", type=int, default=100, help="the quota's period, ms")
    parser.add_argument(
        "--history",
        type=float,
        metavar="S",
        help="S seconds after the check ends, a dealer asks for the last 20 hands' history "
        "(a client outside the cgroup); the rolls around it are shown apart",
    )
    args = parser.parse_args()
    if args.history is not None and not 0 <= args.history < args.after:
        parser.error("--history must be from 0 to less than --after seconds")
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="firebet-ready-"))
    pristine = base / f"journal-{args.records}"
    if not (pristine / "journal.db").exists():
        print(f"building a {args.records:,}-record journal in {pristine} ...", flush=True)
        took = journal_bench.build(pristine / "journal.db", args.records)
        print(f"  built in {took:.0f} s", flush=True)
    work = Path(tempfile.mkdtemp(prefix="firebet-ready-run-", dir=base))
    try:
        state = work / "state"
        synced_copy(pristine, state)  # the service appends to a copy
        disk = bare_syncs(work)
        with cpu_limit(args.cpu, args.period) as limit:
            result = measure(state, work, args.every, args.after, limit, args.history)
        result["bare_sync"] = disk
    finally:  # the built journal is kept only under --dir (for the next run)
        shutil.rmtree(work if args.dir else base, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
        return 0
    load = ", ".join(f"{x:.2f}" for x in result["load"])  # type: ignore[attr-defined]
    check_s = result["check_s"]
    speed = (
        f"{args.cpu:g} of one core in every {args.period} ms, pinned"
        if args.cpu > 0
        else "full speed"
    )
    print(
        f"`firebet run` on a {args.records:,}-record journal at {speed}, a roll every "
        f"{args.every:g} s from READY (ready in {result['ready_s']:.2f} s; load average {load})"
    )
    ended = f"after {check_s:.1f} s" if check_s is not None else "never"
    print(f"  the full check after READY ended {ended}: {result['check']}")
    print(show("while it ran", result["during"]))  # type: ignore[arg-type]
    print(show(f"the {args.after:g} s after", result["after"]))  # type: ignore[arg-type]
    print(show("all", result["all"]))  # type: ignore[arg-type]
    around = result["history"]
    if around is not None:
        took = around["answered_s"]  # type: ignore[index]
        print(
            f"  a history request {args.history:g} s after the check: "
            + (f"answered in {took:.2f} s" if took is not None else "not answered")
            + f" (ok: {around['ok']})"  # type: ignore[index]
        )
        print(show("  the rolls from it to 2 s after its answer", around))  # type: ignore[arg-type]
    disk = result["bare_sync"]
    print(
        f"  the disk just before (a bare 256-byte write + fdatasync, {disk['rolls']:.0f} "
        f"times): p50 {disk['p50']:.2f} ms, p99 {disk['p99']:.2f} ms, max {disk['max']:.2f} ms"
    )
    for at, ms, worst in result["slow"]:  # type: ignore[attr-defined]
        print(
            f"    slow roll {at:6.1f} s after READY: {ms:6.1f} ms "
            + (
                "(no bare sync ran meanwhile)"
                if worst is None
                else f"(a bare sync then {worst:.1f} ms)"
            )
        )
    print(
        f"  CPU after READY: the service {result['service_cpu_s']:.2f} s, the check's "
        f"process {result['check_cpu_s']:.2f} s; no ACK: {result['lost']}; "
        f"RSS {result['rss_mb']:.1f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
