"""Progress of long work on a terminal: ``journal verify`` and ``export`` on a big journal.

One line on standard error, redrawn in place at most :data:`REDRAW_S` apart
(``verify: 412,000 of 1,000,000 records (41%), 98,500 records/s``) and wiped at the
end. It is drawn only where a person watches it: standard error is a terminal, the
command was not asked for JSON, and (for ``export``) standard output is not that
terminal too, where the records themselves show the progress. Anywhere else (a pipe, a
file, a script, CI) nothing is drawn.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

REDRAW_S = 0.2


def wanted(*, json: bool = False, output_shown: bool = False, err: TextIO | None = None) -> bool:
    """Whether to draw progress: on a terminal, not for ``--json``, and not where the
    command's own output (``output_shown``: standard output is a terminal) shows it."""
    stream = err or sys.stderr
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return terminal and not json and not output_shown


def stdout_is_terminal() -> bool:
    """Whether standard output is a terminal (the records of ``export`` scroll by there)."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """A counter of ``what`` drawn on ``err`` (when ``enabled``) as :meth:`update` is told.

    ``clock`` is injectable for tests."""

    def __init__(
        self,
        what: str,
        unit: str,
        *,
        enabled: bool,
        err: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.unit, self.enabled = what, unit, enabled
        self.err = err or sys.stderr
        self._clock = clock
        self._start = clock()
        self._drawn_at: float | None = None
        self._width = 0

    def update(self, done: int, total: int | None = None) -> None:
        """``done`` of ``total`` (None: unknown) so far; redrawn at most every REDRAW_S."""
        if not self.enabled:
            return
        now = self._clock()
        if self._drawn_at is not None and now - self._drawn_at < REDRAW_S:
            return
        self._drawn_at = now
        self._draw(self.line(done, total, now - self._start))

    def line(self, done: int, total: int | None, elapsed: float) -> str:
        """The text of one redraw."""
        text = f"{self.what}: {done:,}"
        if total:
            text += f" of {total:,} {self.unit} ({min(100, done * 100 // total)}%)"
        else:
            text += f" {self.unit}"
        if elapsed > 0 and done:
            text += f", {done / elapsed:,.0f} {self.unit}/s"
        return text

    def _draw(self, text: str) -> None:
        pad = max(0, self._width - len(text))
        self.err.write("\r" + text + " " * pad)
        self.err.flush()
        self._width = len(text)

    def close(self) -> None:
        """Wipe the line, so what the command prints next starts clean."""
        if self.enabled and self._width:
            self.err.write("\r" + " " * self._width + "\r")
            self.err.flush()
            self._width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
