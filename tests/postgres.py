"""A real PostgreSQL for the floor tests: Debian's server on a free local port, in a temp dir.

:class:`Postgres` runs ``initdb`` and ``postgres`` from ``/usr/lib/postgresql/<v>/bin``
(``.ci/setup-host test`` installs the ``postgresql`` package when missing), listening on
127.0.0.1 only, with a password (scram) for its one superuser. PostgreSQL refuses to run
as root, and the tests run as root here and in CI: then the server runs as the system
user ``postgres`` (the package's), or else ``firebet-pg``, made here once
(``useradd --system``), through ``setpriv`` (which execs: the process we hold is the
server itself, so stopping it stops the server). Each test gets a database of its own
(:meth:`Postgres.database`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.broker import free_port
from tests.support import wait_for

SUPERUSER = "firebet"
PASSWORD = "floor-store-secret"
FALLBACK_USER = "firebet-pg"


def bin_dir() -> Path:
    """The newest installed server's ``bin`` folder."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda p: int(Path(p).parent.parent.name.split(".")[0]),
    )
    if not found:
        raise AssertionError(
            "PostgreSQL is not installed: the floor's PostgreSQL tests need its server "
            "(Debian/Ubuntu: sudo apt-get install postgresql; `make setup-test` installs it)"
        )
    return Path(found[-1]).parent


def server_user() -> pwd.struct_passwd | None:
    """The user the server runs as when we are root (None: run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", FALLBACK_USER):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
         FALLBACK_USER],
        check=True, capture_output=True,
    )  # fmt: skip
    return pwd.getpwnam(FALLBACK_USER)


class Postgres:
    """One PostgreSQL server on ``127.0.0.1:port``, its data in a temp dir of its own."""

    def __init__(self) -> None:
        self.bin = bin_dir()
        self.user = server_user()
        # not under pytest's tmp dir: root's is closed to the server's user
        self.folder = Path(tempfile.mkdtemp(prefix="firebet-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = self.folder / "postgres.log"
        self._made = 0

    def _as_server(self, argv: list[str]) -> list[str]:
        if self.user is None:
            return argv
        return ["setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}",
                "--init-groups", "--", *argv]  # fmt: skip

    def start(self) -> None:
        """initdb, then the server; it is stopped again when it does not come up."""
        pwfile = self.folder / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.user is not None:
            for path in (self.folder, pwfile):
                os.chown(path, self.user.pw_uid, self.user.pw_gid)
        subprocess.run(
            self._as_server([
                str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER,
                f"--pwfile={pwfile}", "--auth=scram-sha-256", "--encoding=UTF8",
                "--locale=C", "--no-sync",
            ]),
            check=True, capture_output=True, cwd=self.folder,
        )  # fmt: skip
        pwfile.unlink()
        log = open(self.log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self._as_server([
                str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
                "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                "-c", "fsync=off", "-c", "max_connections=200",
            ]),
            stdout=log, stderr=subprocess.STDOUT, cwd=self.folder,
        )  # fmt: skip
        log.close()
        try:
            wait_for(self._ready, timeout=60, what=f"PostgreSQL on port {self.port}")
        except BaseException:
            self.stop()
            raise

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(
                f"postgres exited {self.proc.returncode}:\n{self.log.read_text(errors='replace')}"
            )
        import psycopg

        try:
            psycopg.connect(self.url("postgres"), connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    def url(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database; its URL."""
        import psycopg

        self._made += 1
        name = f"floor_{os.getpid()}_{self._made}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as con:
            con.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        """A fast shutdown (SIGINT), then the temp dir is removed."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.proc = None
        deadline = time.monotonic() + 5
        while True:
            try:
                shutil.rmtree(self.folder)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
