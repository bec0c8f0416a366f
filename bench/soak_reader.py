"""Soak: reader protocol 3 on a hostile channel, long (issue 29; the suite runs it short).

    .venv/bin/python bench/soak_reader.py [--seed N] [--examples 2000] [--steps 120]
    .venv/bin/python bench/soak_reader.py --service [--protocol 3|2] [--examples 20] [--steps 60]
        [--idle 100000]

Runs the hypothesis state machine of ``tests/reader_model.py`` (the real sans-IO
:class:`drivers.session.ReaderSession` and rules engine, a protocol-3 reader, a channel
that drops, duplicates, delays, reorders, corrupts and replays frames both ways, reader
restarts, port reopens, service kills, 100,000-heartbeat idles) and prints its seed and
figures: steps, channel faults survived by kind, throws, and throws lost, doubled or
silently dropped (0: any other count fails the run with the steps that broke it).

``--service``: the machine of ``tests/reader_service_model.py`` instead, through a real
``firebet run`` subprocess on a pseudo-terminal (the channel's faults, reader restarts,
port reopens, ``kill -9`` and restarts of the service, bursts of ``--idle`` heartbeats,
100,000 by default, written as fast as the pty takes them, and the dealer deciding held
rolls); its figures also count the service kills and the held rolls. ``--protocol 2``: a
reader and service of protocol 2, whose unprovable rolls (a restart unseen, an idle line
past half the seq ring) are held for the dealer. Each run starts a service: minutes.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

import hypothesis.core
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tests.reader_service_model as service_model
from tests.reader_model import FIGURES, HostileChannel
from tests.reader_service_model import ServiceChannel, ServiceChannelP2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="default: a random one")
    parser.add_argument("--examples", type=int, default=None, help="default: 2000 (20)")
    parser.add_argument("--steps", type=int, default=None, help="default: 120 (60)")
    parser.add_argument(
        "--service", action="store_true", help="through a real firebet run on a pty"
    )
    parser.add_argument(
        "--idle", type=int, default=100_000, help="--service: heartbeats in one idle burst"
    )
    parser.add_argument(
        "--protocol", type=int, choices=(2, 3), default=3, help="--service: the reader protocol"
    )
    args = parser.parse_args()
    examples = args.examples or (20 if args.service else 2000)
    steps = args.steps or (60 if args.service else 120)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    what = f"through firebet run on a pty, protocol {args.protocol}" if args.service else "pure"
    print(f"soak-reader ({what}): seed {seed}, {examples} runs of up to {steps} steps")
    started, cpu = time.monotonic(), time.process_time()
    broken: BaseException | None = None
    service_model.IDLE_HEARTBEATS = args.idle
    try:
        machine = ServiceChannelP2 if args.protocol == 2 else ServiceChannel
        _run(machine if args.service else HostileChannel, seed, examples, steps)
    except BaseException as exc:  # a broken invariant: hypothesis printed the steps
        broken = exc
        traceback.print_exc()
    p = "service." if args.service else ""
    faults = {
        k.removeprefix(f"{p}fault."): v for k, v in FIGURES.items() if k.startswith(f"{p}fault.")
    }
    idle = "sent" if args.service else "fast-forwarded"
    print(
        f"  {FIGURES[p + 'runs']} runs, {FIGURES[p + 'steps']} steps, {FIGURES[p + 'faults']} "
        f"channel faults survived, {FIGURES[p + 'idle_heartbeats']:,} idle heartbeats {idle}"
        + (f", {FIGURES['service.kills']} service kills (kill -9)" if args.service else "")
    )
    print("  faults by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(faults.items())))
    if args.service:
        print(
            f"  held for the dealer: {FIGURES['service.held_max']} at most in a run; the "
            f"dealer applied {FIGURES['service.held_apply']}, discarded "
            f"{FIGURES['service.held_discard']} (relics); SEQ_CONFLICTs power-cycled "
            f"{FIGURES['service.conflicts']}; protocol-2 seq+dice collisions avoided "
            f"{FIGURES['service.p2_collisions_avoided']}"
        )
    print(
        f"  throws made and applied once, in order: {FIGURES[p + 'throws']}; "
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


def _run(machine: type[RuleBasedStateMachine], seed: int, examples: int, steps: int) -> None:
    """The machine, ``examples`` runs of up to ``steps`` steps, from ``seed``."""
    hypothesis.core.global_force_seed = seed  # what pytest's --hypothesis-seed sets
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            # a real service's timing cannot replay a failure step for step: no shrinking
            phases=[Phase.explicit, Phase.generate]
            if issubclass(machine, ServiceChannel)
            else list(Phase),
        ),
    )


if __name__ == "__main__":
    main()
