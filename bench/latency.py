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
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import termios
import time
import tty
from pathlib import Path

from drivers import codec

BITS_PER_BYTE_8N1 = 10


def wire_ms(frame: bytes, baud: int = 9600) -> float:
    """Milliseconds the frame itself takes on the wire at ``baud`` (8N1)."""
    return len(frame) * BITS_PER_BYTE_8N1 / baud * 1000


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(
    rolls: int, seed: int = 1, config: Path | None = None, work: Path | None = None
) -> tuple[list[float], float, float]:
    """Run ``firebet run`` on a pty and time ``rolls`` ROLL -> ACK round trips.

    Returns (latencies in ms, start-up to READY in s, resident memory in MB after).
    ``config``: a table configuration for the service (e.g. one with a floor broker).
    """
    work = work or Path(tempfile.mkdtemp(prefix="firebet-bench-"))
    master, slave = os.openpty()
    tty.setraw(slave)
    termios.tcflush(master, termios.TCIOFLUSH)
    port = os.ttyname(slave)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(work / "notify.sock"))
    env = dict(os.environ, NOTIFY_SOCKET=str(work / "notify.sock"))
    if config is None:  # the bench's own journal key, in its state directory
        config = work / "table.toml"
        config.write_text('[journal]\nkey_file = "journal.key"\n', encoding="utf-8")
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "controller", "run", "--serial", port,
            "--pin-factory", "mock", "--state-dir", str(work / "state"),
            "--socket", str(work / "control.sock"), "--config", str(config),
        ],
        env=env, stdout=subprocess.DEVNULL, stderr=open(work / "service.log", "w"),  # noqa: SIM115
    )  # fmt: skip
    notify.settimeout(30)
    while b"READY=1" not in notify.recv(4096):
        pass
    ready_s = time.monotonic() - started
    os.set_blocking(master, False)

    def read_ack(seq: int, deadline: float) -> bool:
        buffer = b""
        decoder = codec.FrameDecoder()
        while time.monotonic() < deadline:
            try:
                buffer = os.read(master, 256)
            except BlockingIOError:
                time.sleep(0.00005)
                continue
            for frame in decoder.feed(buffer):
                if frame.ok and frame.name == "ACK" and frame.seq == seq:
                    return True
        return False

    rng = random.Random(seed)
    os.write(master, codec.encode_hello(0, "BENCH", "1.0"))
    time.sleep(0.2)
    latencies: list[float] = []
    seq = 0
    for _ in range(rolls):
        seq = (seq + 1) % 65536
        frame = codec.encode_roll(seq, rng.randint(1, 6), rng.randint(1, 6))
        t0 = time.perf_counter()
        os.write(master, frame)
        if not read_ack(seq, time.monotonic() + 5):
            print(
                f"no ACK for seq {seq}; the service's log: {work / 'service.log'}", file=sys.stderr
            )
            break
        latencies.append((time.perf_counter() - t0) * 1000)
        if seq % 400 == 0:  # a heartbeat now and then, as a real reader sends
            seq = (seq + 1) % 65536
            os.write(master, codec.encode_hb(seq))
    memory = rss_mb(proc.pid)
    proc.terminate()
    proc.wait(timeout=30)
    notify.close()
    os.close(master)
    os.close(slave)
    return latencies, ready_s, memory


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
