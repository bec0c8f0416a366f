"""The table's secret key: the chain is HMAC-SHA256 with it (docs/journal.md).

The key file holds 32 random bytes as 64 hexadecimal digits and a newline. The
installed one, ``/etc/firebet/journal.key``, is made by the package's first install:
root's, mode 0640, group ``firebet-key`` (only the service's user is in it); a key this
module makes (a bench's) is mode 0600, the maker's. When it is missing, the first start on a state
directory that never held a journal makes it; a journal whose key is gone
halts the table.

Which file is the key (:func:`key_file_for`, the one answer every command uses):
``[journal] key_file`` when the configuration names one (relative to the state
directory); else ``/etc/firebet/journal.key`` for the installed table's state
directory ``/var/lib/firebet``, and ``journal.key`` beside the journal for any
other (a checkout's ``./var``, ``firebet sim``, a bench's ``--state-dir``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from controller.core.config.model import (
    INSTALLED_KEY_FILE,
    INSTALLED_STATE_DIR,
    KEY_BESIDE_JOURNAL,
)
from controller.core.errors import FirebetError, JournalIntegrityError, JournalKeyUnreadable
from controller.journal.recipe import KEY_BYTES

log = logging.getLogger("firebet.journal")


def key_file_for(setting: str, state_dir: str | Path) -> tuple[Path, str]:
    """The key file of the journal in ``state_dir`` and why it is that one.

    ``setting`` is ``[journal] key_file`` ("" when the configuration names none).
    """
    state = Path(state_dir)
    if setting:
        named = Path(setting)
        return (named if named.is_absolute() else state / named), "[journal] key_file"
    if _same_folder(state, INSTALLED_STATE_DIR):
        return INSTALLED_KEY_FILE, "the installed table's key"
    return state / KEY_BESIDE_JOURNAL, "beside the journal: not the installed table's"


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return a.absolute() == b.absolute()


def read_key(path: Path) -> bytes:
    """The key in ``path``.

    Raises :class:`JournalKeyUnreadable` when this user may not read it (the
    message says who can), :class:`JournalIntegrityError` when it is missing
    or not a key.
    """
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError as exc:
        raise JournalIntegrityError(
            None,
            f"the journal key {path} is missing: without it no record can be checked "
            "(restore the key from the install's backup; see docs/runbook.md)",
        ) from exc
    except PermissionError as exc:
        raise JournalKeyUnreadable(path) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise JournalIntegrityError(None, f"the journal key {path} cannot be read: {exc}") from exc
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise JournalIntegrityError(
            None, f"the journal key {path} is not a key ({KEY_BYTES * 2} hexadecimal digits)"
        )
    return key


def make_key(path: Path) -> bytes:
    """A new random key written to ``path`` (mode 0600, never over an existing file)."""
    import secrets  # a new table's only: a start with its key never loads random, base64

    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(KEY_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, key.hex().encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return key


def key_for_new(path: Path) -> bytes:
    """The key for a journal about to be made: the one in ``path``, or a new one there.

    Raises :class:`FirebetError` when no key can be made (the message says where
    the install makes it).
    """
    if path.exists():
        return read_key(path)
    log.warning("no journal key at %s: making one (a new table)", path)
    try:
        return make_key(path)
    except OSError as exc:
        raise FirebetError(
            f"cannot make the journal key {path}: {exc.strerror or exc} "
            "(systemd/install.sh makes it; [journal] key_file names it)",
        ) from exc
