"""firebet reader-check, the conformance kit, against the simulated reader on a pty: a
reader that keeps protocol 3 passes every case it can be checked on (the operator's part,
throws, a fault and an invalid throw, played from the kit's own prompts); readers that
break the protocol (small fakes on a pty: one ignores every NAK, one repeats its HELLO too
slowly, one numbers on past 65,535 in the same session) fail the case that names it, in
text and --json."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from pathlib import Path

from drivers import codec
from drivers.conformance import CASES, WRAP_CASES
from drivers.sim_reader import SimulatedReader
from tests.support import ROOT, lines_of

DEADLINE_S = 120.0


class Operator:
    """Does what the kit asks on stderr, on the simulated reader (a thread)."""

    def __init__(self, device: SimulatedReader, stderr: object) -> None:
        self.device, self.stderr = device, stderr
        self.said: list[str] = []
        self.rng = random.Random(29)
        self.thread = threading.Thread(target=self._listen, daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        for line in self.stderr:  # type: ignore[attr-defined]
            self.said.append(line)
            if "throw the dice" in line:
                self.device.throw(self.rng.randint(1, 6), self.rng.randint(1, 6))
            elif "report a fault" in line:
                self.device.fault("CAMERA")
                self.device.clear_fault()
            elif "invalid throw" in line:
                self.device.noroll("COCKED")


def reader_check(device: SimulatedReader, *args: str) -> tuple[int, str, str]:
    """``firebet reader-check --port <device>`` with ``args``, the operator answering its
    prompts: (exit code, stdout, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "controller", "reader-check", "--port", device.port, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    operator = Operator(device, proc.stderr)
    try:
        assert proc.stdout is not None
        out = "".join(lines_of(proc.stdout, "firebet diag reader --check"))
        proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        operator.thread.join(timeout=5)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return proc.returncode, out, "".join(operator.said)


def verdicts(out: str) -> dict[str, str]:
    return {c["case"]: c["verdict"] for c in json.loads(out)["cases"]}


def test_the_simulated_reader_passes_every_case() -> None:
    with SimulatedReader(protocol=3, heartbeat_s=0.2) as device:
        code, out, err = reader_check(device, "--wait", "20", "--idle", "1", "--json")
    assert code == 0, out + err
    report = json.loads(out)
    got = verdicts(out)
    assert report["ok"] and report["model"] == "SIMREADER"
    assert list(got) == list(CASES)  # every case, in order
    assert got.pop("wrap") == "not checked"  # the wrap has its own run (--wrap)
    assert set(got.values()) == {"pass"}, out
    # it really went through them: four sessions opened, one carried roll dropped
    assert len(device.sessions) == 5 and len(device.dropped_carried) == 1


class DeafReader(SimulatedReader):
    """A reader that ignores every NAK (it keeps its session whatever it is told)."""

    def _on_nak(self, frame: codec.Frame) -> None:
        pass


def test_a_reader_that_ignores_nak_fails_the_case_named() -> None:
    with DeafReader(protocol=3, heartbeat_s=0.2) as device:
        code, out, err = reader_check(device, "--wait", "5", "-x")
    assert code == 1, out + err
    assert "FAIL         hello_anew_on_nak_session" in out, out
    assert "NOT CHECKED  nak_gap" in out  # -x: stopped at the first failure
    assert out.rstrip().endswith("FAIL: 1 case(s): hello_anew_on_nak_session")


def test_a_reader_that_repeats_its_hello_too_slowly_fails_json() -> None:
    # every 2.5 s, not every 500 ms: the kit hears a HELLO, then no repeat within 1.5 s
    with SimulatedReader(protocol=3, heartbeat_s=0.2, retransmit_s=2.5) as device:
        code, out, err = reader_check(device, "--wait", "3", "-x", "--json")
    assert code == 1, out + err
    got = verdicts(out)
    assert got["hello_repeated"] == "fail" and not json.loads(out)["ok"]
    assert got["line"] == "pass" and got["nak_gap"] == "not checked"


def test_the_wrap_run_passes_the_simulated_reader() -> None:
    # its test mode numbers the first session from 65,530: six rolls reach the wrap point
    device = SimulatedReader(protocol=3, heartbeat_s=0.2, interval_s=0.01, first_number=65_530)
    with device:
        code, out, err = reader_check(device, "--wrap", "--wait", "10", "--json")
    assert code == 0, out + err
    got = verdicts(out)
    assert list(got) == list(WRAP_CASES)
    assert set(got.values()) == {"pass"}, got
    assert "start at number 65530" in err
    assert len(device.sessions) == 2


class RunOnReader(SimulatedReader):
    """A reader that wraps its numbering to 0 in the same session (modulo, as protocol 2)."""

    def _numbers_spent(self) -> None:
        self._seq = -1  # the next roll is 0, of the same session


def test_a_reader_that_numbers_past_the_wrap_point_fails_it() -> None:
    device = RunOnReader(protocol=3, heartbeat_s=0.2, interval_s=0.01, first_number=65_533)
    with device:
        code, out, err = reader_check(device, "--wrap", "--wait", "5")
    assert code == 1, out + err
    assert "FAIL         wrap_new_session" in out, out
    assert "a ROLL after 65,535" in out


def test_every_case_is_documented() -> None:
    doc = (Path(ROOT) / "docs" / "reader-protocol.md").read_text(encoding="utf-8")
    kit = doc[doc.index("## Conformance kit") :]
    for name in (*CASES, *WRAP_CASES):
        assert f"| `{name}` |" in kit, f"{name} is not in docs/reader-protocol.md's kit table"
