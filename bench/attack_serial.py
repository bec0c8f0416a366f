"""Attack: megabytes of garbage and junk frames on the reader's line of a running table.

    .venv/bin/python bench/attack_serial.py [--megabytes 4] [--junk-frames 20000] [--seed 9]

Starts the real service (``firebet run``) on a pseudo-terminal with mock pins and a
fresh state directory, and plays a hostile dice reader on the other end: seeded
random bytes, forged ROLL frames (wrong CRC, XOR checksums of protocol 1, ``*00`` and
``*0000`` endings), out-of-range values, non-ASCII bytes, overlong lines, ``$`` storms,
frames cut by the next ``$``, and in between a few genuine ROLL frames. Then it asks
the service (``status``), checks the journal (``journal verify``) and prints figures.

The table must apply every genuine roll and nothing else: ``applied junk`` must be 0.
Exit 1 when it is not, when a genuine roll is missing, or the service died.
Re-runnable: a new temporary state directory every time; ``--keep`` keeps it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import termios
import threading
import time
import tty
from collections.abc import Callable
from pathlib import Path

from service_on_pty import rss_mb  # bench/service_on_pty.py

from drivers import codec

ROOT = Path(__file__).resolve().parent.parent


def firebet(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


class Line:
    """The reader's end of the pty: writes whatever it is given, reads the ACKs back."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.sent = 0
        self.acks: dict[int, float] = {}
        self._decoder = codec.FrameDecoder()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.master, view[:4096])
            except BlockingIOError:  # the service has not read the line yet: wait for room
                select.select([], [self.master], [], 1.0)
                continue
            view = view[n:]
        self.sent += len(data)

    def _read(self) -> None:
        while not self._stop.is_set():
            try:
                data = os.read(self.master, 4096)
            except BlockingIOError:
                time.sleep(0.0005)
                continue
            except OSError:
                return
            now = time.perf_counter()
            for frame in self._decoder.feed(data):
                if frame.ok and frame.name == "ACK" and frame.seq is not None:
                    self.acks.setdefault(frame.seq, now)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def junk_makers(rng: random.Random) -> dict[str, Callable[[], bytes]]:
    """Each kind of hostile input, by name; none of them may ever be applied."""

    def roll_body() -> str:
        return f"ROLL,{rng.randrange(65536)},{rng.randint(1, 6)},{rng.randint(1, 6)}"

    def printable(n: int) -> bytes:
        return bytes(rng.choice(b"0123456789ABCDEF,ROLLHELO") for _ in range(n))

    return {
        "random bytes": lambda: rng.randbytes(rng.randint(1, 200)),
        "ROLL ending *00": lambda: f"${roll_body()}*00\r\n".encode(),
        "ROLL ending *0000": lambda: f"${roll_body()}*0000\r\n".encode(),
        "ROLL, random CRC": lambda: f"${roll_body()}*{rng.randrange(65536):04X}\r\n".encode(),
        "ROLL, protocol-1 XOR": lambda: codec.encode(roll_body(), protocol=1),
        "HELLO, protocol-1 XOR": lambda: codec.encode_hello(0, "EVIL", "6.6", protocol=1),
        "ROLL, bad dice": lambda: codec.encode(
            f"ROLL,{rng.randrange(65536)},{rng.choice([0, 7, 8, 9])},{rng.randint(0, 9)}"
        ),
        "ROLL, seq > 65535": lambda: codec.encode(f"ROLL,{rng.randrange(65536, 10**6)},3,4"),
        "ROLL, non-ASCII": lambda: b"$ROLL,1,\xff\xfe,4*" + printable(4) + b"\r\n",
        "overlong line": lambda: b"$" + printable(rng.randint(83, 400)) + b"\r\n",
        "dollar storm": lambda: b"$" * rng.randint(1, 50),
        "frame cut by $": lambda: codec.encode_roll(rng.randrange(65536), 3, 3)[:-4] + b"$",
        "printable noise": lambda: printable(rng.randint(1, 120)),
        "NUL flood": lambda: b"\x00" * rng.randint(100, 2000),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=4.0, help="random garbage (4)")
    parser.add_argument("--junk-frames", type=int, default=20000, help="forged frames (20000)")
    parser.add_argument("--genuine", type=int, default=200, help="genuine rolls mixed in (200)")
    parser.add_argument("--seed", type=int, default=9)
    parser.add_argument("--keep", action="store_true", help="keep the state directory")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="firebet-attack-"))
    master, slave = os.openpty()
    tty.setraw(slave)
    termios.tcflush(master, termios.TCIOFLUSH)
    port = os.ttyname(slave)
    state, sock = work / "state", work / "control.sock"
    log = open(work / "service.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "controller", "run", "--serial", port,
            "--pin-factory", "mock", "--state-dir", str(state), "--socket", str(sock),
        ],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    os.set_blocking(master, False)
    line = Line(master)
    failures: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                print(f"the service did not start; see {work / 'service.log'}", file=sys.stderr)
                return 1
            time.sleep(0.05)
        time.sleep(0.5)
        rng = random.Random(args.seed)
        makers = junk_makers(rng)
        kinds = list(makers)
        sent_by_kind = dict.fromkeys(kinds, 0)
        line.write(codec.encode_hello(0, "ATTACK", "1.0"))
        garbage_bytes = int(args.megabytes * 1024 * 1024)
        # the junk, in rounds, each ended by a genuine roll (so the genuine ones are spread)
        rounds = max(1, args.genuine)
        per_round_bytes = garbage_bytes // rounds
        per_round_frames = args.junk_frames // rounds
        genuine: dict[int, tuple[float, tuple[int, int]]] = {}
        seq = 0
        started = time.perf_counter()
        for _ in range(rounds):
            chunk = bytearray()
            while len(chunk) < per_round_bytes:
                chunk += rng.randbytes(min(65536, per_round_bytes - len(chunk)))
            line.write(bytes(chunk))
            for _ in range(per_round_frames):
                kind = rng.choice(kinds)
                sent_by_kind[kind] += 1
                line.write(makers[kind]())
            seq = (seq + 1) % 65536
            dice = (rng.randint(1, 6), rng.randint(1, 6))
            line.write(b"\r\n")  # garbage may have opened a frame: close it before ours
            genuine[seq] = (time.perf_counter(), dice)
            line.write(codec.encode_roll(seq, *dice))
            seq = (seq + 1) % 65536
            line.write(codec.encode_hb(seq))
        attack_s = time.perf_counter() - started
        ack_deadline = time.monotonic() + 60
        while time.monotonic() < ack_deadline and not all(s in line.acks for s in genuine):
            time.sleep(0.05)
        status_run = firebet("status", "--json", "--socket", str(sock))
        if status_run.returncode != 0:
            failures.append(f"status failed: {status_run.stderr.strip()}")
            status: dict[str, object] = {}
        else:
            status = json.loads(status_run.stdout)
        alive = proc.poll() is None
        memory = rss_mb(proc.pid) if alive else float("nan")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        line.stop()
        log.close()
    verify = firebet("journal", "verify", "--state-dir", str(state))

    acked = [s for s in genuine if s in line.acks]
    latencies = sorted((line.acks[s] - genuine[s][0]) * 1000 for s in acked)
    rolls = int(status.get("rolls", -1)) if status else -1  # type: ignore[call-overload]
    applied_junk = rolls - len(acked) if rolls >= 0 else -1
    reader = status.get("reader", {}) if status else {}
    counters = reader.get("counters", {}) if isinstance(reader, dict) else {}
    mb = line.sent / 1024 / 1024
    print(f"serial-garbage attack on firebet run (seed {args.seed}), this machine")
    print(f"  sent {mb:.1f} MB in {attack_s:.1f} s ({mb / attack_s:.2f} MB/s through the pty):")
    print(f"    {garbage_bytes / 1024 / 1024:.1f} MB random bytes in {rounds} bursts")
    for kind, n in sent_by_kind.items():
        print(f"    {n:6d} x {kind}")
    print(f"    {len(genuine):6d} x genuine ROLL (protocol 2), each after a burst")
    print(f"  reader verdicts: {json.dumps(counters)}")
    print(f"  genuine rolls ACKed: {len(acked)}/{len(genuine)}")
    if latencies:
        p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        print(
            f"  genuine ROLL -> ACK behind the garbage: p50 {latencies[len(latencies) // 2]:.1f} "
            f"ms, p99 {p99:.1f} ms, max {latencies[-1]:.1f} ms"
        )
    print(f"  rolls the table counted: {rolls}; applied junk: {applied_junk} (must be 0)")
    print(f"  service alive after the attack: {alive}; resident memory {memory:.1f} MB")
    print(f"  journal verify: exit {verify.returncode} {verify.stdout.strip()[:120]}")
    if applied_junk != 0:
        failures.append(f"applied junk: {applied_junk}")
    if len(acked) != len(genuine):
        failures.append(f"genuine rolls not ACKed: {len(genuine) - len(acked)}")
    if not alive:
        failures.append("the service died")
    if verify.returncode != 0:
        failures.append(f"journal verify exit {verify.returncode}")
    if args.keep:
        print(f"  state kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    print("attack held" if not failures else "attack NOT held")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
