"""The full check's and the history reader's processes are copies of the service made at
its start, before its threads (issue 31): after READY they start with no interpreter and
no imports to pay for, which on a Pi's CPU quota took the table's rolls' CPU for the first
seconds after READY (``bench/after_ready.py --cpu 0.1 --period 100``: 7 of 487 rolls over
20 ms, all in the first 3 s, before; none after). A copy holds nothing of the service's
but its standard error and its own two pipes, runs at nice 10, and dies with the service."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.integration.test_full_check_priority import gone
from tests.support import PROCESS_DEADLINE_S, ROOT, python_process, read_line, wait_for

# a journal of 30 rolls in the folder argv[1], built and closed (its head file's thread
# ended: nothing is forked beside a thread), and what the scripts below use
A_JOURNAL = """
import json, os, signal, socket, sys, time
from controller.core.commands import Roll
from controller.core.engine import Engine
from controller.journal import Journal, recover
from controller.journal.play import decide
from controller.service import recall

rules = Engine().rules
journal = Journal(sys.argv[1] + "/journal.db")
replayed = recover(journal, rules).replay
for i in range(30):
    decide(journal, replayed, Roll(1 + i % 6, 1 + (i // 6) % 6, seq=i))
journal.close()
"""

# a stand-in for `firebet run`: files open (the journal's, a socket) when the copies are
# made; then the check and a history reader's request
SERVICE = (
    A_JOURNAL
    + """
held = open(sys.argv[1] + "/journal.db", "rb")
listening = socket.socket(socket.AF_UNIX)
listening.bind(sys.argv[1] + "/control.sock")
assert recall.prefork()
journal = Journal(sys.argv[1] + "/journal.db")
spares = {purpose: worker.process.pid for purpose, worker in recall._spares.items()}
print(json.dumps(spares), flush=True)
sys.stdin.readline()  # the test looks at the copies
asked = []
real = recall._Worker.ask
def ask(self, job, wait, cancel=None):
    asked.append((job[0], self.process.pid))
    return real(self, job, wait, cancel)
recall._Worker.ask = ask
checked = recall.verify_apart(journal, rules)
history = recall.HistoryRecall(rules, 3)
events = history.decided(journal, 5, time.monotonic() + 60)
print(json.dumps({"checked": checked, "asked": asked, "events": events,
                  "spares": sorted(recall._spares)}), flush=True)
sys.stdin.readline()  # the test kills this process here
"""
)


def run_python(
    script: str, *args: str, without_std_streams: bool = False
) -> subprocess.CompletedProcess[str]:
    """``python -c SCRIPT ARGS`` from the checkout, to its end, its output captured;
    ``without_std_streams``: started with its standard input and output closed."""
    command = [sys.executable, "-c", script, *args]
    if without_std_streams:
        command = ["sh", "-c", 'exec "$0" "$@" <&- >&-', *command]
    return subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=PROCESS_DEADLINE_S
    )


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def test_the_check_and_the_history_reader_are_copies_made_before_any_thread(
    tmp_path: Path,
) -> None:
    with python_process(SERVICE, str(tmp_path)) as service:
        assert service.stdin is not None and service.stdout is not None
        spares = json.loads(read_line(service.stdout, "the spares' pids"))
        assert sorted(spares) == ["check", "history"]
        assert sorted(children_of(service.pid)) == sorted(spares.values())
        for pid in spares.values():
            # a copy of this very process: no new interpreter was started
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert cmdline == Path(f"/proc/{service.pid}/cmdline").read_bytes()
            assert os.getpriority(os.PRIO_PROCESS, pid) >= 10
            # nothing of the service's open: not its journal, not its socket
            wait_for(lambda pid=pid: len(os.listdir(f"/proc/{pid}/fd")) == 5, what="fds closed")
            held = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            assert not {h for h in held if str(tmp_path) in h or h.startswith("socket:")}, held
            assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
            assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2")
        service.stdin.write("go\n")
        service.stdin.flush()
        done = json.loads(read_line(service.stdout, "the check and the history"))
        assert done["checked"] == ["ok", None, ""]
        assert done["asked"] == [["verify", spares["check"]], ["decided", spares["history"]]]
        assert done["events"] and done["spares"] == []
        wait_for(lambda: gone(spares["check"]), what="the check's process to end with it")
        assert children_of(service.pid) == [spares["history"]]  # no interpreter started
        service.kill()  # kill -9: the history reader dies with the service
        service.wait(timeout=PROCESS_DEADLINE_S)
        wait_for(lambda: gone(spares["history"]), what="the history reader to die with it")


KILLED_AT_START = """
import json, sys
from controller.service import recall
assert recall.prefork()
for worker in recall._spares.values():
    assert worker._from.poll(60)  # it said it is ready: bound to die with this process
print(json.dumps([w.process.pid for w in recall._spares.values()]), flush=True)
sys.stdin.readline()
"""


def test_copies_nobody_took_die_with_a_killed_service(tmp_path: Path) -> None:
    with python_process(KILLED_AT_START) as service:
        assert service.stdout is not None
        pids = json.loads(read_line(service.stdout, "the spares' pids"))
        for pid in pids:  # stopped: only the kernel's hand can end them (PR_SET_PDEATHSIG)
            os.kill(pid, signal.SIGSTOP)
        os.kill(service.pid, signal.SIGKILL)
        service.wait(timeout=PROCESS_DEADLINE_S)
        for pid in pids:
            wait_for(lambda pid=pid: gone(pid), what="a spare to die with its service")


BESIDE_A_THREAD = """
import threading
from controller.service import recall
hold = threading.Event()
threading.Thread(target=hold.wait, daemon=True).start()
print(recall.prefork(), sorted(recall._spares), flush=True)
hold.set()
"""


def test_nothing_is_copied_beside_another_thread() -> None:
    """A copy made beside another thread could hold a lock that thread held: none is made,
    and the workers start as new interpreters when wanted."""
    out = run_python(BESIDE_A_THREAD)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "[]"]


SPARE_KILLED = (
    A_JOURNAL
    + """
assert recall.prefork()
spare = recall._spares["history"].process.pid
os.kill(spare, signal.SIGKILL)  # the OOM killer, or a technician's kill
while open(f"/proc/{spare}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
    time.sleep(0.01)
journal = Journal(sys.argv[1] + "/journal.db")
history = recall.HistoryRecall(rules, 3)
events = history.decided(journal, 5, time.monotonic() + 60)
worker = history._worker.process
print(json.dumps({"events": bool(events), "spare": spare, "pid": worker.pid,
                  "args": getattr(worker, "args", None), "restarts": history.restarts}))
history.close()
recall.drop_spares()
"""
)


def test_a_copy_killed_before_its_first_request_is_replaced_not_asked(tmp_path: Path) -> None:
    """The history reader's copy killed while it waited (the OOM killer, a technician):
    the first request goes to a new interpreter, not to a dead pipe ("ask again")."""
    out = run_python(SPARE_KILLED, str(tmp_path))
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout)
    assert said["events"] and said["restarts"] == 0 and said["pid"] != said["spare"]
    assert "controller.service.recall" in said["args"]
    assert gone(said["spare"])  # reaped


NO_STD_STREAMS = (
    A_JOURNAL
    + """
assert recall.prefork()
copy = recall._spares["check"].process.pid
journal = Journal(sys.argv[1] + "/journal.db")
checked = recall.verify_apart(journal, rules)
os.write(2, (json.dumps({"checked": checked, "copy": copy}) + "\\n").encode())
"""
)


def test_a_service_started_without_standard_input_or_output_still_makes_working_copies(
    tmp_path: Path,
) -> None:
    """The pipes to a copy are never numbered 0, 1 or 2, which the copy makes its own
    standard streams: with the service's standard input and output closed, ``os.pipe``
    gives those numbers first."""
    out = run_python(NO_STD_STREAMS, str(tmp_path), without_std_streams=True)
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stderr.strip().splitlines()[-1])
    assert said["checked"] == ["ok", None, ""]
