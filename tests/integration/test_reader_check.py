"""firebet reader-check, the conformance kit, against the simulated reader on a pty: a
reader that keeps protocol 3 passes every case it can be checked on; one that does not
repeat its HELLO fails that case, and the report says so (text and --json)."""

from __future__ import annotations

import json

from drivers.sim_reader import SimulatedReader
from tests.support import run_firebet


def test_the_simulated_reader_passes_the_kit() -> None:
    with SimulatedReader(protocol=3, heartbeat_s=0.2, script=[(2, 3), (4, 5)]) as device:
        out = run_firebet("reader-check", "--port", device.port, "--wait", "20", "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    verdicts = {c["case"]: c["verdict"] for c in report["cases"]}
    assert report["ok"] and report["model"] == "SIMREADER"
    assert verdicts.pop("wrap") == "not checked"
    assert set(verdicts.values()) == {"pass"}, verdicts
    assert {"hello_repeated", "roll_repeated", "ack_ends_repeat", "carried_resent", "idle"} <= (
        set(verdicts)
    )


def test_a_reader_that_repeats_its_hello_too_slowly_fails() -> None:
    # every 2.5 s, not every 500 ms: the kit hears a HELLO, then no repeat within 1.5 s
    device = SimulatedReader(protocol=3, heartbeat_s=0.2, retransmit_s=2.5, script=[(2, 3)])
    with device:
        out = run_firebet("reader-check", "--port", device.port, "--wait", "3")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "FAIL         hello_repeated" in out.stdout and out.stdout.rstrip().endswith("case(s)")
