"""The floor link's durable cursor: the last record the broker acknowledged.

One small JSON file in the state directory (``floor.cursor``):
``{"record": n, "chain": "<the chain hash of record n>"}``. It is replaced
atomically (written beside, fsynced, renamed, directory fsynced), so a power cut
or a SIGKILL leaves either the old or the new cursor, never a torn one. The chain
hash lets the link notice a journal that is not the one the cursor was about (a
``journal init``): it then publishes from the first record again.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from controller.core.errors import FirebetError

CURSOR_FILE = "floor.cursor"


@dataclass(frozen=True)
class Cursor:
    """The last record the broker acknowledged (0: none yet) and its chain hash."""

    record: int = 0
    chain: str = ""


class CursorError(FirebetError):
    """The cursor file exists but cannot be read or makes no sense."""


class CursorFile:
    """Load and durably save the cursor in ``state_dir``."""

    def __init__(self, state_dir: str | Path) -> None:
        self.path = Path(state_dir) / CURSOR_FILE
        self._tmp = self.path.with_name(self.path.name + ".tmp")

    def load(self) -> Cursor:
        """The saved cursor; ``Cursor()`` when there is none yet.

        Raises :class:`CursorError` naming the file when it is unreadable.
        """
        try:
            text = self.path.read_text(encoding="ascii")
        except FileNotFoundError:
            return Cursor()
        except (OSError, UnicodeDecodeError) as exc:
            raise CursorError(f"the floor cursor {self.path} cannot be read: {exc}") from exc
        try:
            data = json.loads(text)
            record, chain = data["record"], data["chain"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CursorError(f"the floor cursor {self.path} is damaged: {text[:80]!r}") from exc
        if isinstance(record, bool) or not isinstance(record, int) or record < 0:
            raise CursorError(f"the floor cursor {self.path} names no record: {record!r}")
        if not isinstance(chain, str):
            raise CursorError(f"the floor cursor {self.path} has no chain hash")
        return Cursor(record, chain)

    def save(self, cursor: Cursor) -> None:
        """Replace the cursor durably (raises OSError when the disk refuses)."""
        text = json.dumps({"record": cursor.record, "chain": cursor.chain})
        fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
        try:
            os.write(fd, text.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self._tmp, self.path)
        folder = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
