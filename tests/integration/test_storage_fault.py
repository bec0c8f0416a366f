"""storage_fault: a full disk or a read-only file system is a mode of its own, with its own
lamp pattern; rolls are refused and not ACKed, status is served, and play resumes by itself
when the journal can be written again (docs/runbook.md, issue 9 item 8).

A real small file system: a tmpfs of a few MiB, filled up and remounted read-only (root).
"""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.core.lamps import Effect, Mode, desired_outputs
from controller.core.lamps import view_from_state as lights_view
from controller.core.state import TableState
from tests.support import WAIT_DEADLINE_S, python_process, read_line, table_running, wait_for


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if _run("mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)).returncode:
        pytest.skip("needs root that may mount a tmpfs (CI and the developers' machines do)")
    try:
        yield mnt
    finally:
        _run("umount", "-l", str(mnt))


def test_storage_fault_has_its_own_lamp_pattern() -> None:
    state = TableState(points=(4, 6))
    run = desired_outputs(lights_view(state, Mode.RUNNING))
    storage = desired_outputs(lights_view(state, Mode.STORAGE_FAULT))
    assert storage.status == Effect.WINK
    assert storage.status not in {
        desired_outputs(lights_view(state, m)).status for m in Mode if m != Mode.STORAGE_FAULT
    }
    assert storage.markers == run.markers  # the markers still show the game: it is durable


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    _run("dd", "if=/dev/zero", f"of={filler}", "bs=64k")  # until the disk is full
    return filler


@pytest.mark.slow
def test_disk_full_is_storage_fault_then_play_resumes_by_itself(
    small_disk: Path, tmp_path: Path
) -> None:
    with table_running(small_disk / "state", tmp_path / "control.sock") as t:
        t.throw(3, 3)  # point 6
        filler = _fill(small_disk)
        refused: int | None = None
        for _ in range(40):  # the journal's WAL may still hold a few records
            seq = t.throw(2, 3, acked=False)

            def answered(s: int = seq) -> bool:  # ACKed, or refused by the storage fault
                return s in t.device.acked or t.status()["mode"] == "storage_fault"

            wait_for(answered, what="the roll's ACK or the storage fault")  # however slow
            if seq not in t.device.acked:
                refused = seq
                break
        assert refused is not None, "the disk never filled up"
        wait_for(lambda: t.status()["mode"] == "storage_fault", what="the storage fault")
        rolls = t.status()["rolls"]
        wait_for(lambda: t.device.transmissions[refused] >= 4, what="the reader's repeats")
        s = t.status()  # status is still served
        assert s["mode"] == "storage_fault" and s["storage_fault"] and s["rolls"] == rolls
        assert refused not in t.device.acked
        assert t.controller.lights is not None
        assert t.controller.lights._applied["status"] == Effect.WINK
        filler.unlink()
        assert t.device.wait_acked(refused, timeout=30)  # resumes by itself
        wait_for(lambda: t.status()["mode"] == "running", what="play to resume")
        assert t.status()["rolls"] == rolls + 1
        assert t.controller.lights._applied["status"] == Effect.ON


# a reader of the journal in another process (a full check that outlived its service,
# an auditor's export): its WAL and WAL index stay when the table stops
READER = """
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
db.execute("SELECT count(*) FROM records").fetchone()
print("reading", flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("wal_left", "held"),
    [(False, False), (True, False), (True, True)],
    ids=["clean", "wal-left", "wal-left-and-a-reader-held"],
)
def test_read_only_file_system_at_start_is_storage_fault_not_a_halt(
    small_disk: Path,
    tmp_path: Path,
    wal_left: bool,
    held: bool,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # wal-left: the table stopped while another process read its journal, so its WAL and
    # WAL index stayed; on the read-only file system every reader the service opened got
    # SQLite's index of the WAL read-only, and the writer reopened after the remount
    # shared it: "attempt to write a readonly database" at every try, the storage fault
    # never ended (found beside four busy loops, where a slow full check outlived the
    # first table)
    state = small_disk / "state"
    with contextlib.ExitStack() as stack, table_running(state, tmp_path / "first.sock") as t:
        t.throw(4, 4)
        last = t.throw(5, 5)
        if wal_left:
            reader = stack.enter_context(python_process(READER, str(state / "journal.db")))
            assert read_line(reader.stdout, "the reader") == "reading\n"
    if wal_left:  # (beside busy loops the first table's slow full check may leave it too)
        assert (state / "journal.db-wal").exists()
    assert _run("mount", "-o", "remount,ro", str(small_disk)).returncode == 0
    with table_running(state, tmp_path / "second.sock") as t:
        s = t.status()
        assert s["mode"] == "storage_fault", s
        assert s["halted"] is None and "read-only" in s["storage_fault"]
        assert s["rolls"] == 2 and s["point"] == 8  # recovered and served
        # the same reader, still counting (a fresh simulator restarts at 0 with a HELLO
        # the controller did not hear: its roll could reuse the last seq, a SEQ_CONFLICT)
        for _ in range(last + 1):
            t.device.heartbeat()
        seq = t.throw(6, 6, acked=False)
        wait_for(lambda: t.device.transmissions[seq] >= 3, what="the reader's repeats")
        assert seq not in t.device.acked and t.status()["rolls"] == 2
        # a dealer's bet with a request id meanwhile: the journal's index of requests is
        # read (a retry is never done twice), and refused with the storage fault
        bet = {"op": "bet", "args": {"position": 2, "amount": 1}, "id": "dealer-1"}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(WAIT_DEADLINE_S)
            c.connect(str(t.socket))
            c.sendall(json.dumps(bet).encode() + b"\n")
            reply = json.loads(c.makefile("rb").readline())
        assert reply["ok"] is False and "read-only" in reply["error"], reply

        # held: a reader of this very process that the table does not know of (a plug-in,
        # a debugger) opened meanwhile and closed only after the table first reopened its
        # journal for writing: that writer cannot write, and the table opens it again
        def unwritable() -> int:  # the probe's word on a reopened journal it cannot write
            return sum("cannot be written yet" in r.getMessage() for r in caplog.records)

        other: sqlite3.Connection | None = None
        if held:
            other = sqlite3.connect(f"file:{state / 'journal.db'}?mode=ro", uri=True)
            other.execute("SELECT count(*) FROM records").fetchone()
        assert _run("mount", "-o", "remount,rw", str(small_disk)).returncode == 0
        if other is not None:  # the table's writer shares that reader's WAL index
            journal = t.controller.journal
            reopen, reopens = journal.reopen, []

            def counted(tail: Any) -> Any:
                reopens.append(tail)
                return reopen(tail)

            monkeypatch.setattr(journal, "reopen", counted)  # (counted, done as before)
            wait_for(lambda: len(reopens) >= 3, what="three reopened journals refused")
            assert unwritable() > 0
            other.close()
        assert t.device.wait_acked(seq, timeout=WAIT_DEADLINE_S)
        wait_for(lambda: t.status()["mode"] == "running", what="play to resume")
        assert t.status()["rolls"] == 3
        assert unwritable() == (1 if held else 0)  # said once, however many tries it took
