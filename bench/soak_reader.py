"""Soak: reader protocol 3 on a hostile channel, long (issue 29; the suite runs it short).

    .venv/bin/python bench/soak_reader.py [--seed N] [--examples 2000] [--steps 120]

Runs the hypothesis state machine of ``tests/reader_model.py`` (the real sans-IO
:class:`drivers.session.ReaderSession` and rules engine, a protocol-3 reader, a channel
that drops, duplicates, delays, reorders, corrupts and replays frames both ways, reader
restarts, port reopens, service kills, 100,000-heartbeat idles) and prints its seed and
figures: steps, channel faults survived by kind, throws, and throws lost, doubled or
silently dropped (0: any other count fails the run with the steps that broke it).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import hypothesis.core
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.reader_model import FIGURES, HostileChannel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=120)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"soak-reader: seed {seed}, {args.examples} runs of up to {args.steps} steps")
    started, cpu = time.monotonic(), time.process_time()
    broken: BaseException | None = None
    try:
        _run(seed, args.examples, args.steps)
    except BaseException as exc:  # a broken invariant: hypothesis printed the steps
        broken = exc
    faults = {k.removeprefix("fault."): v for k, v in FIGURES.items() if k.startswith("fault.")}
    print(
        f"  {FIGURES['runs']} runs, {FIGURES['steps']} steps, {FIGURES['faults']} channel "
        f"faults survived, {FIGURES['idle_heartbeats']:,} idle heartbeats fast-forwarded"
    )
    print("  faults by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(faults.items())))
    print(
        f"  throws made and applied once, in order: {FIGURES['throws']}; "
        f"lost 0, doubled 0, silently dropped 0"
        if broken is None
        else "  BROKEN: see above"
    )
    print(
        f"  {time.monotonic() - started:.0f} s wall, {time.process_time() - cpu:.0f} s CPU "
        f"(seed {seed})"
    )
    if broken is not None:
        raise SystemExit(1)


def _run(seed: int, examples: int, steps: int) -> None:
    """The machine, ``examples`` runs of up to ``steps`` steps, from ``seed``."""
    hypothesis.core.global_force_seed = seed  # what pytest's --hypothesis-seed sets
    run_state_machine_as_test(
        HostileChannel,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


if __name__ == "__main__":
    main()
