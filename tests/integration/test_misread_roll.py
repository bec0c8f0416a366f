"""docs/runbook.md, "Misread roll", run as written against a table whose dice reader is
working: the correction is one action, journaled with who, metered, from the command line
and after the void button."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from controller.journal import Journal
from tests.support import PROCESS_DEADLINE_S, ROOT, RunningTable, run_firebet, wait_for

RUNBOOK = ROOT / "docs" / "runbook.md"


def runbook_steps() -> list[list[str]]:
    """The commands of the runbook's "Misread roll" code block, word by word."""
    text = RUNBOOK.read_text()
    section = text[text.index("## Misread roll") :]
    section = section[: section.index("\n## ", 3)]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.S)
    steps = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if words:
            assert words[0] == "firebet", line
            steps.append(words[1:])
    return steps


def misread(t: RunningTable) -> None:
    """$5 on position 1, the point 4, then the reader reads 5 3 (the dice show 4 3)."""
    assert t.ask("bet", position=1, amount=5)["ok"]
    t.throw(2, 2)
    t.throw(5, 3)
    wait_for(lambda: t.status()["rolls"] == 2, what="the two rolls")


def correction_records(t: RunningTable) -> list[tuple[str, dict[str, object]]]:
    with Journal(t.controller.journal.path, read_only=True) as journal:
        journal.attach()
        return [
            (r.actor, r.data())
            for r in journal.records()
            if r.kind == "command" and r.data().get("command") == "correct"
        ]


def test_the_runbook_s_misread_roll_steps_run_as_written(running_table: RunningTable) -> None:
    t = running_table
    misread(t)
    # the reader works: manual entry is refused (what the runbook said to do before)
    wait_for(lambda: t.status()["mode"] == "running", what="the reader working")
    refused = run_firebet("roll", "4", "3", "--socket", str(t.socket))
    assert refused.returncode == 1, (refused.stdout, refused.stderr, t.status()["mode"])
    assert "the dice reader is working" in refused.stderr
    steps = runbook_steps()
    assert ["correct", "4", "3"] in steps
    for words in steps:
        done = run_firebet(*words, "--socket", str(t.socket))
        assert done.returncode == 0, (words, done.stderr)
    s = t.status()
    assert s["last_roll"] == [4, 3] and s["rolls"] == 2 and s["hand"] == 2, s  # a seven-out
    meters = s["meters"]
    assert meters["voids"] == 1 and meters["corrections"] == 1, meters
    assert meters["lost"]["count"] == 1, meters
    ((actor, body),) = correction_records(t)  # one action, journaled with who
    assert body["d1"] == 4 and body["d2"] == 3 and actor not in ("", "dealer", "button")
    hands: list[dict[str, Any]] = []

    def recalled() -> bool:  # the recall process starts at the first request: a busy
        done = run_firebet("history", "--json", "--hands", "2", "--socket", str(t.socket))
        if done.returncode == 0:  # machine may answer "busy" first; ask again then
            hands.extend(json.loads(line) for line in done.stdout.splitlines())
        return bool(hands)

    wait_for(recalled, timeout=PROCESS_DEADLINE_S, what="the table's history")
    (first,) = [h for h in hands if h["hand"] == 1]  # the corrected seven-out's hand
    actions = [a["action"] for a in first["actions"]]
    assert "void" in actions and "correction" in actions
    # the reader goes on: its next roll counts at once; the corrected roll stays corrected
    t.throw(6, 6)
    wait_for(lambda: t.status()["rolls"] == 3, what="the next reader roll")
    again = run_firebet("correct", "4", "3", "--roll", "2", "--socket", str(t.socket))
    assert again.returncode == 1 and "not the last roll" in again.stderr, again.stderr


def test_the_void_button_arms_a_correction_the_dealer_completes(
    running_table: RunningTable,
) -> None:
    t = running_table
    misread(t)
    pin = t.pin(t.controller.config.buttons.void)
    pin.drive_low()
    wait_for(lambda: t.status()["correction_pending"] == [5, 3], what="the button's void")
    pin.drive_high()
    assert t.status()["rolls"] == 1
    shown = run_firebet("status", "--socket", str(t.socket))
    assert "CORRECTION PENDING" in shown.stdout and "read as 5 3" in shown.stdout
    t.throw(6, 6)  # the reader's roll meanwhile is held, not applied
    wait_for(lambda: t.status()["held_rolls"], what="the held roll")
    bet = run_firebet("bet", "2", "5", "--json", "--socket", str(t.socket))
    assert bet.returncode == 1 and json.loads(bet.stdout)["code"] == "correction_pending"
    done = run_firebet("correct", "4", "3", "--socket", str(t.socket))
    assert done.returncode == 0, done.stderr
    assert "read as 5 3" in done.stdout
    s = t.status()
    assert s["correction_pending"] is None and s["last_roll"] == [4, 3] and s["rolls"] == 2
    assert s["meters"]["corrections"] == 1 and s["meters"]["voids"] == 1
    assert len(s["held_rolls"]) == 1  # the throw meanwhile: the dealer decides it
    listed = run_firebet("held", "--json", "--socket", str(t.socket))  # cli-held.schema.json
    assert listed.returncode == 0, listed.stderr
    (held,) = json.loads(listed.stdout)["held_rolls"]
    assert held["dice"] == [6, 6] and held == s["held_rolls"][0]
    ((actor, _),) = correction_records(t)
    assert actor not in ("", "button")
