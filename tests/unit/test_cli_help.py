"""The command line as a newcomer reads it (issue 14.12): every command and argument says
what it is, no reST markup, an unknown option is named with its own command's usage."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from controller import __version__
from controller.cli import _walk, build_parser, main
from tests.support import ROOT

SKIP = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def test_every_command_has_a_description_and_every_argument_a_help() -> None:
    parsers = _walk(build_parser())
    assert len(parsers) > 20
    for parser in parsers:
        assert parser.description, f"{parser.prog} has no description"
        for action in parser._actions:
            if not isinstance(action, SKIP):
                assert action.help, f"{parser.prog} {action.dest} has no help"
        assert "``" not in parser.format_help(), f"{parser.prog} --help shows reST markup"


@pytest.mark.parametrize("command", ["history", "export", "clear-halt", "doctor", "journal"])
def test_the_audit_commands_say_what_they_do(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    usage, _, rest = capsys.readouterr().out.partition("\n\n")
    assert usage.startswith(f"usage: firebet {command}")
    assert not rest.startswith(("positional arguments", "options")), rest[:80]


def test_an_unknown_option_gets_its_commands_usage_and_a_hint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["status", "--jsno"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: firebet status ")
    assert "unrecognized arguments: --jsno (did you mean --json?)" in err
    with pytest.raises(SystemExit):
        main(["diag", "leds", "--colour"])
    assert capsys.readouterr().err.startswith("usage: firebet diag leds ")


def test_version_is_the_projects(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert capsys.readouterr().out == f"firebet {project['version']}\n"
    assert __version__ == project["version"]


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_each_command_is_named_with_the_module_that_adds_it() -> None:
    from controller.cli import COMMAND_MODULES, COMMANDS

    full = _subcommands(build_parser())
    assert sorted(COMMANDS) == sorted(full)
    assert sorted(set(COMMANDS.values())) == sorted(COMMAND_MODULES)
    for command, module in COMMANDS.items():
        own = _subcommands(build_parser(command))
        assert command in own, f"{module} does not add {command}"
        assert all(COMMANDS[other] == module for other in own), sorted(own)
        # the command's own parser reads and explains it exactly as the full one does
        assert own[command].format_help() == full[command].format_help(), command


def test_a_command_loads_its_own_module_not_the_service_or_the_floor(tmp_path: Path) -> None:
    script = tmp_path / "rolls.txt"
    script.write_text("3 4\n4 4\n", encoding="utf-8")
    probe = (
        "import sys\n"
        "from controller.cli import main\n"
        f"code = main(['replay', {str(script)!r}, '--json'])\n"
        "print(code, sorted(m for m in sys.modules if m.startswith(('controller.', 'drivers'))"
        " or m in ('uvicorn', 'starlette', 'paho', 'jinja2', 'serial', 'gpiozero')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    code, loaded = proc.stdout.strip().splitlines()[-1].split(" ", 1)
    assert code == "0"
    for heavy in ("controller.service", "controller.floor", "controller.link", "controller.journal",
                  "uvicorn",
                  "starlette", "paho", "serial", "gpiozero", "drivers"):  # fmt: skip
        assert f"'{heavy}" not in loaded, f"firebet replay loaded {heavy}: {loaded}"
    assert "'controller.cli.replay'" in loaded
