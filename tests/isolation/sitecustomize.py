"""The test suite's fence around the host's own table: no test touches ``/etc/firebet`` or
``/var/lib/firebet``.

``tests/conftest.py`` installs :func:`install` in the test process and puts this folder
first on ``$PYTHONPATH``, so every Python process a test starts (``firebet run``, a
client, a crash worker) imports this file at start-up (``sitecustomize``) and gets the
same fence: opening, making, listing, moving or deleting anything under those folders
raises ``PermissionError`` naming the path and the rule, so the test that tried fails
by name instead of reading or changing a real table on the machine. Every test names
its own configuration, key and state directory.
"""

from __future__ import annotations

import os
import sys
from typing import Any

FENCED = ("/etc/firebet", "/var/lib/firebet")
ENV = "FIREBET_TEST_FENCE"  # set by conftest: the fence is on in this process tree
# the audit events (PEP 578) that open, make, list, move or delete a file by its path
_EVENTS = frozenset(
    {
        "open",
        "os.mkdir",
        "os.listdir",
        "os.scandir",
        "os.rename",
        "os.remove",
        "os.rmdir",
        "os.chmod",
        "os.chown",
        "os.symlink",
        "os.link",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
        "shutil.copyfile",
        "shutil.move",
    }
)


def fenced(path: Any) -> str | None:
    """The fenced folder ``path`` is in, or None."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return None  # a file descriptor
    if not path.startswith(("/", ".")) and "/" not in path:
        return None  # a bare name in the working directory (and open()'s mode letters)
    full = os.path.normpath(path if path.startswith("/") else os.path.join(os.getcwd(), path))
    for folder in FENCED:
        if full == folder or full.startswith(folder + "/"):
            return folder
    return None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event not in _EVENTS or not args:
        return
    for path in args[:2]:
        folder = fenced(path)
        if folder is not None:
            raise PermissionError(
                f"test fence: {event} {path!r}: the test suite never touches the host's "
                f"{folder} (name a --config, key and --state-dir of the test's own)"
            )


_installed = False


def install() -> None:
    """Fence this process (once)."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


if os.environ.get(ENV) == "1":
    install()
