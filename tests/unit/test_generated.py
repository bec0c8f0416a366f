"""Shell completion and the man page come from the parser (issue 14): every command is in
both, and bash completes commands, options and choices from the generated script."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from controller.cli import build_parser
from controller.cli.generated import completion, main, man_page

COMMANDS = sorted(
    next(a for a in build_parser()._actions if a.dest == "command").choices  # type: ignore[arg-type]
)


def complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last of ``words`` with the generated script loaded."""
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
        'COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; '
        '_shtab_firebet; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_bash_completes_commands_options_and_choices(tmp_path: Path) -> None:
    script = tmp_path / "firebet.bash"
    script.write_text(completion("bash"))
    assert complete(script, "firebet", "sta") == ["status"]
    assert complete(script, "firebet", "status", "--j") == ["--json"]
    assert complete(script, "firebet", "export", "--format", "") == ["csv", "jsonl"]
    assert "unplug" in complete(script, "firebet", "sim-reader", "")
    assert set(COMMANDS) <= set(complete(script, "firebet", ""))


def test_zsh_completion_names_every_command() -> None:
    script = completion("zsh")
    assert script.startswith("#compdef firebet")
    for command in COMMANDS:
        assert command in script


def test_the_man_page_has_every_command_and_the_exit_codes() -> None:
    page = man_page()
    assert page.startswith(".TH FIREBET 1") or page.startswith('.TH FIREBET "1"')
    for command in COMMANDS:
        roff = command.replace("-", "\\-")  # roff escapes a hyphen
        assert f"\\fBfirebet {roff}\\fR" in page, command
    assert '.SH "EXIT STATUS"' in page and "4 journal integrity failure" in page


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_man_renders_the_page(tmp_path: Path) -> None:
    page = tmp_path / "firebet.1"
    page.write_text(man_page())
    shown = subprocess.run(
        ["man", "-l", str(page)], capture_output=True, text=True, check=True,
        env={"MANWIDTH": "80", "PATH": "/usr/bin:/bin", "MAN_KEEP_FORMATTING": "0"},
    ).stdout  # fmt: skip
    shown = re.sub(".\b", "", shown)  # bold and underline are overstruck characters
    assert "firebet sim-reader" in shown and "EXIT STATUS" in shown


def test_the_generator_prints_what_install_sh_writes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    assert "complete -o bashdefault -F _shtab_firebet firebet" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["completion", "fish"])


def test_man_page_usage_lines_stay_as_laid_out_and_it_has_examples() -> None:
    page = man_page()
    lines = page.splitlines()
    usages = [i for i, line in enumerate(lines) if line.startswith("usage: firebet ")]
    assert usages and all(lines[i - 1] == ".nf" for i in usages)  # never filled into prose
    for i in usages:
        j = i + 1
        while lines[j].startswith(" "):
            j += 1
        assert lines[j] == ".fi", lines[i : j + 1]
    assert '.SH "EXAMPLES"' in page and "firebet bet 3 5" in page
