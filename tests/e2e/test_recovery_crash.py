"""kill -9 at random moments: nothing ACKed is lost, nothing is applied twice (docs/journal.md)."""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from controller.core.engine import Engine
from controller.core.script import replay
from controller.journal import Journal, recover, verify
from controller.journal.play import decide
from tests.e2e.crash_worker import SNAPSHOT_EVERY, script
from tests.support import lines_of, read_line, recall

WORKER = Path(__file__).with_name("crash_worker.py")
SEED = 4
COUNT = 500
KILLS = 40
MOST_BEFORE_A_KILL = 10  # commands ACKed before a kill: 40 kills x (10 + 1) < 500


def go(proc: subprocess.Popen[str]) -> None:
    """Let the worker take its next command (nothing, once it is dead)."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write("go\n")
        proc.stdin.flush()


def _command_records(journal: Journal) -> int:
    return sum(1 for r in journal.records() if r.kind == "command")


@pytest.mark.slow
def test_sigkill_loses_no_acked_command_and_applies_none_twice(tmp_path: Path) -> None:
    engine = Engine()
    commands = script(SEED, COUNT)
    expected = [replay(engine, enumerate(commands[:n])).state for n in range(COUNT + 1)]
    rng = random.Random(SEED)
    acked = -1  # highest ACKed command index
    kills = 0
    done = False
    while not done:
        start = acked + 1
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(tmp_path), str(SEED), str(COUNT), str(start)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        assert read_line(proc.stdout, "the crash worker").strip() == "READY"
        # the worker takes a command each time it is told (go): at most one is in flight at
        # a kill, so the 40 kills (at most 11 commands each) always fit in the 500
        budget = rng.randint(0, MOST_BEFORE_A_KILL) if kills < KILLS else None
        go(proc)
        if budget is None:
            proc.stdin.close()  # no more kills: the rest of the script at full speed
        elif budget == 0:  # kill at a random instant, not just after an ACK
            time.sleep(rng.uniform(0, 0.01))
            proc.kill()
            kills += 1
        for seen, line in enumerate(lines_of(proc.stdout, "the crash worker"), start=1):
            word, _, arg = line.strip().partition(" ")
            if word == "DONE":
                done = True
                break
            assert word == "ACK", line
            assert int(arg) == acked + 1, f"ACK {arg} out of order after {acked}"
            acked = int(arg)
            if not budget:  # running free, or killed already (the ACKs on the wire)
                continue
            go(proc)  # the next command is in flight now
            if seen >= budget:
                time.sleep(rng.uniform(0, 0.002))  # somewhere in its journaling, or after
                proc.kill()
                kills += 1
                break
        for line in lines_of(
            proc.stdout, "the crash worker"
        ):  # ACKs already on the wire before the kill count too
            word, _, arg = line.strip().partition(" ")
            if word == "ACK":
                assert int(arg) == acked + 1
                acked = int(arg)
            elif word == "DONE":
                done = True
        proc.stdout.close()
        proc.wait()
        if not proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                proc.stdin.close()
        with Journal(tmp_path / "journal.db", read_only=True) as journal:
            state = recover(journal, engine.rules).state
            applied = _command_records(journal)
        # exactly the ACKed commands, or those and the one in flight (durable, reply lost)
        assert applied in (acked + 1, acked + 2)
        assert state.to_dict() == expected[applied].to_dict()

    assert kills == KILLS
    assert acked == COUNT - 1
    with Journal(tmp_path / "journal.db", snapshot_every=SNAPSHOT_EVERY) as journal:
        recovered = recover(journal, engine.rules)
        assert recovered.halted is None
        assert recovered.state.to_dict() == expected[COUNT].to_dict()
        assert _command_records(journal) == COUNT  # none applied twice
        assert verify(journal, engine.rules).ok
        history = recall(journal, 1000)

    reference_dir = tmp_path / "reference"
    with Journal(reference_dir / "journal.db", snapshot_every=SNAPSHOT_EVERY) as ref:
        ref_replay = recover(ref, engine.rules).replay
        for command in commands:
            decide(ref, ref_replay, command)
        assert recall(ref, 1000) == history
    settled = [s.report() for s in replay(engine, enumerate(commands)).settlements]
    recalled = [{k: h[k] for k in settled[0]} for h in history if h["result"] is not None]
    assert recalled == settled
