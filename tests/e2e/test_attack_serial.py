"""The serial-garbage attack harness (bench/attack_serial.py) runs and holds, small."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import PROCESS_DEADLINE_S, ROOT


@pytest.mark.slow
def test_the_serial_garbage_attack_holds() -> None:
    done = subprocess.run(
        [
            sys.executable, "bench/attack_serial.py",
            "--megabytes", "0.3", "--junk-frames", "1500", "--genuine", "15", "--seed", "3",
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=PROCESS_DEADLINE_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "applied junk: 0 (must be 0)" in done.stdout
    assert "genuine rolls ACKed: 15/15" in done.stdout and "attack held" in done.stdout
