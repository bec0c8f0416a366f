"""Where a roll's CPU goes: ``firebet run`` on a pty under cProfile, every thread.

    .venv/bin/python bench/profile_roll.py [--rolls 2000] [--top 30] [--sort tottime]
    make profile-roll

The service is started as ``bench/cpu.py`` starts it (a pseudo-terminal reader, mock
pins), but through this file, which turns cProfile on in every thread the service starts
(``threading.setprofile``), runs ``--rolls`` rolls at full speed, stops the service and
prints the functions that took the most CPU, the engine thread's and the reader's
together (the profiler's own cost inflates every figure alike; ``bench/cpu.py`` gives the
true CPU a roll).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def serve_profiled(out: Path, argv: list[str]) -> int:
    """Run ``firebet ARGV`` with every thread profiled; the merged stats saved to ``out``."""
    sys.path.insert(0, str(ROOT))
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start_in_thread(frame: object, event: str, arg: object) -> None:
        sys.setprofile(None)  # this hook only starts the thread's own profiler
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(profile)
        profile.enable()

    threading.setprofile(start_in_thread)
    main_profile = cProfile.Profile(time.thread_time)
    profiles.append(main_profile)
    from controller.cli import main

    main_profile.enable()
    try:
        return main(argv)
    finally:
        main_profile.disable()
        with lock:
            stats = pstats.Stats(profiles[0])
            for profile in profiles[1:]:
                stats.add(profile)  # (its figures up to now: the threads are stopping)
        stats.dump_stats(str(out))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rolls", type=int, default=2000)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sort", default="tottime", help="pstats order (tottime, cumulative)")
    parser.add_argument("--serve", metavar="OUT", help=argparse.SUPPRESS)  # the service side
    args, rest = parser.parse_known_args()
    if args.serve:
        return serve_profiled(Path(args.serve), rest)
    sys.path.insert(0, str(HERE))
    from service_on_pty import ServiceOnPty

    work = Path(tempfile.mkdtemp(prefix="firebet-profile-"))
    config = work / "table.toml"
    config.write_text('[journal]\nkey_file = "journal.key"\n', encoding="utf-8")
    out = work / "roll.pstats"
    service = ServiceOnPty(
        work,
        work / "state",
        config,
        heartbeat_every=400,
        program=[sys.executable, str(Path(__file__).resolve()), "--serve", str(out)],
    )
    done = 0
    try:
        for _ in range(args.rolls):
            if service.roll(timeout_s=30) is None:
                break
            done += 1
    finally:
        service.stop()
    print(f"{done} rolls through firebet run under cProfile (every thread, CPU time); {out}")
    stats = pstats.Stats(str(out))
    stats.sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
