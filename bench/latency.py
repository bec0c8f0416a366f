"""Benchmark: a ROLL frame written to the reader's line -> its ACK read back, end to end.

    .venv/bin/python bench/latency.py [--rolls 2000]

Starts the real service (`firebet run`) as a subprocess on a pseudo-terminal with
mock pins and a fresh state directory, plays the dice reader on the other end of
the pty, and times each ROLL -> ACK (journaled durably, lamps updated, ACK written).
Also prints the start-up time to READY and the service's resident memory.
Figures, not assertions.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
from pathlib import Path

from service_on_pty import ServiceOnPty  # bench/service_on_pty.py

from drivers import codec

BITS_PER_BYTE_8N1 = 10


def wire_ms(frame: bytes, baud: int = 9600) -> float:
    """Milliseconds the frame itself takes on the wire at ``baud`` (8N1)."""
    return len(frame) * BITS_PER_BYTE_8N1 / baud * 1000


def measure(
    rolls: int, seed: int = 1, config: Path | None = None, work: Path | None = None
) -> tuple[list[float], float, float]:
    """Run ``firebet run`` on a pty and time ``rolls`` ROLL -> ACK round trips.

    Returns (latencies in ms, start-up to READY in s, resident memory in MB after).
    ``config``: a table configuration for the service (e.g. one with a floor broker).
    """
    work = work or Path(tempfile.mkdtemp(prefix="firebet-bench-"))
    if config is None:  # the bench's own journal key, in its state directory
        config = work / "table.toml"
        config.write_text('[journal]\nkey_file = "journal.key"\n', encoding="utf-8")
    service = ServiceOnPty(work, work / "state", config, seed=seed, heartbeat_every=400)
    latencies: list[float] = []
    try:
        for _ in range(rolls):
            ms = service.roll(timeout_s=5)
            if ms is None:
                break
            latencies.append(ms)
        memory = service.rss_mb()
    finally:
        service.stop()
    return latencies, service.ready_s, memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rolls", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    latencies, ready_s, memory = measure(args.rolls, args.seed)
    rng = random.Random(args.seed)
    frame_ms = [
        wire_ms(codec.encode_roll(i % 65536, rng.randint(1, 6), rng.randint(1, 6)))
        for i in range(1, len(latencies) + 1)
    ]
    latencies.sort()
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    wire = statistics.mean(frame_ms)
    print(f"ROLL frame -> durable journal -> lamps -> ACK, {len(latencies)} rolls (this machine)")
    print(f"  p50 {p(0.50):6.2f} ms   p99 {p(0.99):6.2f} ms   max {latencies[-1]:6.2f} ms")
    print(
        f"  the frame's own wire time at 9600 baud: {min(frame_ms):.1f}-{max(frame_ms):.1f} ms "
        f"(mean {wire:.1f}); p99 is {p(0.99) / wire:.0%} of it (aim: under 25%)"
    )
    print(f"  start-up to READY: {ready_s * 1000:.0f} ms (fresh journal, includes imports)")
    print(f"  resident memory of the service after the run: {memory:.1f} MB (aim: under 60 MB)")


if __name__ == "__main__":
    main()
