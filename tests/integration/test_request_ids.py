"""``--request-id`` is never done twice: a retry of any request the journal holds is
answered from its record, however many actions came between, across a restart too
(docs/cli.md, "Retrying safely"); the journal's ``requests`` index says which."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path
from typing import Any

from controller.control.desk import SEEN_IDS
from controller.control.protocol import Identity, Request, Role
from controller.core.commands import Bet, Cancel
from controller.journal import Journal, recover
from controller.journal.play import decide
from tests.support import PROCESS_DEADLINE_S, table_config, table_running

BET = {"position": 2, "amount": 1}
PATIENT = 60_000  # deadline_ms of a retry answered by the recall process (started then)


def exchange(path: Path, requests: list[dict[str, Any]], window: int = 16) -> list[Any]:
    """Send ``requests`` on one connection, at most ``window`` unanswered at a time, and
    read a reply to each, in order."""
    lines = [json.dumps(r).encode() + b"\n" for r in requests]
    replies: list[Any] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(PROCESS_DEADLINE_S)
        s.connect(str(path))
        answers = s.makefile("rb")
        s.sendall(b"".join(lines[:window]))
        for i in range(len(lines)):
            replies.append(json.loads(answers.readline()))
            if i + window < len(lines):
                s.sendall(lines[i + window])
    return replies


def others(count: int) -> list[dict[str, Any]]:
    """``count`` other dealer actions, each with an id of its own (a bet and its cancel
    on position 3, in turn: each one journaled)."""
    out: list[dict[str, Any]] = []
    for i in range(count):
        if i % 2 == 0:
            out.append({"op": "bet", "args": {"position": 3, "amount": 1}, "id": f"o-{i}"})
        else:
            out.append({"op": "cancel", "args": {"position": 3}, "id": f"o-{i}"})
    return out


def test_a_retry_after_4200_other_actions_is_answered_not_done_again(tmp_path: Path) -> None:
    """More actions than the socket keeps replies for (4,096) came between the bet and its
    retry: the retry is answered from the journal, and the $1 bet stays $1."""
    assert SEEN_IDS < 4200
    with table_running(tmp_path / "state", tmp_path / "control.sock") as table:
        (first,) = exchange(table.socket, [{"op": "bet", "args": BET, "id": "dealer-7"}])
        assert first["ok"] is True, first
        journal = table.controller.journal
        with journal.view() as db:  # what is tested is the ids, not the disk: quick commits
            db.execute("PRAGMA synchronous = OFF")
        done = exchange(table.socket, others(4200))
        assert all(r["ok"] for r in done), next(r for r in done if not r["ok"])
        retry = {"op": "bet", "args": BET, "id": "dealer-7", "deadline_ms": PATIENT}
        (again,) = exchange(table.socket, [retry])
        assert again["ok"] is True and again["id"] == "dealer-7", again
        assert "not done again" in again["repeated"], again
        assert "before the service restarted" not in again["repeated"]  # this start's own
        assert again["events"] == first["events"]  # what was decided then, re-derived
        assert table.status()["bets"] == {"2": 1}  # applied once
        (other,) = exchange(
            table.socket, [{"op": "bet", "args": {"position": 4, "amount": 1}, "id": "dealer-7"}]
        )
        assert other["ok"] is False and other["code"] == "request_id_reused"


def _tag(op: str, args: dict[str, Any], rid: str) -> str:
    """The tag the service journals with a request from this process's user."""
    who = Identity(uid=os.getuid(), gid=os.getgid(), user="dana")
    return Request(op, args, who, Role.DEALER, id=rid).tag


def test_a_retry_after_10050_records_and_a_restart_is_answered_not_done_again(
    tmp_path: Path,
) -> None:
    """The bet was journaled 10,050 records before the service (re)started: the retry is
    answered from its record, never placed a second time."""
    state = tmp_path / "state"
    with Journal(state / "journal.db", durable=False) as journal:
        replayed = recover(journal, table_config().firebet).replay
        placed = decide(journal, replayed, Bet(2, 1, actor="dana", request=_tag("bet", BET, "b-1")))
        assert placed.record is not None
        for i in range(10_050):
            command = Bet(3, 1, actor="dana") if i % 2 == 0 else Cancel(3, actor="dana")
            decide(journal, replayed, command)
        assert journal.last_record >= placed.record.record + 10_050
    with table_running(state, tmp_path / "control.sock") as table:
        assert table.status()["bets"] == {"2": 1}
        retry = {"op": "bet", "args": BET, "id": "b-1", "deadline_ms": PATIENT}
        (again,) = exchange(table.socket, [retry])
        assert again["ok"] is True, again
        want = f"decided at record {placed.record.record}, before the service restarted"
        assert want in again["repeated"], again
        assert table.status()["bets"] == {"2": 1}  # not placed again
        (fresh,) = exchange(table.socket, [{"op": "bet", "args": BET, "id": "b-2"}])
        assert fresh["ok"] is True and "repeated" not in fresh
        assert table.status()["bets"] == {"2": 2}  # another id is another bet


def test_a_journal_made_before_the_index_is_indexed_when_opened(tmp_path: Path) -> None:
    """A journal written by a version without the ``requests`` index gets it, filled from
    the command records it holds, the first time a writer opens it."""
    path = tmp_path / "journal.db"
    tag = _tag("bet", BET, "old-1")
    with Journal(path, durable=False) as journal:
        replayed = recover(journal, table_config().firebet).replay
        for _ in range(5):
            decide(journal, replayed, Cancel(3))
        placed = decide(journal, replayed, Bet(2, 1, actor="dana", request=tag)).record
        assert placed is not None
    db = sqlite3.connect(path)
    db.execute("DROP TABLE requests")  # as an older version left it
    db.commit()
    db.close()
    with Journal(path, durable=False) as journal:
        recover(journal, table_config().firebet)
        index = journal.requests()
        try:
            found = index.find(os.getuid(), "old-1")
            assert found is not None and found[1] == placed.record
            assert index.find(os.getuid(), "old-2") is None
            assert index.find(os.getuid() + 1, "old-1") is None  # ids are each user's own
        finally:
            index.close()
