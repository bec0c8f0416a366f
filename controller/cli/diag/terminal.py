"""What the three tests share at the terminal: SIGTERM ends a test with its summary,
single keys without Enter, one line out at a time."""

from __future__ import annotations

import contextlib
import signal
import sys
import termios
import threading
import tty
from collections.abc import Iterator
from typing import TextIO


@contextlib.contextmanager
def stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """SIGTERM sets ``stop`` (main thread only), so the summary is still printed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def emit(out: TextIO, text: str) -> None:
    """Write one line and flush it (a pipe sees it at once)."""
    out.write(text + "\n")
    out.flush()


@contextlib.contextmanager
def keys_unbuffered() -> Iterator[None]:
    """Single keys from a terminal without Enter (and no echo), restored afterwards."""
    if not sys.stdin.isatty():
        yield
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
