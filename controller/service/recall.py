"""Game recall for the control socket's ``history``, and the full journal check after
ready: each in a process of its own.

A recall folds journal records through the rules again, which is Python work: on a
thread of the service it held the interpreter lock the engine thread needs between a
roll's commit and its ACK, so four clients asking for history in a loop lengthened
every roll's ACK. The recall runs in one worker process instead (a copy of the service
made at its start, :func:`prefork`, or ``python -m controller.service.recall`` where none
was made; at a lower scheduling priority than the table), on a read-only connection of
its own; the socket's
reading lane only waits for its answer, which comes back as the reply already encoded.
The worker remembers where each hand began, so a request reads the new records and the
hands asked, never the whole journal (``docs/architecture.md``, the control socket;
``docs/journal.md``).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import logging
import os
import pickle
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from controller.control.protocol import EncodedReply, Request
from controller.core.config import FireBetRules
from controller.core.errors import FirebetError, UsageError
from controller.journal import Journal, RecordKind, recover, store, verify
from controller.journal.history import MAX_HANDS, Recall, connect_read_only
from controller.journal.proof import Break
from controller.journal.replay import RecordError
from controller.journal.walk import replay_before
from controller.service.requests import int_arg

VERIFY_WAIT_S = 3600.0  # the full check of a year of rolls on a Pi Zero takes minutes
CANCEL_POLL_S = 1.0  # a long answer is awaited in slices this long, to hear a stop
IDLE_PRIORITY = True
"""The full check's process runs ``SCHED_IDLE`` (SPEC section 7: nothing after READY
competes with a roll). Beside busy loops such a process gets no CPU at all, so the test
suite turns this off for the tables it starts in its own process (``tests/conftest.py``);
``tests/integration/test_full_check_priority.py`` holds it on."""
GRACE_S = 2.0  # past the request's deadline, the worker is given up on and started again
NICE = 10  # the worker yields the CPU to the table's own process
PR_SET_PDEATHSIG = 1  # prctl(2)
MAX_FD = 1 << 20  # above any descriptor a forked worker inherits (closerange's end)


class _Following:
    """The worker's recall of one journal: its connection, its hand index, its last answer."""

    def __init__(self, rules: FireBetRules) -> None:
        self.rules = rules
        self.recall = Recall(rules)
        self.conn: sqlite3.Connection | None = None
        self.inode: tuple[int, int] | None = None
        # the last answer, by (last record, hands, detail, halt): asked again with nothing
        # new, it stands
        self.cache: tuple[tuple[Any, ...], bytes] | None = None

    def answer(
        self,
        path: str,
        hands: int,
        deadline: float,
        last: int,
        detail: bool = False,
        halted: tuple[int | None, str] | None = None,
    ) -> bytes:
        key = (last, hands, detail, halted)
        if self.cache is not None and self.cache[0] == key:
            return self.cache[1]
        st = os.stat(path)
        if self.conn is None or self.inode != (st.st_dev, st.st_ino):  # replaced: start again
            self.close()
            self.conn = connect_read_only(path)
            self.inode = (st.st_dev, st.st_ino)
        at = Break(halted[0]) if halted is not None else None
        # under a CPU quota (an installed table's CPUQuota=), half of it at most: a burst
        # of reading took the quota the table's rolls share (bench/after_ready.py --history)
        pace = QuotaPace(own_quota())
        lines = self.recall.history(
            self.conn,
            hands,
            deadline,
            detail=detail,
            halted_at=at,
            pace=(lambda: pace(0, 0)) if pace.rate is not None else None,
        )
        reply: dict[str, Any] = {"ok": True, "hands": lines}
        if halted is not None:  # the figures past the break are marked in each hand
            reply["halted"] = {"record": halted[0], "reason": halted[1]}
        body = json.dumps(reply, separators=(",", ":")).encode()
        self.cache = (key, body)
        return body

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn, self.inode, self.cache = None, None, None
        self.recall = Recall(self.rules)


_following: dict[tuple[str, str], _Following] = {}  # in the worker: by journal and rules


def _answer(
    path: str,
    rules: FireBetRules,
    hands: int,
    deadline: float,
    last: int,
    detail: bool = False,
    halted: tuple[int | None, str] | None = None,
) -> tuple[str, bytes | str]:
    """In the worker: ``("ok", reply without its id)``, or ``("usage" | "error", why)``.
    ``halted``: the halt's record and words (the hands are marked at that break)."""
    following = _following.get((path, repr(rules)))
    if following is None:
        following = _following[(path, repr(rules))] = _Following(rules)
    try:
        return "ok", following.answer(path, hands, deadline, last, detail, halted)
    except UsageError as exc:
        return "usage", str(exc)
    except FirebetError as exc:
        return "error", str(exc)
    except (sqlite3.Error, OSError) as exc:
        following.close()
        return "error", f"the journal cannot be read for history: {exc}"


def _decided(path: str, rules: FireBetRules, record: int) -> tuple[str, Any]:
    """In the worker: what record ``record`` decided, replayed from the journal:
    ``("ok", events)`` (each as ``Event.to_dict()`` gives it), or ``("ok", None)`` when
    it cannot be told (not a command, or a record on the way cannot be read)."""
    try:
        db = connect_read_only(path)
    except sqlite3.Error as exc:
        return "error", f"the journal cannot be read: {exc}"
    try:
        db.execute("BEGIN")
        replay, known = replay_before(db, rules, record)
        row = store.row(db, record)
        if not known or row is None or row.kind != RecordKind.COMMAND:
            return "ok", None
        try:
            step = replay.step(*row[:5])
        except RecordError:
            return "ok", None
        return "ok", [e.to_dict() for e in step.events]
    except sqlite3.Error as exc:
        return "error", f"the journal cannot be read: {exc}"
    finally:
        db.close()


CGROUP_ROOT = Path("/sys/fs/cgroup")
QUOTA_SHARE = 0.5  # of its cgroup's CPU quota, the most the full check takes
PACE_EVERY = 256  # records between two looks at the check's own CPU (about 2-3 ms of it)


def cgroup_quota(proc_cgroup: str, root: Path = CGROUP_ROOT) -> float | None:
    """The tightest CPU quota over this process's cgroup and its parents, in cores (0.1:
    10 ms in every 100 ms), from ``/proc/self/cgroup``'s text (``proc_cgroup``); None when
    there is none (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``)."""
    quotas: list[float] = []
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            base, v1 = root, False
        elif "cpu" in controllers.split(","):
            base, v1 = root / controllers, True
            if not base.exists():
                base = root / "cpu"
        else:
            continue
        folder = base / path.lstrip("/")
        while True:
            try:
                if v1:
                    quota = int((folder / "cpu.cfs_quota_us").read_text())
                    period = int((folder / "cpu.cfs_period_us").read_text())
                else:
                    text = (folder / "cpu.max").read_text().split()
                    quota = -1 if text[0] == "max" else int(text[0])
                    period = int(text[1])
                if quota > 0 and period > 0:
                    quotas.append(quota / period)
            except (OSError, ValueError, IndexError):
                pass
            if folder == base or folder.parent == folder:
                break
            folder = folder.parent
    return min(quotas) if quotas else None


class QuotaPace:
    """A progress callback that keeps this process's CPU under ``share`` of its cgroup's
    CPU quota (``CPUQuota=`` on an installed table), sleeping when it is ahead. At idle
    priority a check still spends the quota the table shares: at 10% of one core every
    roll waited about 95 ms while it ran (bench/after_ready.py, issue 31). No quota: no
    pacing (``SCHED_IDLE`` alone keeps it out of a roll's way)."""

    def __init__(self, quota: float | None, share: float = QUOTA_SHARE) -> None:
        self.rate = quota * share if quota else None  # CPU seconds a wall second
        self.start_cpu = time.process_time()
        self.start = time.monotonic()
        self.slept = 0.0

    def __call__(self, done: int, total: int) -> None:
        if self.rate is None:
            return
        used = time.process_time() - self.start_cpu
        ahead = used / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)
            self.slept += ahead


def own_quota() -> float | None:
    """This process's CPU quota in cores (:func:`cgroup_quota`; None: none, or unreadable)."""
    try:
        return cgroup_quota(Path("/proc/self/cgroup").read_text())
    except OSError:
        return None


def _verify(path: str, key_file: str, rules: FireBetRules) -> tuple[str, int | None, str]:
    """In a worker: the whole journal checked from genesis: ``("ok", None, "")``,
    ``("damage", record, reason)`` at the first problem, or ``("error", None, why)``; paced
    to half the cgroup's CPU quota when there is one (:class:`QuotaPace`)."""
    pace = QuotaPace(own_quota())  # from here: the recovery's CPU counts in the pace
    try:
        with Journal(path, key_file=key_file, read_only=True) as reader:
            recover(reader, rules)
            report = verify(reader, rules, progress=pace, progress_every=PACE_EVERY)
    except FirebetError as exc:
        return "error", None, str(exc)
    if report.ok:
        return "ok", None, ""
    record, reason = report.problems[0]
    return "damage", record, reason


def verify_apart(
    journal: Journal, rules: FireBetRules, cancel: threading.Event | None = None
) -> tuple[str, int | None, str]:
    """The service's full journal check after ready, in a worker process of its own (a
    long walk of folding and hashing, which on a thread would hold the interpreter lock
    the engine thread needs); see :func:`_verify` for the answer. The worker ends with it,
    or when ``cancel`` is set (the service stops: a check at idle priority on a busy core
    might otherwise outlive it, holding the journal open)."""
    try:
        worker = _new_worker("check")
    except OSError as exc:
        return "error", None, f"cannot start the checking process: {exc}"
    # nice from its first instruction (a history reader renices only once started: its
    # client waits for it)
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, worker.process.pid, NICE)
    try:
        # idle only once it is ready, so bound to die with the service: a process born at
        # idle priority beside busy loops got no CPU to get that far, and outlived the
        # service holding its journal and standard error
        worker.ready(VERIFY_WAIT_S, cancel)
        # at idle priority: the check takes only the CPU no roll wants (SPEC section 7);
        # nice alone still gave it a share beside the table (under a cgroup quota it still
        # spends the quota the table shares: README, "The CPU budget")
        if IDLE_PRIORITY:
            with contextlib.suppress(OSError, AttributeError):
                os.sched_setscheduler(worker.process.pid, os.SCHED_IDLE, os.sched_param(0))
        job = ("verify", str(journal.path), str(journal.key_file), rules)
        answer = worker.ask(job, VERIFY_WAIT_S, cancel)
    except TimeoutError:
        if cancel is not None and cancel.is_set():
            return "error", None, "the service stopped before the check ended"
        return "error", None, f"the check took longer than {VERIFY_WAIT_S:.0f} s"
    except (OSError, EOFError) as exc:
        return "error", None, f"the checking process stopped ({exc!r})"
    finally:
        worker.stop(kill=True)
    return answer


class HistoryRecall:
    """The last hands of the journal, from the recall worker process (the reading lane's)."""

    def __init__(self, rules: FireBetRules, default_hands: int) -> None:
        self.rules = rules
        self.default_hands = default_hands
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self.restarts = 0  # workers given up on (stuck past a deadline, or gone)

    @property
    def worker_pid(self) -> int | None:
        """The worker process's pid (None before the first request)."""
        return self._worker.process.pid if self._worker is not None else None

    def history(self, journal: Journal, request: Request) -> EncodedReply:
        """The reply to ``history``: ``{"ok": true, "hands": [...]}``, newest hand last."""
        hands = int_arg(request.args, "hands", self.default_hands)
        if not 1 <= hands <= MAX_HANDS:
            raise UsageError(f"hands must be from 1 to {MAX_HANDS}, not {hands}")
        job = (
            "history",
            str(journal.path),
            self.rules,
            hands,
            request.deadline,
            journal.last_record,
            bool(int_arg(request.args, "detail", 0)),
            (halt.record, halt.describe()) if (halt := journal.halted) is not None else None,
        )
        late = f"the last {hands} hands took longer than the request's deadline to read"
        kind, value = self._ask(job, request.deadline, late + "; ask for fewer hands")
        if kind == "ok":
            assert isinstance(value, bytes)
            return EncodedReply(value)
        if kind == "usage":
            raise UsageError(str(value))
        raise FirebetError(str(value))

    def decided(
        self, journal: Journal, record: int, deadline: float
    ) -> list[dict[str, Any]] | None:
        """What record ``record`` decided (its events), replayed from the journal by the
        worker; None when that cannot be told."""
        job = ("decided", str(journal.path), self.rules, record)
        kind, value = self._ask(job, deadline, f"record {record} took too long to replay")
        if kind != "ok":
            raise FirebetError(str(value))
        return value if isinstance(value, list) else None

    def _ask(self, job: tuple[object, ...], deadline: float, late: str) -> tuple[Any, ...]:
        """The worker's answer to ``job`` (started at the first request)."""
        with self._lock:  # one request at a time
            if self._worker is None:
                try:
                    self._worker = _new_worker("history")
                except OSError as exc:
                    raise FirebetError(f"cannot start the history reader: {exc}") from None
            worker = self._worker
            wait = max(0.0, deadline - time.monotonic()) + GRACE_S
            try:
                return worker.ask(job, wait)
            except TimeoutError:
                self._give_up()
                raise FirebetError(late) from None
            except (OSError, EOFError) as exc:
                self._give_up()
                raise FirebetError(f"the history reader stopped ({exc!r}); ask again") from None

    def _give_up(self) -> None:
        if self._worker is not None:
            self._worker.stop(kill=True)
            self._worker = None
            self.restarts += 1

    def close(self) -> None:
        """Stop the worker process."""
        with self._lock:
            if self._worker is not None:
                self._worker.stop()
                self._worker = None


FRAME = struct.Struct("!I")  # a message's length, before its pickled bytes
MAX_MESSAGE = 1 << 28  # a longer length is a broken pipe, not a message to wait for


class Pipe:
    """One end of a worker's pipe: pickled messages, each behind its length (what
    ``multiprocessing.connection.Connection`` does, without loading ``multiprocessing``:
    about 170 ms of CPU with no bytecode cache, after READY, on a Pi's budget)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: object) -> None:
        """Write ``message`` whole (BrokenPipeError when the other end is gone)."""
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        view = memoryview(FRAME.pack(len(data)) + data)
        while view:
            view = view[os.write(self.fd, view) :]

    def recv(self) -> Any:
        """The next message; EOFError when the other end closed its side."""
        (length,) = FRAME.unpack(self._exactly(FRAME.size))
        if length > MAX_MESSAGE:
            raise OSError(f"a message of {length:,} bytes on the worker's pipe")
        return pickle.loads(self._exactly(length))

    def poll(self, timeout: float) -> bool:
        """Whether a message (or the end) can be read within ``timeout`` seconds."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        return bool(ready)

    def close(self) -> None:
        """Close this end (once)."""
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def _exactly(self, n: int) -> bytes:
        chunks: list[bytes] = []
        while n:
            chunk = os.read(self.fd, min(n, 1 << 20))
            if not chunk:
                raise EOFError("the other end of the worker's pipe closed")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)


class _Forked:
    """A worker forked from the service (:func:`prefork`): what the code here asks of a
    ``subprocess.Popen``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)

    def poll(self) -> int | None:
        """Its exit code once it has ended (reaped here), else None."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            if self.returncode is None:
                self.returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            return self.returncode
        deadline, delay = time.monotonic() + timeout, 0.0005
        while (code := self.poll()) is None:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return code


class _Worker:
    """A recall process and the two ends of its pipes (pickled jobs and answers): a new
    interpreter (:meth:`spawn`) or a copy of the service made before its threads started
    (:meth:`fork`, :func:`prefork`)."""

    def __init__(self, process: subprocess.Popen[bytes] | _Forked, to: Pipe, from_: Pipe) -> None:
        self.process = process
        self._to = to
        self._from = from_
        self._ready = False

    @classmethod
    def spawn(cls) -> _Worker:
        """``python -m controller.service.recall``: its imports cost CPU as it starts."""
        # the very code the service runs: its package's folder first on the path, and
        # never the working directory (-P), where nobody should be able to plant a module
        here = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "controller.service.recall", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        assert process.stdin is not None and process.stdout is not None
        worker = cls(
            process, Pipe(os.dup(process.stdin.fileno())), Pipe(os.dup(process.stdout.fileno()))
        )
        process.stdin.close()
        process.stdout.close()
        return worker

    @classmethod
    def fork(cls) -> _Worker:
        """A copy of this process, which must have no thread but the one calling: it has
        every module the service loaded, so it starts with no interpreter and no import
        to pay for (on a Pi's quota those took the first seconds after READY)."""
        service = os.getpid()
        # close-on-exec (no later child inherits them), and never 0, 1 or 2, which the
        # copy makes its own standard streams (a service started with one closed)
        jobs_r, jobs_w = (_above_the_std_streams(fd) for fd in os.pipe())
        answers_r, answers_w = (_above_the_std_streams(fd) for fd in os.pipe())
        for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        pid = os.fork()
        if pid == 0:  # the worker: it never returns into the service's code
            code = 1
            try:
                with contextlib.suppress(OSError):  # the table's start goes first
                    os.setpriority(os.PRIO_PROCESS, 0, NICE)
                os.close(jobs_w)
                os.close(answers_r)
                _leave_the_service(keep=(jobs_r, answers_w))
                serve(Pipe(jobs_r), Pipe(answers_w), service)
                code = 0
            finally:
                os._exit(code)
        os.close(jobs_r)
        os.close(answers_w)
        return cls(_Forked(pid), Pipe(jobs_w), Pipe(answers_r))

    def _await(self, deadline: float, cancel: threading.Event | None) -> tuple[Any, ...]:
        """The next message from the worker; TimeoutError past ``deadline`` or at ``cancel``."""
        while not self._from.poll(min(CANCEL_POLL_S, max(deadline - time.monotonic(), 0.0))):
            if (cancel is not None and cancel.is_set()) or time.monotonic() >= deadline:
                raise TimeoutError
        message: tuple[Any, ...] = self._from.recv()
        return message

    def ready(self, wait: float, cancel: threading.Event | None = None) -> None:
        """Wait until the worker has started and is bound to die with this process
        (``PR_SET_PDEATHSIG``); TimeoutError after ``wait`` seconds or at ``cancel``."""
        if self._ready:
            return
        if self._await(time.monotonic() + wait, cancel) != ("ready",):
            raise OSError("the worker did not say it was ready")
        self._ready = True

    def ask(
        self, job: tuple[object, ...], wait: float, cancel: threading.Event | None = None
    ) -> tuple[Any, ...]:
        """Send ``job`` (its name, then its arguments); its answer, or TimeoutError after
        ``wait`` seconds (or as soon as ``cancel`` is set: the service is stopping)."""
        deadline = time.monotonic() + wait
        self.ready(wait, cancel)
        self._to.send(job)
        return self._await(deadline, cancel)

    def stop(self, *, kill: bool = False) -> None:
        """End the worker: close its input (it exits) or kill it; reap it."""
        with contextlib.suppress(OSError):
            self._to.close()
        if kill:
            with contextlib.suppress(OSError, AttributeError):
                # off idle priority first where allowed: a killed process needs CPU to end
                os.sched_setscheduler(self.process.pid, os.SCHED_OTHER, os.sched_param(0))
            with contextlib.suppress(OSError):
                self.process.kill()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            self._from.close()


SPARES = ("check", "history")  # the workers :func:`prefork` makes, by what they are for
_spares: dict[str, _Worker] = {}
_spares_lock = threading.Lock()


def prefork() -> bool:
    """At the start of ``firebet run`` (and ``firebet sim``), before any thread: fork the
    full check's worker and the history reader's, ready for when they are wanted. A copy
    of the service has every module it needs, so the check after READY starts with no
    interpreter and no imports, which on a Pi's CPU quota took the table's rolls' CPU for
    the first seconds after READY (issue 31). Nothing is forked beside another thread (it
    could copy a lock that thread holds): False then, and the workers are started as new
    interpreters when wanted."""
    if threading.active_count() != 1:
        return False
    with _spares_lock:
        for purpose in SPARES:
            if purpose not in _spares:
                try:
                    _spares[purpose] = _Worker.fork()
                except OSError:
                    return False
    return True


def _take_spare(purpose: str) -> _Worker | None:
    with _spares_lock:
        return _spares.pop(purpose, None)


def _new_worker(purpose: str) -> _Worker:
    """The worker :func:`prefork` made for ``purpose`` while it lives, else a new
    interpreter (a copy killed meanwhile, by the OOM killer or a technician, is reaped and
    replaced, never handed a request it cannot answer)."""
    spare = _take_spare(purpose)
    if spare is not None:
        if spare.process.poll() is None:
            return spare
        spare.stop()
    return _Worker.spawn()


def drop_spares() -> None:
    """Stop the workers :func:`prefork` made that nobody took (the service is stopping)."""
    with _spares_lock:
        spares = list(_spares.values())
        _spares.clear()
    for worker in spares:
        worker.stop(kill=True)


def _above_the_std_streams(fd: int) -> int:
    """``fd``, or a close-on-exec copy of it numbered 3 or more (the original closed)."""
    if fd > 2:
        return fd
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def _leave_the_service(keep: tuple[int, ...]) -> None:
    """In a worker just forked: let go of the service's files, log handlers and garbage.

    The copy holds the service's objects, some around descriptors closed here: none may
    ever be collected (its finalizer would close whatever the number means by then), so
    they are frozen out of the collector, and the worker never returns into the
    service's code (:meth:`_Worker.fork`). Standard input is ``/dev/null`` and standard
    output standard error, as for a spawned worker."""
    gc.freeze()
    null = os.open(os.devnull, os.O_RDONLY)
    if null != 0:  # 0 when the service had no standard input
        os.dup2(null, 0)
        os.close(null)
    with contextlib.suppress(OSError):  # no standard error: print nowhere
        os.dup2(2, 1)
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, MAX_FD)
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        if isinstance(logger, logging.Logger):
            logger.handlers = []  # not closed: their files are the service's
    logging.lastResort = logging.StreamHandler(sys.stderr)
    logging.lastResort.setLevel(logging.WARNING)


def _die_with_the_service(service: int) -> None:
    """Ask Linux to kill this worker when the service's thread that started it ends (a
    SIGKILLed service leaves no worker behind, even one in the middle of a long job)."""
    import ctypes  # the worker's only: the service never loads it

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != service:  # the service was already gone before the request took effect
        raise SystemExit(0)


def serve(jobs: Pipe, answers: Pipe, service: int) -> None:
    """The worker's loop: say it is ready, then answer each job until the service closes
    the pipe. ``service`` is the pid of the process that started it."""
    _die_with_the_service(service)
    with contextlib.suppress(OSError):
        if os.getpriority(os.PRIO_PROCESS, 0) < NICE:  # reading clients wait before the table
            os.setpriority(os.PRIO_PROCESS, 0, NICE)
    try:
        answers.send(("ready",))
    except BrokenPipeError:
        return
    while True:
        try:
            job = jobs.recv()
        except EOFError:
            return
        name, *args = job
        try:
            answers.send(_JOBS[name](*args))
        except BrokenPipeError:  # the service stopped waiting: nothing to answer
            return


_JOBS: dict[str, Callable[..., tuple[Any, ...]]] = {
    "history": _answer,
    "verify": _verify,
    "decided": _decided,
}

if __name__ == "__main__":
    # the pipes are this process's stdin and stdout; anything printed goes to stderr
    _jobs, _answers = Pipe(os.dup(0)), Pipe(os.dup(1))
    os.dup2(2, 1)
    serve(_jobs, _answers, int(sys.argv[1]))
