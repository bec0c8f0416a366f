"""One exit-code rule, applied everywhere (issue 23): 0 ok, 1 refused, 2 bad usage or
input, 3 no service, 4 integrity, the offline and the socket path alike; ``--json`` gives
a refusal's stable code beside its words; ``--request-id`` lets a script retry safely.
Real ``firebet`` processes against a real ``firebet run --simulated-reader``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from controller.core.errors import Refusal
from tests.integration.test_clear_halt_preview import build
from tests.support import PROCESS_DEADLINE_S, ROOT, run_firebet, wait_for

pytestmark = pytest.mark.slow


@contextmanager
def bench(state: Path) -> Iterator[tuple[str, ...]]:
    """A bench service on ``state``; yields the ``--state-dir`` words for its clients."""
    where = ("--state-dir", str(state))
    log = (state.parent / f"{state.name}.log").open("w")
    service = subprocess.Popen(
        [sys.executable, "-m", "controller", "run", "--simulated-reader", "--pin-factory",
         "mock", *where],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for(
            lambda: run_firebet("status", *where).returncode == 0,
            timeout=PROCESS_DEADLINE_S,
            what="the bench service",
        )
        yield where
    finally:
        service.terminate()
        service.wait(timeout=PROCESS_DEADLINE_S)
        log.close()


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    (line,) = proc.stdout.splitlines()
    body: dict[str, object] = json.loads(line)
    return body


def test_a_running_table_answers_each_case_with_its_code(tmp_path: Path) -> None:
    with bench(tmp_path / "bench") as where:
        # a manual roll while the reader works is a refusal, not bad usage
        roll = run_firebet("roll", "3", "4", "--json", *where)
        assert roll.returncode == 1, roll.stderr
        assert _json(roll)["code"] == Refusal.READER_WORKING == "reader_working"
        assert "the dice reader is working" in roll.stderr
        # no such position is bad input, like a wager of 0
        for words in (("bet", "17", "1"), ("cancel", "17")):
            proc = run_firebet(*words, "--json", *where)
            assert proc.returncode == 2, proc.stderr
            assert _json(proc) == {
                "ok": False,
                "code": "no_such_position",
                "error": "position 17 is not on this layout (1 to 16)",
                "exit": 2,
            }
        assert run_firebet("bet", "2", "0", *where).returncode == 2
        # the history cap is bad usage, on the socket path as offline
        for asked in ("1001", "0"):
            proc = run_firebet("history", "--hands", asked, *where)
            assert proc.returncode == 2 and "from 1 to 1,000" in proc.stderr, proc.stderr
        assert run_firebet("history", "--hands", "1000", *where).returncode == 0
        # refusals of the rules carry their code; nothing to void is 1
        void = run_firebet("void", "--json", *where)
        assert void.returncode == 1 and _json(void)["code"] == "nothing_to_void"
        # not halted: refused, exit 1, as offline (below)
        clear = run_firebet("clear-halt", "--note", "n", "--yes", *where)
        assert clear.returncode == 1 and "not halted" in clear.stderr
        # `silence 5` as docs/bench.md writes it, and a fraction
        for seconds in ("5", "0.5"):
            proc = run_firebet("sim-reader", "silence", seconds, *where)
            assert proc.returncode == 0, proc.stderr
        assert run_firebet("sim-reader", "speak", *where).returncode == 0
        # a script's own request id: sent twice, done once
        first = run_firebet("bet", "3", "5", "--json", "--request-id", "shift-7", *where)
        assert first.returncode == 0, first.stderr
        done = _json(first)
        assert done["ok"] is True and done["request_id"] == "shift-7"
        assert [e["event"] for e in done["events"]] == ["bet"]  # type: ignore[union-attr]
        again = run_firebet("bet", "3", "5", "--json", "--request-id", "shift-7", *where)
        assert again.returncode == 0 and _json(again)["events"] == done["events"]
        status = json.loads(run_firebet("status", "--json", *where).stdout)
        assert status["bets"] == {"3": 5}  # not $10: the retry was not done again
        other = run_firebet("bet", "3", "10", "--json", "--request-id", "shift-7", *where)
        assert other.returncode == 1 and _json(other)["code"] == "request_id_reused"
        # a void names the record of the roll it undid
        assert run_firebet("sim-reader", "throw", "2", "2", *where).returncode == 0
        export = run_firebet("export", "--format", "jsonl", *where).stdout.splitlines()
        (thrown,) = [r for r in map(json.loads, export) if r["payload"].get("d1") == 2]
        undone = run_firebet("void", "--json", *where)
        assert undone.returncode == 0, undone.stderr
        (event,) = _json(undone)["events"]  # type: ignore[misc]
        assert event["event"] == "void" and (event["d1"], event["d2"]) == (2, 2)
        assert event["record"] == thrown["record"]
    # no service: 3, with the code under --json
    gone = run_firebet("void", "--json", *where)
    assert gone.returncode == 3 and _json(gone)["code"] == "no_service"
    # offline: clear-halt on a table that is not halted is 1, as through the service
    clear = run_firebet("clear-halt", "--note", "n", "--yes", *where)
    assert clear.returncode == 1 and "not halted" in clear.stderr
    assert run_firebet("history", "--hands", "1001", *where).returncode == 2


def test_a_halted_table_does_not_ack_a_throw_and_says_so(tmp_path: Path) -> None:
    state = tmp_path / "halted"
    state.mkdir()
    build(state)  # one journaled bet edited: the service starts halted
    with bench(state) as where:
        throw = run_firebet("sim-reader", "throw", "3", "4", "--wait", "1", *where)
        assert throw.returncode == 1, throw.stdout
        assert "not ACKed" in throw.stderr
        as_json = run_firebet("sim-reader", "throw", "3", "4", "--wait", "1", "--json", *where)
        assert as_json.returncode == 1 and _json(as_json)["code"] == "not_acked"
        bet = run_firebet("bet", "2", "5", "--json", *where)
        assert bet.returncode == 4 and _json(bet)["code"] == "halted"
        verify = run_firebet("journal", "verify", "--json", *where)
        assert verify.returncode == 4 and _json(verify)["code"] == "integrity"


def test_no_journal_is_a_failure_for_each_reader_of_it(tmp_path: Path) -> None:
    where = ("--state-dir", str(tmp_path / "empty"))
    for words in (("export", "--format", "csv"), ("history",), ("journal", "verify")):
        proc = run_firebet(*words, *where)
        assert proc.returncode == 1, (words, proc.stdout)
        assert "there is no journal at" in proc.stderr and proc.stdout == ""
    verify = run_firebet("journal", "verify", "--json", *where)
    assert verify.returncode == 1 and _json(verify)["code"] == "failed"


def test_a_request_id_is_answered_once_across_a_restart(tmp_path: Path) -> None:
    """A script whose reply was lost sends the same action with the same id again after
    the service restarted: it is answered with what was decided, not done again."""
    state = tmp_path / "bench"
    ask = ("bet", "4", "5", "--json", "--request-id", "shift-7/bet-1")
    with bench(state) as where:
        first = run_firebet(*ask, *where)
        assert first.returncode == 0, first.stderr
    with bench(state) as where:
        again = run_firebet(*ask, *where)
        assert again.returncode == 0, again.stderr
        body = _json(again)
        assert "before the service restarted; not done again" in str(body["repeated"])
        status = json.loads(run_firebet("status", "--json", *where).stdout)
        assert status["bets"] == {"4": 5}
        other = run_firebet("bet", "4", "10", "--json", "--request-id", "shift-7/bet-1", *where)
        assert other.returncode == 1 and _json(other)["code"] == "request_id_reused"
