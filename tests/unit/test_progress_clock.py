"""Progress of long work on a terminal (``controller/cli/progress.py``) and doctor's clock
synchronisation check (``controller/cli/doctor.py``)."""

from __future__ import annotations

import io
import subprocess
from typing import Any

from controller.cli import progress
from controller.cli.doctor import Check, clock_synchronised


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_in_place_at_most_every_redraw_interval() -> None:
    err, now = Terminal(), [0.0]
    bar = progress.Progress("verify", "records", enabled=True, err=err, clock=lambda: now[0])
    bar.update(4096, 100_000)
    now[0] = 0.05
    bar.update(8192, 100_000)  # too soon: not drawn
    now[0] = 1.0
    bar.update(50_000, 100_000)
    bar.close()
    frames = err.getvalue().split("\r")
    assert frames[1].startswith("verify: 4,096 of 100,000 records (4%)")
    assert frames[2].startswith("verify: 50,000 of 100,000 records (50%), 50,000 records/s")
    assert "8,192" not in err.getvalue()
    assert frames[-1] == ""  # the line wiped at the end


def test_progress_is_quiet_off_a_terminal_for_json_and_under_its_own_output() -> None:
    assert progress.wanted(err=Terminal())
    assert not progress.wanted(err=io.StringIO())  # piped, a file, CI
    assert not progress.wanted(json=True, err=Terminal())
    assert not progress.wanted(output_shown=True, err=Terminal())
    err = io.StringIO()
    bar = progress.Progress("export", "records", enabled=False, err=err)
    bar.update(10, 20)
    bar.close()
    assert err.getvalue() == ""


def answer(stdout: str, code: int = 0, stderr: str = "") -> Any:
    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert argv[:2] == ["timedatectl", "show"]
        return subprocess.CompletedProcess(argv, code, stdout, stderr)

    return run


def test_the_clock_is_synchronised_or_not_as_timedatectl_says() -> None:
    assert clock_synchronised(answer("NTPSynchronized=yes\nNTP=yes\n")) == (
        True,
        "timedatectl: synchronised yes, NTP on",
    )
    assert clock_synchronised(answer("NTPSynchronized=no\nNTP=no\n")) == (
        False,
        "timedatectl: synchronised no, NTP off",
    )


def test_a_clock_that_cannot_be_asked_is_unknown_not_fine() -> None:
    def missing(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise FileNotFoundError(argv[0])

    assert clock_synchronised(missing) == (None, "timedatectl is not installed (no systemd?)")
    synced, how = clock_synchronised(answer("", 1, "Failed to connect to bus: Host is down\n"))
    assert synced is None and "Failed to connect to bus" in how


def test_a_warning_passes_but_is_marked() -> None:
    assert Check("clock", True, "d", "fix", warning=True).mark == "!"
    assert Check("clock", True, "d").mark == "✓"
    assert Check("clock", False, "d").mark == "✗"
    assert Check("clock", True, "d", "f", warning=True).to_dict()["warning"] is True
