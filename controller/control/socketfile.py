"""The control socket's file on disk: bound safely, a stale one replaced, a live one never.

The socket is bound under a temporary name, given mode 0660 and only then renamed into
place, so it is never reachable at its path with the wrong permissions. A socket file
left by a dead service is replaced; one a live service answers on, or a path that is not
a socket, is refused. At stop the file is removed only if it is still ours (a successor
may have bound the path since). See ``docs/architecture.md`` (the control socket).
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import socket
import stat
from pathlib import Path

from controller.core.errors import FirebetError, UsageError

log = logging.getLogger("firebet.control")

LISTEN_BACKLOG = 512  # connections the kernel holds until the selector accepts them
SOCKET_MODE = 0o660
FOLDER_MODE = 0o750  # a folder made for the socket (as systemd's RuntimeDirectoryMode)
AF_UNIX_PATH_MAX = 107  # sun_path is 108 bytes with the terminating NUL
RESERVED_FDS = 64  # file descriptors left for the journal, the reader, the lamps

Inode = tuple[int, int]


def bind(path: Path) -> tuple[socket.socket, Inode]:
    """A non-blocking listening socket at ``path`` (mode 0660) and the file's inode.

    Raises :class:`UsageError` for a path too long for a Unix socket and
    :class:`FirebetError` if another live server answers on the path or the path is
    something other than a socket.
    """
    if len(os.fsencode(path)) > AF_UNIX_PATH_MAX:
        raise UsageError(
            f"control socket path {path} is too long for a Unix socket "
            f"(at most {AF_UNIX_PATH_MAX} bytes)"
        )
    make_folder(path.parent)
    clear_stale(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if len(os.fsencode(tmp)) > AF_UNIX_PATH_MAX:
        tmp = path.with_name(f".cs{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        listener.bind(str(tmp))
        os.chmod(tmp, SOCKET_MODE)
        listener.listen(LISTEN_BACKLOG)
        os.replace(tmp, path)
    except OSError:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    listener.setblocking(False)
    st = os.stat(path)
    return listener, (st.st_dev, st.st_ino)


def make_folder(folder: Path) -> None:
    """The socket's folder, made (mode 0750) when missing: the unit's ``RuntimeDirectory``
    makes ``/run/firebet``, and a start by hand (``sudo firebet run``) makes it too, owned
    by whoever starts it. A folder that cannot be made is named with the reason."""
    if folder.is_dir():
        return
    try:
        folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise FirebetError(
            f"cannot make the control socket's folder {folder}: {exc.strerror or exc} "
            "([control] socket names where the socket goes; the installed unit makes "
            "/run/firebet itself)"
        ) from exc
    log.info("made the control socket's folder %s (mode 0750)", folder)


def clear_stale(path: Path) -> None:
    """Remove a socket file nobody answers on; refuse a live one or a non-socket."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise FirebetError(
            f"{path} exists and is not a socket: refusing to replace it "
            "(check the [control] socket setting)"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except (ConnectionRefusedError, FileNotFoundError):
        log.info("removing stale control socket %s", path)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    except OSError as exc:
        raise FirebetError(f"cannot check the control socket {path}: {exc}") from exc
    finally:
        probe.close()
    raise FirebetError(f"another firebet service is already serving the control socket {path}")


def remove(path: Path, inode: Inode | None) -> None:
    """Remove the socket file if it is still the one bound (never a successor's)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if (st.st_dev, st.st_ino) == inode:
        path.unlink()


def cap_connections(wanted: int) -> int:
    """Raise the open-file limit as far as allowed; the connection cap that fits under it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = wanted + 2 * RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
    if soft != resource.RLIM_INFINITY:
        return max(1, min(wanted, soft - RESERVED_FDS))
    return wanted
