"""Where ``firebet run`` logs: time-stamped lines in a terminal, structured fields in journald.

In the foreground each line starts with the local time to the millisecond
(``2026-11-30T09:41:07.512+0000 WARNING drivers.serial_reader: ...``). Under
systemd (stderr is the journal's stream, as ``$JOURNAL_STREAM`` says) every
record goes to journald over its native protocol instead, with fields that
``journalctl`` can filter on: ``PRIORITY``, ``SYSLOG_IDENTIFIER=firebet``,
``LOGGER``, ``THREAD_NAME``, ``CODE_FILE``/``CODE_LINE``/``CODE_FUNC``,
``FIREBET_TABLE``, and any ``extra={"fields": {...}}`` of the call as
``FIREBET_<NAME>``; e.g. ``journalctl -u firebet FIREBET_TABLE=CR-07 PRIORITY=4``.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import sys
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

JOURNAL_SOCKET = Path("/run/systemd/journal/socket")
FOREGROUND_FORMAT = "%(asctime)s.%(msecs)03d%(tz)s %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"

# syslog priorities, as journald files them
_PRIORITY = {
    logging.CRITICAL: 2,
    logging.ERROR: 3,
    logging.WARNING: 4,
    logging.INFO: 6,
    logging.DEBUG: 7,
}


def _priority(level: int) -> int:
    for threshold in (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO):
        if level >= threshold:
            return _PRIORITY[threshold]
    return _PRIORITY[logging.DEBUG]


def _field(name: str, value: object) -> bytes:
    """One field of the native journal protocol (a value with a newline is length-framed)."""
    data = str(value).encode("utf-8", "replace")
    key = name.encode("ascii")
    if b"\n" in data:
        return key + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
    return key + b"=" + data + b"\n"


def _field_name(name: str) -> str:
    cleaned = "".join(c if c.isascii() and c.isalnum() else "_" for c in name.upper())
    return "FIREBET_" + cleaned.strip("_")


class JournalHandler(logging.Handler):
    """Sends each record to journald as one datagram of fields (the native protocol)."""

    def __init__(
        self,
        path: Path = JOURNAL_SOCKET,
        identifier: str = "firebet",
        fields: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.path = path
        self.identifier = identifier
        self.fields = dict(fields or {})
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    def payload(self, record: logging.LogRecord) -> bytes:
        """The datagram for ``record``."""
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        parts = [
            _field("MESSAGE", message),
            _field("PRIORITY", _priority(record.levelno)),
            _field("SYSLOG_IDENTIFIER", self.identifier),
            _field("LOGGER", record.name),
            _field("THREAD_NAME", record.threadName),
            _field("CODE_FILE", record.pathname),
            _field("CODE_LINE", record.lineno),
            _field("CODE_FUNC", record.funcName),
        ]
        parts += [_field(_field_name(k), v) for k, v in self.fields.items()]
        extra = getattr(record, "fields", None)
        if isinstance(extra, Mapping):
            parts += [_field(_field_name(str(k)), v) for k, v in extra.items()]
        return b"".join(parts)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sock.sendto(self.payload(record), str(self.path))
        except Exception:  # the journal gone: say it on stderr, never stop the table
            self.handleError(record)

    def close(self) -> None:
        self.sock.close()
        super().close()


class _Zone(logging.Filter):
    """Adds the UTC offset (``+0100``) for the foreground format."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.tz = time.strftime("%z", time.localtime(record.created))
        return True


def under_journald(stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``stream`` is systemd's journal stream (``$JOURNAL_STREAM`` is its dev:inode)."""
    expected = environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(stream.fileno())
    except (AttributeError, ValueError, OSError):
        return False
    return expected == f"{st.st_dev}:{st.st_ino}"


def configure(
    *,
    table: str = "",
    stream: TextIO | None = None,
    journal: Path = JOURNAL_SOCKET,
    environ: Mapping[str, str] = os.environ,
    level: int = logging.INFO,
) -> logging.Handler:
    """Log to journald when systemd runs us, else time-stamped lines on ``stream``."""
    stream = stream if stream is not None else sys.stderr
    handler: logging.Handler
    if under_journald(stream, environ) and journal.exists():
        handler = JournalHandler(journal, fields={"table": table} if table else None)
    else:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter(FOREGROUND_FORMAT, DATE_FORMAT))
        handler.addFilter(_Zone())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("transitions").setLevel(logging.WARNING)  # a line per callback otherwise
    return handler
