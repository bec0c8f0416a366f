"""The command line as a newcomer reads it (issue 14.12): every command and argument says
what it is, no reST markup, an unknown option is named with its own command's usage."""

from __future__ import annotations

import argparse
import tomllib

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
