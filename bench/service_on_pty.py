"""`firebet run` on a pseudo-terminal, with this process playing the dice reader: the
harness ``bench/latency.py`` and ``bench/attack_socket.py`` time ROLL -> ACK round trips
through (journaled durably, lamps, ACK) on mock pins.
"""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import termios
import time
import tty
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from drivers import codec  # noqa: E402

SYSTEMD_STAND_IN = """
import socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
sock.setblocking(True)
while sock.recv(4096):
    pass
"""


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) process ``pid`` has used so far (its
    children not counted), to the nanosecond: the process's own CPU clock, which
    ``clock_getcpuclockid(3)`` would name; /proc's ticks (10 ms) where it cannot be read.
    Ticks made an idle second of 20 s of heartbeats read 2.5, 3.0 or 3.5 ms and nothing
    between."""
    try:
        return time.clock_gettime_ns((~pid << 3) | 2) / 1e9  # MAKE_PROCESS_CPUCLOCK, SCHED
    except OSError:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds(pid: int) -> float:
    """CPU time of process ``pid``'s children it has waited for (a full check's worker)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def live_children_cpu_seconds(pid: int) -> float:
    """CPU time of process ``pid``'s children still running (nobody has waited for them),
    each from its own CPU clock (:func:`cpu_seconds`)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            try:  # to the ns (a copy's few ms read as 0 in /proc's 10 ms ticks)
                total += cpu_seconds(int(entry.name))
            except (OSError, ValueError):  # it ended meanwhile
                continue
    return total


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of process ``pid`` in MB (VmHWM; NaN when /proc does not say)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MB (NaN when /proc does not say)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class ServiceOnPty:
    """The service started on ``state`` (and ``config``, when given), its control socket
    and log in ``work``; ready (systemd's READY=1) and greeted with a HELLO on return.

    ``heartbeat_every``: a HB frame after every that many rolls, as a real reader sends.
    """

    def __init__(
        self,
        work: Path,
        state: Path,
        config: Path | None = None,
        *,
        seed: int = 1,
        heartbeat_every: int = 200,
        ready_timeout_s: float = 120.0,
        prefix: list[str] | None = None,
        env: dict[str, str] | None = None,
        program: list[str] | None = None,
    ) -> None:
        """``prefix``: a command that runs the service (``bench/pi_speed.py``: into a CPU-limited
        cgroup); ``env``: more environment for it (``bench/cpu.py``: no bytecode cache);
        ``program``: what stands for ``python -m controller`` (``bench/profile_roll.py``)."""
        self.work = work
        self.socket = work / "control.sock"
        self.log = work / "service.log"
        self.master, self._slave = os.openpty()
        tty.setraw(self._slave)
        termios.tcflush(self.master, termios.TCIOFLUSH)
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(work / "notify.sock"))
        env = dict(os.environ, **(env or {}), NOTIFY_SOCKET=str(work / "notify.sock"))
        command = [
            *(prefix or []), *(program or [sys.executable, "-m", "controller"]), "run",
            "--serial", os.ttyname(self._slave),
            "--pin-factory", "mock", "--state-dir", str(state), "--socket", str(self.socket),
        ]  # fmt: skip
        if config is not None:
            command += ["--config", str(config)]
        started = time.monotonic()
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log
            )
        notify.settimeout(ready_timeout_s)
        try:
            while b"READY=1" not in notify.recv(4096):
                pass
            # then read the service's status lines as systemd does, from a process of its
            # own: a socket nobody reads would make every STATUS a failed send, retried
            self._systemd = subprocess.Popen(
                [sys.executable, "-c", SYSTEMD_STAND_IN, str(notify.fileno())],
                pass_fds=[notify.fileno()],
                stdin=subprocess.DEVNULL,
            )
        finally:
            notify.close()
        self.ready_s = time.monotonic() - started
        self.ready_cpu_s = cpu_seconds(self.proc.pid)  # exec to READY, the service's own
        # and its copies' (the full check's and the history reader's, forked at its start)
        self.ready_copies_cpu_s = live_children_cpu_seconds(self.proc.pid)
        os.set_blocking(self.master, False)
        self.seq = 0
        self.rng = random.Random(seed)
        self.heartbeat_every = heartbeat_every
        os.write(self.master, codec.encode_hello(0, "BENCH", "1.0"))
        time.sleep(0.3)

    def _read_ack(self, seq: int, deadline: float) -> bool:
        decoder = codec.FrameDecoder()
        while time.monotonic() < deadline:
            try:
                data = os.read(self.master, 256)
            except BlockingIOError:
                time.sleep(0.00005)
                continue
            for frame in decoder.feed(data):
                if frame.ok and frame.name == "ACK" and frame.seq == seq:
                    return True
        return False

    def roll(self, timeout_s: float = 10.0, dice: tuple[int, int] | None = None) -> float | None:
        """Throw one seeded roll (or ``dice``): its ROLL -> ACK time in ms, or None (no ACK
        in time, and a line on standard error naming the service's log)."""
        self.seq = (self.seq + 1) % 65536
        d1, d2 = dice or (self.rng.randint(1, 6), self.rng.randint(1, 6))
        frame = codec.encode_roll(self.seq, d1, d2)
        t0 = time.perf_counter()
        os.write(self.master, frame)
        if not self._read_ack(self.seq, time.monotonic() + timeout_s):
            print(f"no ACK for seq {self.seq}; the service's log: {self.log}", file=sys.stderr)
            return None
        ms = (time.perf_counter() - t0) * 1000
        if self.seq % self.heartbeat_every == 0:
            self.seq = (self.seq + 1) % 65536
            os.write(self.master, codec.encode_hb(self.seq))
        return ms

    def heartbeat(self) -> None:
        """Send one HB frame, as an idle reader does (at least once a second)."""
        self.seq = (self.seq + 1) % 65536
        os.write(self.master, codec.encode_hb(self.seq))

    def ask(self, *command: str) -> dict:
        """``firebet COMMAND --json`` on the service's socket, as a dealer or technician
        would run it: its JSON object ({} when there is none)."""
        done = subprocess.run(
            [sys.executable, "-m", "controller", *command, "--json", "--socket", str(self.socket)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        try:
            said = json.loads(done.stdout)
        except ValueError:
            return {}
        return said if isinstance(said, dict) else {}

    def rss_mb(self) -> float:
        """The service's resident memory in MB."""
        return rss_mb(self.proc.pid)

    def alive(self) -> bool:
        """Whether the service is still running."""
        return self.proc.poll() is None

    def stop(self) -> None:
        """Stop the service (SIGTERM) and close the pseudo-terminal."""
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self._systemd.kill()
        self._systemd.wait(timeout=30)
        os.close(self.master)
        os.close(self._slave)
