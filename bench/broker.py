"""A throwaway mosquitto for the benches: anonymous, on a free local port, in a folder.

Each bench says what it wants of the broker in ``settings`` (mosquitto.conf lines:
persistence, in-flight and queue limits). ``tests/broker.py``'s ``Mosquitto`` is the
tests' broker (users, the example ACL, persistence on): the benches do not import the
tests, and a bench's broker restart is meant to lose what the broker held.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    """In a child before it runs: end it (SIGTERM) when the process that started it ends
    (Linux's PR_SET_PDEATHSIG), so no child outlives a killed bench."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1


def mosquitto_binary() -> str:
    """The mosquitto program (SystemExit with the way to install it when missing)."""
    for name in ("mosquitto", "/usr/sbin/mosquitto"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("mosquitto is not installed (sudo apt-get install mosquitto)")


class Broker:
    """One anonymous mosquitto on ``127.0.0.1:port``; it logs to ``folder/mosquitto.log``."""

    def __init__(self, folder: Path, settings: str = "") -> None:
        self.port = free_port()
        self.conf = folder / "mosquitto.conf"
        self.log = folder / "mosquitto.log"
        self.conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous true\n{settings}")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The broker as ``[floor] broker`` names it."""
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self, deadline_s: float = 30, *, own_session: bool = False) -> None:
        """Start mosquitto and wait until it listens (SystemExit when it does not).

        ``own_session``: out of the terminal's process group (a Ctrl-C is its caller's to
        handle, who stops it last), and ended with its caller all the same."""
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [mosquitto_binary(), "-c", str(self.conf)], stdout=log, stderr=log,
                start_new_session=own_session, preexec_fn=die_with_parent if own_session else None,
            )  # fmt: skip
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    why = f"mosquitto did not start on port {self.port}; see {self.log}"
                    raise SystemExit(why) from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop it (SIGTERM)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None
